// Reference quantizers and dequantizers for ggml's "legacy" 32-element block types:
// Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0. The quantizers make the same choices as ggml's
// quantize_row_*_ref, so a file we quantize matches one made by llama-quantize without an
// importance matrix (up to floating-point contraction).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "nightlora/util/half.h"
#include "quant/blocks.h"

namespace nl::quant {

namespace {

// The value of largest magnitude in a block, with its sign. Symmetric types map it to the
// most negative level (-8 or -16) so that level is used exactly and the other side loses
// at most one level; ties keep the first such value, as ggml does.
float signed_absmax(const float* x, int n) {
  float amax = 0, max = 0;
  for (int j = 0; j < n; ++j)
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  return max;
}

// Float to a level index: truncation after adding 0.5 (or the offset + 0.5), exactly like
// ggml's `(int8_t)(v + 8.5f)`, then clamped to the top level. Values are >= 0 after the
// offset except for NaN input, which we map to 0 instead of relying on undefined casts.
int level_from(float v, int top) {
  if (!(v >= 0)) return 0;
  if (v >= static_cast<float>(top)) return top;
  return static_cast<int>(v);
}

void minmax(const float* x, int n, float* lo, float* hi) {
  *lo = x[0];
  *hi = x[0];
  for (int j = 1; j < n; ++j) {
    *lo = std::min(*lo, x[j]);
    *hi = std::max(*hi, x[j]);
  }
}

// Bit 4 of each 5-bit level goes into a 32-bit little-endian mask (element j -> bit j).
void store_high_bits(const int* levels, uint8_t qh[4]) {
  uint32_t h = 0;
  for (int j = 0; j < kQK; ++j) h |= static_cast<uint32_t>((levels[j] >> 4) & 1) << j;
  for (int b = 0; b < 4; ++b) qh[b] = static_cast<uint8_t>(h >> (8 * b));
}

uint32_t load_high_bits(const uint8_t qh[4]) {
  return static_cast<uint32_t>(qh[0]) | static_cast<uint32_t>(qh[1]) << 8 | static_cast<uint32_t>(qh[2]) << 16 |
         static_cast<uint32_t>(qh[3]) << 24;
}

// Low nibbles: element j in the low half of byte j, element j+16 in the high half.
void store_nibbles(const int* levels, uint8_t qs[kQK / 2]) {
  for (int j = 0; j < kQK / 2; ++j)
    qs[j] = static_cast<uint8_t>((levels[j] & 0xF) | ((levels[j + kQK / 2] & 0xF) << 4));
}

}  // namespace

// ---- Q4_0 -------------------------------------------------------------------------------

void quantize_row_q4_0(const float* x, BlockQ4_0* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b, x += kQK) {
    const float d = signed_absmax(x, kQK) / -8;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    int levels[kQK];
    for (int j = 0; j < kQK; ++j) levels[j] = level_from(x[j] * id + 8.5f, 15);
    y[b].d = f32_to_fp16(d);
    store_nibbles(levels, y[b].qs);
  }
}

void dequantize_row_q4_0(const BlockQ4_0* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b, y += kQK) {
    const float d = fp16_to_f32(x[b].d);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = static_cast<float>((x[b].qs[j] & 0xF) - 8) * d;
      y[j + kQK / 2] = static_cast<float>((x[b].qs[j] >> 4) - 8) * d;
    }
  }
}

// ---- Q4_1 -------------------------------------------------------------------------------

void quantize_row_q4_1(const float* x, BlockQ4_1* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b, x += kQK) {
    float lo, hi;
    minmax(x, kQK, &lo, &hi);
    const float d = (hi - lo) / 15;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    int levels[kQK];
    for (int j = 0; j < kQK; ++j) levels[j] = level_from((x[j] - lo) * id + 0.5f, 15);
    y[b].d = f32_to_fp16(d);
    y[b].m = f32_to_fp16(lo);
    store_nibbles(levels, y[b].qs);
  }
}

void dequantize_row_q4_1(const BlockQ4_1* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b, y += kQK) {
    const float d = fp16_to_f32(x[b].d), m = fp16_to_f32(x[b].m);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = static_cast<float>(x[b].qs[j] & 0xF) * d + m;
      y[j + kQK / 2] = static_cast<float>(x[b].qs[j] >> 4) * d + m;
    }
  }
}

// ---- Q5_0 -------------------------------------------------------------------------------

void quantize_row_q5_0(const float* x, BlockQ5_0* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b, x += kQK) {
    const float d = signed_absmax(x, kQK) / -16;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    int levels[kQK];
    for (int j = 0; j < kQK; ++j) levels[j] = level_from(x[j] * id + 16.5f, 31);
    y[b].d = f32_to_fp16(d);
    store_nibbles(levels, y[b].qs);
    store_high_bits(levels, y[b].qh);
  }
}

void dequantize_row_q5_0(const BlockQ5_0* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b, y += kQK) {
    const float d = fp16_to_f32(x[b].d);
    int8_t v[kQK];
    q5_0_values(x[b], v);
    for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(v[j]) * d;
  }
}

// ---- Q5_1 -------------------------------------------------------------------------------

void quantize_row_q5_1(const float* x, BlockQ5_1* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b, x += kQK) {
    float lo, hi;
    minmax(x, kQK, &lo, &hi);
    const float d = (hi - lo) / 31;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    int levels[kQK];
    for (int j = 0; j < kQK; ++j) levels[j] = level_from((x[j] - lo) * id + 0.5f, 31);
    y[b].d = f32_to_fp16(d);
    y[b].m = f32_to_fp16(lo);
    store_nibbles(levels, y[b].qs);
    store_high_bits(levels, y[b].qh);
  }
}

void dequantize_row_q5_1(const BlockQ5_1* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b, y += kQK) {
    const float d = fp16_to_f32(x[b].d), m = fp16_to_f32(x[b].m);
    const uint32_t qh = load_high_bits(x[b].qh);
    for (int j = 0; j < kQK / 2; ++j) {
      const int lo = (x[b].qs[j] & 0xF) | static_cast<int>((qh >> j) & 1) << 4;
      const int hi = (x[b].qs[j] >> 4) | static_cast<int>((qh >> (j + kQK / 2)) & 1) << 4;
      y[j] = static_cast<float>(lo) * d + m;
      y[j + kQK / 2] = static_cast<float>(hi) * d + m;
    }
  }
}

// ---- Q8_0 -------------------------------------------------------------------------------

void quantize_row_q8_0(const float* x, BlockQ8_0* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b, x += kQK) {
    float amax = 0;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    y[b].d = f32_to_fp16(d);
    for (int j = 0; j < kQK; ++j) {
      // roundf (half away from zero) as ggml; |x * id| <= 127 so the cast is exact.
      const float v = std::round(x[j] * id);
      y[b].qs[j] = static_cast<int8_t>(v >= -127 && v <= 127 ? v : 0);
    }
  }
}

void dequantize_row_q8_0(const BlockQ8_0* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b, y += kQK) {
    const float d = fp16_to_f32(x[b].d);
    for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(x[b].qs[j]) * d;
  }
}

}  // namespace nl::quant
