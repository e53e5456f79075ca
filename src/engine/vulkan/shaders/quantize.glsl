// The int8 quantizer of the int8 precision mode, as the cpu engine defines it
// (src/engine/kernels_int8.h): for a block of 32 values, d = max|v| / 127 and
// q = round-half-to-even(v * (1 / d)) (q = 0 when d = 0; a non-finite value gives -128).
int quantize_value(float v, float inv) {
  const float r = roundEven(v * inv);
  return r >= -128.0 && r <= 127.0 ? int(r) : -128;
}
float quant_scale(float amax) { return amax / 127.0; }
float quant_inverse(float d) { return d != 0.0 ? 1.0 / d : 0.0; }
