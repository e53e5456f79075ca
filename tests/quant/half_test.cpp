// Edge cases of the f16 and bf16 conversions in nightlora/util/half.h: the bit patterns
// below are IEEE 754 binary16 / bfloat16 facts, written out by hand.
#include <cmath>
#include <cstdint>
#include <limits>

#include "nightlora/util/half.h"
#include "test_util.h"

using nl::bf16_to_f32;
using nl::bits_from_f32;
using nl::f32_from_bits;
using nl::f32_to_bf16;
using nl::f32_to_fp16;
using nl::fp16_to_f32;

TEST(Half, DecodesNormalsZerosAndInfinities) {
  EXPECT_EQ(fp16_to_f32(0x3C00), 1.0f);
  EXPECT_EQ(fp16_to_f32(0xC000), -2.0f);
  EXPECT_EQ(fp16_to_f32(0x3555), 0.333251953125f);
  EXPECT_EQ(fp16_to_f32(0x7BFF), 65504.0f);            // largest finite half
  EXPECT_EQ(fp16_to_f32(0x0400), std::ldexp(1.0f, -14));  // smallest normal
  EXPECT_EQ(bits_from_f32(fp16_to_f32(0x0000)), 0x00000000u);
  EXPECT_EQ(bits_from_f32(fp16_to_f32(0x8000)), 0x80000000u);  // -0 keeps its sign
  EXPECT_EQ(fp16_to_f32(0x7C00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(fp16_to_f32(0xFC00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(fp16_to_f32(0x7E00)));
  EXPECT_TRUE(std::isnan(fp16_to_f32(0x7C01)));  // signalling NaN pattern is still NaN
}

TEST(Half, DecodesSubnormals) {
  EXPECT_EQ(fp16_to_f32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(fp16_to_f32(0x0002), std::ldexp(1.0f, -23));
  EXPECT_EQ(fp16_to_f32(0x03FF), std::ldexp(1023.0f, -24));  // largest subnormal
  EXPECT_EQ(fp16_to_f32(0x8200), -std::ldexp(1.0f, -15));
}

TEST(Half, EveryHalfRoundTripsExactly) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = fp16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      const uint16_t back = f32_to_fp16(f);
      EXPECT_EQ(back & 0x7C00, 0x7C00);
      EXPECT_NE(back & 0x03FF, 0) << "NaN must stay NaN, half 0x" << std::hex << h;
      continue;
    }
    ASSERT_EQ(f32_to_fp16(f), h) << "half 0x" << std::hex << h;
  }
}

TEST(Half, RoundsToNearestTiesToEven) {
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties go to the even mantissa (1).
  EXPECT_EQ(f32_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);
  // 1 + 3*2^-11 is halfway between 1+2^-10 (odd) and 1+2^-9 (even): rounds up.
  EXPECT_EQ(f32_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  // Just above a tie rounds up, just below rounds down.
  EXPECT_EQ(f32_to_fp16(std::nextafter(1.0f + std::ldexp(1.0f, -11), 2.0f)), 0x3C01);
  EXPECT_EQ(f32_to_fp16(std::nextafter(1.0f + std::ldexp(1.0f, -11), 0.0f)), 0x3C00);
  // Rounding up can carry into the exponent: 2 - 2^-12 -> 2.
  EXPECT_EQ(f32_to_fp16(2.0f - std::ldexp(1.0f, -12)), 0x4000);
  EXPECT_EQ(f32_to_fp16(-1.0f - std::ldexp(1.0f, -11)), 0xBC00);
}

TEST(Half, OverflowsToInfinityAtTheRoundingBoundary) {
  EXPECT_EQ(f32_to_fp16(65504.0f), 0x7BFF);
  EXPECT_EQ(f32_to_fp16(65519.996f), 0x7BFF);  // below the midpoint 65520
  EXPECT_EQ(f32_to_fp16(65520.0f), 0x7C00);    // the tie rounds to even = 2^16 = inf
  EXPECT_EQ(f32_to_fp16(1e10f), 0x7C00);
  EXPECT_EQ(f32_to_fp16(-1e10f), 0xFC00);
  EXPECT_EQ(f32_to_fp16(std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_EQ(f32_to_fp16(-std::numeric_limits<float>::infinity()), 0xFC00);
}

TEST(Half, UnderflowsThroughSubnormalsToZero) {
  EXPECT_EQ(f32_to_fp16(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(f32_to_fp16(std::ldexp(1.0f, -25)), 0x0000);  // tie between 0 and 2^-24 -> even (0)
  EXPECT_EQ(f32_to_fp16(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(f32_to_fp16(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 * 2^-24: tie -> even (2)
  EXPECT_EQ(f32_to_fp16(std::ldexp(5.0f, -25)), 0x0002);  // 2.5 * 2^-24: tie -> even (2)
  EXPECT_EQ(f32_to_fp16(-std::ldexp(1.0f, -30)), 0x8000);  // keeps the sign of zero
  EXPECT_EQ(f32_to_fp16(1e-30f), 0x0000);
  // The largest subnormal plus half a step rounds up into the smallest normal.
  EXPECT_EQ(f32_to_fp16(std::ldexp(1023.5f, -24)), 0x0400);
  EXPECT_EQ(f32_to_fp16(std::ldexp(1.0f, -14)), 0x0400);
}

TEST(Half, NaNStaysNaN) {
  const uint16_t h = f32_to_fp16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(h & 0x7C00, 0x7C00);
  EXPECT_NE(h & 0x03FF, 0);
  // A NaN whose payload lives only in the low mantissa bits must not become infinity.
  const uint16_t low_payload = f32_to_fp16(f32_from_bits(0x7F800001u));
  EXPECT_NE(low_payload & 0x03FF, 0);
}

TEST(BFloat16, ConvertsAndRoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(bf16_to_f32(0x3F80), 1.0f);
  EXPECT_EQ(bf16_to_f32(0xC040), -3.0f);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even -> 1.
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);
  // 1 + 3*2^-8 is halfway between 1+2^-7 (odd) and 1+2^-6: rounds up to even.
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);
  EXPECT_EQ(f32_to_bf16(std::nextafter(1.0f + std::ldexp(1.0f, -8), 2.0f)), 0x3F81);
  // Subnormal floats keep their top bits; -0 keeps its sign.
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x00010000u)), 0x0001);
  EXPECT_EQ(f32_to_bf16(-0.0f), 0x8000);
}

TEST(BFloat16, OverflowInfinityAndNaN) {
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::max()), 0x7F80);  // rounds up to inf
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x7F7F0000u)), 0x7F7F);         // largest finite bf16
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_EQ(f32_to_bf16(-std::numeric_limits<float>::infinity()), 0xFF80);
  // NaN with payload only in the low 16 bits: truncation would give infinity; it must not.
  const uint16_t h = f32_to_bf16(f32_from_bits(0x7F800001u));
  EXPECT_TRUE(std::isnan(bf16_to_f32(h)));
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(BFloat16, EveryBf16RoundTripsExactly) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = bf16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_bf16(f), h) << "bf16 0x" << std::hex << h;
  }
}
