// f16 rounding on arm64: fcvtn/fcvtl round to nearest even (the default FPCR mode) with
// subnormals, the same values as nl::f32_to_fp16.
#include "range_guard.h"

#if defined(__aarch64__)
#include <arm_neon.h>

#include <cmath>

#include "nightlora/util/half.h"

namespace nl::engine {
namespace {

float max_abs_neon(const float* x, int64_t n) {
  float32x4_t m = vdupq_n_f32(0.0f);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) m = vmaxnmq_f32(m, vabsq_f32(vld1q_f32(x + i)));
  float r = vmaxnmvq_f32(m);
  for (; i < n; ++i) r = std::fmax(r, std::fabs(x[i]));
  return r;
}

void round_f16_neon(const float* x, int64_t n, float scale_in, float scale_out, float* out) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const float16x4_t h = vcvt_f16_f32(vmulq_n_f32(vld1q_f32(x + i), scale_in));
    vst1q_f32(out + i, vmulq_n_f32(vcvt_f32_f16(h), scale_out));
  }
  for (; i < n; ++i) out[i] = fp16_to_f32(f32_to_fp16(x[i] * scale_in)) * scale_out;
}

}  // namespace

const F16Kernels* f16_kernels_neon() {
  static const F16Kernels k{"neon", max_abs_neon, round_f16_neon};
  return &k;
}

}  // namespace nl::engine

#else

namespace nl::engine {
const F16Kernels* f16_kernels_neon() { return nullptr; }
}  // namespace nl::engine

#endif
