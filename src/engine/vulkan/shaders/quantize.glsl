// The int8 quantizer of the int8 precision mode, as the cpu engine defines it
// (src/engine/kernels_int8.h): for a block of 32 values, d = max|v| / 127 and
// q = round-half-to-even(v * (1 / d)) (q = 0 when d = 0; a non-finite value gives -128).
int quantize_value(float v, float inv) {
  const float r = roundEven(v * inv);
  return r >= -128.0 && r <= 127.0 ? int(r) : -128;
}
float quant_scale(float amax) { return amax / 127.0; }
float quant_inverse(float d) { return d != 0.0 ? 1.0 / d : 0.0; }
// Weights without quants of their own (F32/F16) as the cpu engine's Q8_0 copy of them
// (kernels_int8.h quantize_block_q8_0): per block of 32, d = the smallest half >= max|w| /
// 127, q = round-half-to-even(w / d) (0 when d = 0).
float weight_scale(float amax) {
  const float want = amax / 127.0;
  if (want == 0.0) return 0.0;
  if (want > 65504.0) return uintBitsToFloat(0x7f800000u);  // past the largest half: inf
  // A half's step: 2^(e - 10) in the binade 2^e of a normal half, 2^-24 below 2^-14.
  const int e = int((floatBitsToUint(want) >> 23) & 0xffu) - 127;
  const float step = e < -14 ? uintBitsToFloat(uint(127 - 24) << 23) : uintBitsToFloat(uint(127 + e - 10) << 23);
  return ceil(want / step) * step;  // (exact: step is a power of two)
}
int quantize_weight(float w, float d) { return d != 0.0 ? quantize_value(w / d, 1.0) : 0; }
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
