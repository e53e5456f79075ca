// The f16 precision mode's per-row range guard, and the f16 rounding it protects.
//
// In f16 mode the engine stores activations and outputs as f16 (as accelerators store
// them) while accumulating in f32. f16 holds magnitudes from 2^-24 (subnormal) to 65504:
// a row of activations around 1e6 would become inf and one around 1e-8 would flush to
// zero. The guard scales each row by a power of two 2^k chosen from the row's largest
// magnitude before rounding to f16 and unscales it in f32 afterwards (exact: powers of two
// only move the exponent). Products are linear, so an input row's scale simply carries
// through to the output row, which is unscaled, then guarded and rounded again.
#pragma once
#include <cstdint>
#include <string>

namespace nl::engine {

// k such that max_abs * 2^k lies in [2^14, 2^15): the row's largest value keeps a binade of
// headroom under f16's maximum (65504 < 2^16) and its small values keep 38 binades above
// f16's smallest subnormal. 0 for a zero or non-finite max (nothing to protect, or nothing
// that could be saved); clamped to [-126, 126] so 2^k and 2^-k are f32 numbers.
int range_guard_exponent(float max_abs);

// The f16 conversions per instruction set (F16C on AVX2, fcvt on NEON, nl::f32_to_fp16
// otherwise); every set rounds to nearest even, subnormals included, so they agree bit for
// bit.
struct F16Kernels {
  const char* isa;
  float (*max_abs)(const float* x, int64_t n);
  // out[i] = f32(f16(x[i] * scale_in)) * scale_out. In-place (out == x) is allowed.
  void (*round_f16)(const float* x, int64_t n, float scale_in, float scale_out, float* out);
};

const F16Kernels& f16_kernels_scalar();
const F16Kernels* f16_kernels_avx2();  // nullptr without F16C (build or CPU)
const F16Kernels* f16_kernels_neon();  // nullptr off aarch64
const F16Kernels& f16_kernels_for(const std::string& isa);

// An input row for f16 mode: out = f16(x * 2^k), still scaled; returns k.
int guard_input_row(const F16Kernels& k, const float* x, int64_t n, float* out);
// An output row of f16 mode, in place: first unscaled by the input row's 2^-k_in (the
// exact f32 result of the product of the unscaled row), then guarded and stored as f16
// (rounded with its own power of two, unscaled again).
void guard_output_row(const F16Kernels& k, float* y, int64_t n, int k_in);

}  // namespace nl::engine
