// IEEE half (f16) and bfloat16 conversions, exact and portable (no intrinsics): the scalar
// reference that SIMD paths are tested against.
#pragma once
#include <cstdint>
#include <cstring>

namespace nl {

inline float f32_from_bits(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
inline uint32_t bits_from_f32(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }

inline float fp16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  if (exp == 0) {
    if (man == 0) return f32_from_bits(sign);
    // subnormal: normalise
    int e = -1;
    do { man <<= 1; ++e; } while (!(man & 0x400));
    man &= 0x3ff;
    return f32_from_bits(sign | (uint32_t)(127 - 15 - e) << 23 | man << 13);
  }
  if (exp == 31) return f32_from_bits(sign | 0x7f800000u | man << 13);
  return f32_from_bits(sign | (exp + 112) << 23 | man << 13);
}

// Round to nearest even; overflow gives inf, NaN stays NaN.
inline uint16_t f32_to_fp16(float f) {
  uint32_t x = bits_from_f32(f);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return (uint16_t)(sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 : 0));
  if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00);  // rounds to >= 65520 -> inf
  if (ax < 0x38800000u) {                                    // below smallest normal half
    if (ax < 0x33000000u) return (uint16_t)sign;              // < 2^-25 rounds to 0
    uint32_t e = ax >> 23, man = (ax & 0x7fffff) | 0x800000;
    uint32_t shift = 126 - e;                                 // 14..24
    uint32_t half = man >> shift, rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return (uint16_t)(sign | half);
  }
  uint32_t r = ax + 0xfff + ((ax >> 13) & 1);  // round mantissa to 10 bits, ties to even
  return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
}

inline float bf16_to_f32(uint16_t h) { return f32_from_bits((uint32_t)h << 16); }

inline uint16_t f32_to_bf16(float f) {
  uint32_t x = bits_from_f32(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);  // quiet NaN
  return (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

}  // namespace nl
