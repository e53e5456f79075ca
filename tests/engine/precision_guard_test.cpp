// The f16 mode's per-row range guard (src/engine/range_guard.h): the power of two it picks,
// what f16 storage does to rows of 1e6 and 1e-8 without it (inf, zero) and with it (finite,
// within f16 rounding), and that every f16 conversion set (scalar, F16C, NEON) agrees.
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "../../src/engine/range_guard.h"
#include "nightlora/util/half.h"

namespace {

using nl::engine::F16Kernels;

float f16_round(float x) { return nl::fp16_to_f32(nl::f32_to_fp16(x)); }

std::vector<const F16Kernels*> f16_sets() {
  std::vector<const F16Kernels*> sets = {&nl::engine::f16_kernels_scalar()};
  if (nl::engine::f16_kernels_avx2()) sets.push_back(nl::engine::f16_kernels_avx2());
  if (nl::engine::f16_kernels_neon()) sets.push_back(nl::engine::f16_kernels_neon());
  return sets;
}

// A row of normal values with magnitude around `scale`.
std::vector<float> row_of(float scale, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = nd(rng) * scale;
  return v;
}

TEST(RangeGuard, ExponentPutsTheRowMaximumInOneBinadeBelowTheF16Maximum) {
  for (float m : {1e-30f, 1e-8f, 3e-5f, 0.5f, 1.0f, 1000.0f, 65504.0f, 1e6f, 3e20f}) {
    const int k = nl::engine::range_guard_exponent(m);
    const float scaled = std::ldexp(m, k);
    EXPECT_GE(scaled, 16384.0f) << m;
    EXPECT_LT(scaled, 32768.0f) << m;
  }
  // Nothing to protect, or nothing that could be saved.
  EXPECT_EQ(nl::engine::range_guard_exponent(0.0f), 0);
  EXPECT_EQ(nl::engine::range_guard_exponent(INFINITY), 0);
  EXPECT_EQ(nl::engine::range_guard_exponent(NAN), 0);
  // Clamped so 2^k and 2^-k stay f32 numbers.
  EXPECT_EQ(nl::engine::range_guard_exponent(1e-44f), 126);
}

// Why the guard exists: f16 storage alone turns a row of ~1e6 into inf and a row of ~1e-8
// into zeros.
TEST(RangeGuard, WithoutItF16OverflowsAndUnderflows) {
  const std::vector<float> big = row_of(1e6f, 64, 1), tiny = row_of(1e-8f, 64, 2);
  int inf = 0, zero = 0;
  for (float x : big) inf += std::isinf(f16_round(x));
  for (float x : tiny) zero += f16_round(x) == 0.0f;
  EXPECT_GT(inf, 48) << "most values of a 1e6 row overflow f16";
  EXPECT_GT(zero, 24) << "many values of a 1e-8 row flush to zero in f16";
}

TEST(RangeGuard, GuardedRowsStayFiniteAndWithinF16Rounding) {
  for (const F16Kernels* k : f16_sets())
    for (float scale : {1e6f, 1e-8f, 1.0f, 3e-3f}) {
      SCOPED_TRACE(std::string(k->isa) + " scale " + std::to_string(scale));
      const std::vector<float> x = row_of(scale, 67, 3);  // 67: the SIMD loops' tails too
      std::vector<float> staged(x.size());
      const int e = nl::engine::guard_input_row(*k, x.data(), static_cast<int64_t>(x.size()), staged.data());
      float m = 0;
      for (float v : x) m = std::max(m, std::fabs(v));
      for (size_t i = 0; i < x.size(); ++i) {
        ASSERT_TRUE(std::isfinite(staged[i]));
        // staged is still scaled by 2^e: unscaled, it is x within f16's relative rounding
        // (2^-11) of the row maximum (the guard keeps every value of the row normal or
        // above f16's subnormal floor relative to the maximum).
        EXPECT_NEAR(std::ldexp(staged[i], -e), x[i], m * std::ldexp(1.0f, -11));
      }
      // An output row: the guard applied in place after unscaling by the input's 2^-e.
      std::vector<float> y = staged;
      nl::engine::guard_output_row(*k, y.data(), static_cast<int64_t>(y.size()), e);
      for (size_t i = 0; i < y.size(); ++i) {
        ASSERT_TRUE(std::isfinite(y[i]));
        EXPECT_NEAR(y[i], x[i], m * std::ldexp(1.0f, -10));
        EXPECT_EQ(y[i] != 0.0f, x[i] != 0.0f) << "nothing flushes to zero";
      }
    }
}

TEST(RangeGuard, EveryF16SetRoundsLikeTheScalarReference) {
  // Values over the whole f16 range: normals, subnormals, halfway cases, overflow.
  std::vector<float> x;
  for (int e = -30; e <= 17; ++e)
    for (float m : {1.0f, 1.0009765625f, 1.00048828125f, 1.5f, 1.99951171875f, -1.25f})
      x.push_back(std::ldexp(m, e));
  const std::vector<float> row = row_of(1.0f, 37, 4);
  x.insert(x.end(), row.begin(), row.end());
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<float> want(x.size()), got(x.size());
  nl::engine::f16_kernels_scalar().round_f16(x.data(), n, 2.0f, 0.25f, want.data());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(want[i], f16_round(x[i] * 2.0f) * 0.25f) << x[i];
  for (const F16Kernels* k : f16_sets()) {
    k->round_f16(x.data(), n, 2.0f, 0.25f, got.data());
    for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(got[i], want[i]) << k->isa << " at " << x[i];
    EXPECT_EQ(k->max_abs(x.data(), n), nl::engine::f16_kernels_scalar().max_abs(x.data(), n)) << k->isa;
  }
}

}  // namespace
