// Reference quantizers and dequantizers for ggml's K-quants Q4_K, Q5_K and Q6_K (256-element
// super-blocks with 6- or 8-bit sub-block scales). The quantizers follow ggml's
// quantize_row_q{4,5,6}_K_ref: a per-sub-block search for the scale (and min) with the
// least weighted squared error, then quantization of those scales against the block's
// half-float super-scale, then a final pass that rounds every element with the scales
// actually stored, so the stored levels are the best ones for what the dequantizer sees.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "nightlora/util/half.h"
#include "quant/blocks.h"

namespace nl::quant {

namespace {

// Round half to even, like ggml's nearest_int, but defined for every input: NaN maps to 0
// and huge values are clamped (ggml asserts instead).
int nearest_int(float v) {
  if (!(v == v)) return 0;
  v = std::clamp(v, -4194303.0f, 4194303.0f);
  return static_cast<int>(std::nearbyint(v));
}

// Asymmetric quantization of n values to levels 0..nmax: x ~= scale * L - min_out, with
// min_out >= 0 (the offset never exceeds the smallest value). Tries scales around
// nmax / (max - min) and, for each rounding that produces, the least-squares
// scale and offset; keeps the one with the least `weights`-weighted squared error.
// Returns the scale; the levels go to L. (ggml: make_qkx2_quants with use_mad = false.)
float fit_scale_and_min(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* min_out,
                        float rmin, float rdelta, int nstep) {
  float lo = x[0], hi = x[0];
  float sum_w = weights[0], sum_x = weights[0] * x[0];
  for (int i = 1; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
    sum_w += weights[i];
    sum_x += weights[i] * x[i];
  }
  if (lo > 0) lo = 0;
  if (hi == lo) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *min_out = -lo;
    return 0;
  }
  float iscale = nmax / (hi - lo);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    L[i] = static_cast<uint8_t>(std::clamp(nearest_int(iscale * (x[i] - lo)), 0, nmax));
    const float diff = scale * L[i] + lo - x[i];
    best_error += weights[i] * diff * diff;
  }
  uint8_t trial[32];
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * is + nmax) / (hi - lo);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest_int(iscale * (x[i] - lo)), 0, nmax);
      trial[i] = static_cast<uint8_t>(l);
      sum_l += weights[i] * l;
      sum_l2 += weights[i] * l * l;
      sum_xl += weights[i] * l * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (det <= 0) continue;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
    float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (this_min > 0) {  // an offset above zero cannot be stored (mins are subtracted)
      this_min = 0;
      this_scale = sum_xl / sum_l2;
    }
    float error = 0;
    for (int i = 0; i < n; ++i) {
      const float diff = this_scale * trial[i] + this_min - x[i];
      error += weights[i] * diff * diff;
    }
    if (error < best_error) {
      std::memcpy(L, trial, static_cast<size_t>(n));
      best_error = error;
      scale = this_scale;
      lo = this_min;
    }
  }
  *min_out = -lo;
  return scale;
}

// Symmetric quantization of n values to levels -nmax..nmax-1 with weights x^2: the value
// of largest magnitude maps to -nmax, then 18 nearby scales are tried and the one whose
// least-squares fit has the least weighted error wins. Returns the scale; L gets
// level + nmax (0..2*nmax-1). (ggml: make_qx_quants with rmse_type = 1, no weights.)
float fit_symmetric_scale(int n, int nmax, const float* x, int8_t* L) {
  float amax = 0, max = 0;
  for (int i = 0; i < n; ++i)
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  if (amax < 1e-15f) {  // all (near) zero
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0;
  }
  auto level = [nmax](float v) { return std::clamp(nearest_int(v), -nmax, nmax - 1); };
  float iscale = -nmax / max;
  float sum_lx = 0, sum_l2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = level(iscale * x[i]);
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = x[i] * x[i];
    sum_lx += w * x[i] * l;
    sum_l2 += w * l * l;
  }
  float scale = sum_l2 != 0 ? sum_lx / sum_l2 : 0.0f;
  float best = scale * sum_lx;  // = sum_lx^2 / sum_l2: larger means smaller error
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(nmax + 0.1f * is) / max;
    sum_lx = sum_l2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = level(iscale * x[i]);
      const float w = x[i] * x[i];
      sum_lx += w * x[i] * l;
      sum_l2 += w * l * l;
    }
    if (sum_l2 > 0 && sum_lx * sum_lx > best * sum_l2) {
      for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(level(iscale * x[i]) + nmax);
      scale = sum_lx / sum_l2;
      best = scale * sum_lx;
    }
  }
  return scale;
}

// Shared by Q4_K and Q5_K, which differ only in the level range (nmax = 15 or 31), the
// search parameters and how the levels are packed. Fills d, dmin, scales and returns the
// final levels (0..nmax) of the 256 elements in L.
template <class Block>
void quantize_scales_and_levels_k4(const float* x, Block& y, int nmax, float rmin, float rdelta, int nstep,
                                   uint8_t L[kQK_K]) {
  float scales[8], mins[8];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    const float* xs = x + 32 * j;
    // Weights favour large values: their error costs more in a matrix product.
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
    const float av_x = std::sqrt(sum_x2 / 32);
    float weights[32];
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xs[l]);
    scales[j] = fit_scale_and_min(32, nmax, xs, weights, L + 32 * j, &mins[j], rmin, rdelta, nstep);
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  // The 6-bit sub-block scales and mins are relative to the block's largest.
  const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
  uint8_t ls[8], lm[8];
  for (int j = 0; j < 8; ++j) {
    ls[j] = static_cast<uint8_t>(std::clamp(nearest_int(inv_scale * scales[j]), 0, 63));
    lm[j] = static_cast<uint8_t>(std::clamp(nearest_int(inv_min * mins[j]), 0, 63));
  }
  pack_scales_mins_k4(ls, lm, y.scales);
  y.d = f32_to_fp16(max_scale / 63.0f);
  y.dmin = f32_to_fp16(max_min / 63.0f);

  // Re-round every element with the scales as stored (a zero scale keeps the fit's levels).
  const float d_all = fp16_to_f32(y.d), dmin_all = fp16_to_f32(y.dmin);
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    unpack_scale_min_k4(j, y.scales, &sc, &m);
    const float d = d_all * sc;
    if (d == 0) continue;
    const float dm = dmin_all * m;
    for (int l = 0; l < 32; ++l)
      L[32 * j + l] = static_cast<uint8_t>(std::clamp(nearest_int((x[32 * j + l] + dm) / d), 0, nmax));
  }
}

}  // namespace

// ---- Q4_K -------------------------------------------------------------------------------

void quantize_row_q4_K(const float* x, BlockQ4_K* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
    uint8_t L[kQK_K];
    quantize_scales_and_levels_k4(x, y[b], 15, -1.0f, 0.1f, 20, L);
    // Each 64 elements take 32 bytes: the first 32 in low nibbles, the next 32 in high.
    for (int g = 0; g < kQK_K / 64; ++g)
      for (int l = 0; l < 32; ++l) y[b].qs[32 * g + l] = static_cast<uint8_t>(L[64 * g + l] | (L[64 * g + 32 + l] << 4));
  }
}

void dequantize_row_q4_K(const BlockQ4_K* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const float d = fp16_to_f32(x[b].d), dmin = fp16_to_f32(x[b].dmin);
    const uint8_t* q = x[b].qs;
    for (int g = 0; g < kQK_K / 64; ++g, q += 32) {
      const KGroupScales k = kquant_group_scales(x[b].scales, d, dmin, g);
      const float d1 = k.scale1, m1 = k.min1, d2 = k.scale2, m2 = k.min2;
      for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>(q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>(q[l] >> 4) - m2;
    }
  }
}

// ---- Q5_K -------------------------------------------------------------------------------

void quantize_row_q5_K(const float* x, BlockQ5_K* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
    uint8_t L[kQK_K];
    quantize_scales_and_levels_k4(x, y[b], 31, -0.5f, 0.1f, 15, L);
    std::memset(y[b].qh, 0, sizeof y[b].qh);
    for (int g = 0; g < kQK_K / 64; ++g) {
      for (int l = 0; l < 32; ++l) {
        const int lo = L[64 * g + l], hi = L[64 * g + 32 + l];
        y[b].qs[32 * g + l] = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
        y[b].qh[l] |= static_cast<uint8_t>(((lo >> 4) << (2 * g)) | ((hi >> 4) << (2 * g + 1)));
      }
    }
  }
}

void dequantize_row_q5_K(const BlockQ5_K* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const float d = fp16_to_f32(x[b].d), dmin = fp16_to_f32(x[b].dmin);
    const uint8_t* ql = x[b].qs;
    const uint8_t* qh = x[b].qh;
    for (int g = 0; g < kQK_K / 64; ++g, ql += 32) {
      const KGroupScales k = kquant_group_scales(x[b].scales, d, dmin, g);
      const float d1 = k.scale1, m1 = k.min1, d2 = k.scale2, m2 = k.min2;
      for (int l = 0; l < 32; ++l)
        *y++ = d1 * static_cast<float>((ql[l] & 0xF) | (((qh[l] >> (2 * g)) & 1) << 4)) - m1;
      for (int l = 0; l < 32; ++l)
        *y++ = d2 * static_cast<float>((ql[l] >> 4) | (((qh[l] >> (2 * g + 1)) & 1) << 4)) - m2;
    }
  }
}

// ---- Q6_K -------------------------------------------------------------------------------

void quantize_row_q6_K(const float* x, BlockQ6_K* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
    int8_t L[kQK_K];
    float scales[16];
    float max_scale = 0, max_abs_scale = 0;
    for (int j = 0; j < 16; ++j) {
      scales[j] = fit_symmetric_scale(16, 32, x + 16 * j, L + 16 * j);
      if (std::fabs(scales[j]) > max_abs_scale) {
        max_abs_scale = std::fabs(scales[j]);
        max_scale = scales[j];
      }
    }
    BlockQ6_K& out = y[b];
    std::memset(&out, 0, sizeof out);
    if (max_abs_scale < 1e-15f) continue;  // all zero: d = 0 and every level 0

    // The sub-block with the largest scale gets scale -128 (its sign is carried by d),
    // the others their nearest integer multiple of the same d.
    const float iscale = -128.0f / max_scale;
    out.d = f32_to_fp16(1 / iscale);
    for (int j = 0; j < 16; ++j) out.scales[j] = static_cast<int8_t>(std::clamp(nearest_int(iscale * scales[j]), -128, 127));

    const float d_all = fp16_to_f32(out.d);
    for (int j = 0; j < 16; ++j) {
      const float d = d_all * out.scales[j];
      if (d == 0) continue;
      for (int l = 0; l < 16; ++l)
        L[16 * j + l] = static_cast<int8_t>(std::clamp(nearest_int(x[16 * j + l] / d), -32, 31) + 32);
    }

    for (int h = 0; h < 2; ++h) {  // two halves of 128 elements
      const int8_t* Lh = L + 128 * h;
      uint8_t* ql = out.ql + 64 * h;
      uint8_t* qh = out.qh + 32 * h;
      for (int l = 0; l < 32; ++l) {
        const int q1 = Lh[l], q2 = Lh[l + 32], q3 = Lh[l + 64], q4 = Lh[l + 96];
        ql[l] = static_cast<uint8_t>((q1 & 0xF) | ((q3 & 0xF) << 4));
        ql[l + 32] = static_cast<uint8_t>((q2 & 0xF) | ((q4 & 0xF) << 4));
        qh[l] = static_cast<uint8_t>((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
      }
    }
  }
}

void dequantize_row_q6_K(const BlockQ6_K* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const float d = fp16_to_f32(x[b].d);
    for (int h = 0; h < 2; ++h, y += 128) {
      const uint8_t* ql = x[b].ql + 64 * h;
      const uint8_t* qh = x[b].qh + 32 * h;
      const int8_t* sc = x[b].scales + 8 * h;
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * sc[is] * static_cast<float>(q1);
        y[l + 32] = d * sc[is + 2] * static_cast<float>(q2);
        y[l + 64] = d * sc[is + 4] * static_cast<float>(q3);
        y[l + 96] = d * sc[is + 6] * static_cast<float>(q4);
      }
    }
  }
}

}  // namespace nl::quant
