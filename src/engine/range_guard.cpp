#include "range_guard.h"

#include <cmath>

#include "nightlora/util/half.h"

namespace nl::engine {
namespace {

float max_abs_scalar(const float* x, int64_t n) {
  float m = 0.0f;
  for (int64_t i = 0; i < n; ++i) m = std::fmax(m, std::fabs(x[i]));
  return m;
}

void round_f16_scalar(const float* x, int64_t n, float scale_in, float scale_out, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = fp16_to_f32(f32_to_fp16(x[i] * scale_in)) * scale_out;
}

}  // namespace

int range_guard_exponent(float max_abs) {
  if (!(max_abs > 0.0f) || !std::isfinite(max_abs)) return 0;
  int e;
  std::frexp(max_abs, &e);  // max_abs in [2^(e-1), 2^e)
  const int k = 15 - e;
  return k < -126 ? -126 : (k > 126 ? 126 : k);
}

const F16Kernels& f16_kernels_scalar() {
  static const F16Kernels k{"scalar", max_abs_scalar, round_f16_scalar};
  return k;
}

const F16Kernels& f16_kernels_for(const std::string& isa) {
  if (isa == "avx2" && f16_kernels_avx2()) return *f16_kernels_avx2();
  if (isa.rfind("neon", 0) == 0 && f16_kernels_neon()) return *f16_kernels_neon();
  return f16_kernels_scalar();
}

int guard_input_row(const F16Kernels& k, const float* x, int64_t n, float* out) {
  const int e = range_guard_exponent(k.max_abs(x, n));
  k.round_f16(x, n, std::ldexp(1.0f, e), 1.0f, out);
  return e;
}

void guard_output_row(const F16Kernels& k, float* y, int64_t n, int k_in) {
  if (k_in != 0) {
    const float unscale = std::ldexp(1.0f, -k_in);
    for (int64_t i = 0; i < n; ++i) y[i] *= unscale;
  }
  const int e = range_guard_exponent(k.max_abs(y, n));
  k.round_f16(y, n, std::ldexp(1.0f, e), std::ldexp(1.0f, -e), y);
}

}  // namespace nl::engine
