// The int8 quantizer of the int8 precision mode, as the cpu engine defines it
// (src/engine/kernels_int8.h): for a block of 32 values, d = max|v| / 127 and
// q = round-half-to-even(v * (1 / d)) (q = 0 when d = 0; a non-finite value gives -128).
int quantize_value(float v, float inv) {
  const float r = roundEven(v * inv);
  return r >= -128.0 && r <= 127.0 ? int(r) : -128;
}
float quant_scale(float amax) { return amax / 127.0; }
float quant_inverse(float d) { return d != 0.0 ? 1.0 / d : 0.0; }
// The input gradient's fixed-point requantization of y * rho (kernels_int8.h grad_y16,
// grad_rho16, requantize_grad_value): y16 = round(256 y), rho16 = round(16384 rho), then
// round(y16 rho16 / 2^15) and round(that / 128), each half up, saturated to int8.
int to_int16(float v) {
  const float r = roundEven(v);
  return r >= -32768.0 && r <= 32767.0 ? int(r) : -32768;
}
int requantize_grad(float y, float rho) {
  const int u = (to_int16(y * 256.0) * to_int16(rho * 16384.0) + 16384) >> 15;
  return clamp((u * 256 + 16384) >> 15, -128, 127);
}
