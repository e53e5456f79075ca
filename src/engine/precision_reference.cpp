#include "precision_reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels_int8.h"
#include "range_guard.h"
#include "nightlora/engine/reference_products.h"
#include "nightlora/quant/qtype.h"
#include "nightlora/util/half.h"

namespace nl::engine {
namespace {

// W as int8 per (row, 32-column block): Q4_0/Q8_0/Q4_K/Q5_K/Q6_K quants and scales as stored
// (the K-quants' with their offsets c or Q6_K's integer scales of 16 columns), Q5_0's as its
// Q8_0 tiles hold them (q - 16), other types from their Q8_0 copy (kernels_int8.h).
struct Int8Weights {
  int64_t rows = 0, blocks = 0;
  std::vector<int8_t> q;  // rows x blocks*32
  std::vector<float> d;   // rows x blocks
  std::vector<float> c;   // rows x blocks: Q4_K/Q5_K's offsets, else empty
  std::vector<int> sc;    // rows x blocks x 2: Q6_K's integer scales of each half, else empty
  int w(int64_t r, int64_t c) const { return q[static_cast<size_t>(r * blocks * kQ8Block + c)]; }
  float scale(int64_t r, int64_t b) const { return d[static_cast<size_t>(r * blocks + b)]; }
  int parts() const { return sc.empty() ? 1 : 2; }
  // The integer scale of part h of block b (1 without them), and the part's scale dw.
  int int_scale(int64_t r, int64_t b, int h) const { return sc.empty() ? 1 : sc[static_cast<size_t>((r * blocks + b) * 2 + h)]; }
  float part_scale(int64_t r, int64_t b, int h) const {
    return sc.empty() ? scale(r, b) : scale(r, b) * static_cast<float>(int_scale(r, b, h));
  }
};

Int8Weights int8_weights(const TensorView& W) {
  Int8Weights iw;
  iw.rows = W.rows();
  iw.blocks = (W.cols() + kQ8Block - 1) / kQ8Block;
  iw.q.assign(static_cast<size_t>(iw.rows * iw.blocks * kQ8Block), 0);
  iw.d.assign(static_cast<size_t>(iw.rows * iw.blocks), 0.0f);
  const bool offsets = int8_has_offsets(W.type);
  if (offsets) iw.c.assign(iw.d.size(), 0.0f);
  std::vector<float> row(static_cast<size_t>(W.cols()));
  for (int64_t r = 0; r < iw.rows; ++r) {
    int8_t* q = &iw.q[static_cast<size_t>(r * iw.blocks * kQ8Block)];
    float* d = &iw.d[static_cast<size_t>(r * iw.blocks)];
    if (offsets) {  // w = s (u - mid) + c per sub-block of 32
      const bool q5 = W.type == QType::Q5_K;
      const size_t block_bytes = q5 ? 176 : 144;
      for (int64_t sb = 0; sb * 8 < iw.blocks; ++sb) {
        const uint8_t* blk = W.row(r) + static_cast<size_t>(sb) * block_bytes;
        const KQuantBlockScales sc = kquant_block_scales(blk, kquant_mid(W.type));
        for (int j = 0; j < 8; ++j) {
          const int64_t b = sb * 8 + j;
          d[b] = sc.s[j];
          iw.c[static_cast<size_t>(r * iw.blocks + b)] = sc.c[j];
          for (int k = 0; k < 32; ++k) {
            const int q4 = (blk[kQ4KQuantsOffset + 32 * (j / 2) + k] >> (4 * (j % 2))) & 0x0F;
            q[b * 32 + k] = static_cast<int8_t>(q5 ? q5k_quant(blk, j, k) - 16 : q4 - 8);
          }
        }
      }
    } else if (W.type == QType::Q6_K) {  // w = d sc (q - 32) per half of 16
      if (iw.sc.empty()) iw.sc.assign(iw.d.size() * 2, 0);
      for (int64_t sb = 0; sb * 8 < iw.blocks; ++sb) {
        const uint8_t* blk = W.row(r) + static_cast<size_t>(sb) * 210;
        for (int j = 0; j < 8; ++j) {
          const int64_t b = sb * 8 + j;
          d[b] = q6k_d(blk);
          for (int h = 0; h < 2; ++h) iw.sc[static_cast<size_t>((r * iw.blocks + b) * 2 + h)] = q6k_scale(blk, 2 * j + h);
          for (int k = 0; k < 32; ++k) q[b * 32 + k] = static_cast<int8_t>(q6k_quant(blk, 32 * j + k) - 32);
        }
      }
    } else if (W.type == QType::Q4_0 || W.type == QType::Q8_0) {
      const size_t block_bytes = W.type == QType::Q4_0 ? 18 : 34;
      for (int64_t b = 0; b < iw.blocks; ++b) {
        const uint8_t* blk = W.row(r) + static_cast<size_t>(b) * block_bytes;
        uint16_t bits;
        std::memcpy(&bits, blk, 2);
        d[b] = fp16_to_f32(bits);
        for (int j = 0; j < 32; ++j)
          q[b * 32 + j] = W.type == QType::Q4_0
                              ? static_cast<int8_t>((j < 16 ? (blk[2 + j] & 0x0F) : (blk[2 + j - 16] >> 4)) - 8)
                              : static_cast<int8_t>(blk[2 + j]);
      }
    } else if (W.type == QType::Q5_0) {  // the quants q - 16 with the scale as stored (tile_layout.h)
      for (int64_t b = 0; b < iw.blocks; ++b) {
        quant::BlockQ5_0 blk;
        std::memcpy(&blk, W.row(r) + static_cast<size_t>(b) * sizeof(blk), sizeof(blk));
        d[b] = fp16_to_f32(blk.d);
        quant::q5_0_values(blk, q + b * 32);
      }
    } else {  // the Q8_0 copy
      dequantize_row(W.type, W.row(r), row.data(), W.cols());
      for (int64_t b = 0; b < iw.blocks; ++b) {
        quant::BlockQ8_0 blk;
        quantize_block_q8_0(row.data() + b * kQ8Block, std::min(kQ8Block, W.cols() - b * kQ8Block), &blk);
        d[b] = fp16_to_f32(blk.d);
        std::memcpy(q + b * kQ8Block, blk.qs, sizeof(blk.qs));
      }
    }
  }
  return iw;
}

void forward_int8(const TensorView& W, const float* X, int64_t T, float* Y) {
  const Int8Weights iw = int8_weights(W);
  const int64_t rows = W.rows(), cols = W.cols(), nb = iw.blocks;
  std::vector<int8_t> qx(static_cast<size_t>(nb * kQ8Block));
  std::vector<float> dx(static_cast<size_t>(nb));
  std::vector<int32_t> sx(static_cast<size_t>(nb));
  for (int64_t t = 0; t < T; ++t) {
    int8_kernels_scalar().quantize_row(X + t * cols, cols, qx.data(), dx.data(), sx.data());
    for (int64_t r = 0; r < rows; ++r) {
      float acc = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        int32_t isum = 0;
        for (int h = 0; h < 2; ++h) {
          int32_t half = 0;
          for (int64_t j = 16 * h; j < 16 * h + 16; ++j) half += iw.w(r, b * kQ8Block + j) * qx[static_cast<size_t>(b * 32 + j)];
          isum += iw.int_scale(r, b, h) * half;
        }
        acc = std::fma(static_cast<float>(isum), iw.scale(r, b) * dx[static_cast<size_t>(b)], acc);
      }
      if (!iw.c.empty()) {  // Q4_K/Q5_K's offsets
        float corr = 0.0f;
        for (int64_t b = 0; b < nb; ++b)
          corr = std::fma(iw.c[static_cast<size_t>(r * nb + b)],
                          dx[static_cast<size_t>(b)] * static_cast<float>(sx[static_cast<size_t>(b)]), corr);
        acc += corr;
      }
      Y[t * rows + r] = acc;
    }
  }
}

void input_grad_int8(const TensorView& W, const float* dY, int64_t T, float* dX) {
  const Int8Weights iw = int8_weights(W);
  const int64_t rows = W.rows(), cols = W.cols();
  std::memset(dX, 0, static_cast<size_t>(T * cols) * sizeof(float));
  int16_t y16[kGradRowBlock];
  for (int64_t t = 0; t < T; ++t)
    for (int64_t R = 0; R * kGradRowBlock < rows; ++R) {
      const int64_t r0 = R * kGradRowBlock, nrows = std::min(kGradRowBlock, rows - r0);
      float inv;
      const float ey = grad_block_scale(dY + t * rows + r0, nrows, &inv);
      for (int64_t i = 0; i < nrows; ++i) y16[i] = grad_y16(dY[t * rows + r0 + i], inv);
      const int parts = iw.parts();
      for (int64_t s = 0; s < iw.blocks * parts; ++s) {  // scale blocks: 32 columns, or 16 (Q6_K)
        const int64_t b = s / parts, width = kQ8Block / parts, c0 = b * kQ8Block + (s % parts) * width;
        const int h = static_cast<int>(s % parts);
        float m = 0.0f;
        for (int64_t i = 0; i < nrows; ++i) m = std::max(m, std::fabs(iw.part_scale(r0 + i, b, h)));
        int qv[kGradRowBlock] = {};
        for (int64_t i = 0; i < nrows; ++i)
          qv[i] = requantize_grad_value(y16[i], grad_rho16(m != 0.0f ? iw.part_scale(r0 + i, b, h) / m : 0.0f));
        const float e = ey * m;
        for (int64_t c = c0; c < c0 + width && c < cols; ++c) {
          int32_t isum = 0;
          for (int64_t i = 0; i < nrows; ++i) isum += qv[i] * iw.w(r0 + i, c);
          dX[t * cols + c] = std::fma(static_cast<float>(isum), e, dX[t * cols + c]);
        }
      }
    }
  if (!iw.c.empty())  // Q4_K/Q5_K's offsets, after the integer product
    for (int64_t t = 0; t < T; ++t)
      for (int64_t b = 0; b < iw.blocks; ++b) {
        float g = 0.0f;
        for (int64_t r = 0; r < rows; ++r) g = std::fma(iw.c[static_cast<size_t>(r * iw.blocks + b)], dY[t * rows + r], g);
        for (int64_t c = b * kQ8Block; c < (b + 1) * kQ8Block; ++c) dX[t * cols + c] += g;
      }
}

// f16 mode around an f32 product: inputs guarded and rounded, outputs unscaled, guarded,
// rounded.
template <class Product>
void around_f16(const float* in, int64_t T, int64_t n_in, float* out, int64_t n_out, Product product) {
  const F16Kernels& k = f16_kernels_scalar();
  std::vector<float> staged(static_cast<size_t>(T * n_in));
  std::vector<int> scale(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) scale[static_cast<size_t>(t)] = guard_input_row(k, in + t * n_in, n_in, &staged[static_cast<size_t>(t * n_in)]);
  product(staged.data(), out);
  for (int64_t t = 0; t < T; ++t) guard_output_row(k, out + t * n_out, n_out, scale[static_cast<size_t>(t)]);
}

}  // namespace

void reference_forward_precision(const TensorView& W, const float* X, int64_t T, float* Y, Precision p) {
  switch (p) {
    case Precision::F32: reference_forward(W, X, T, Y); return;
    case Precision::F16:
      around_f16(X, T, W.cols(), Y, W.rows(), [&](const float* x, float* y) { reference_forward(W, x, T, y); });
      return;
    case Precision::Int8: forward_int8(W, X, T, Y); return;
  }
}

void reference_input_grad_precision(const TensorView& W, const float* dY, int64_t T, float* dX, Precision p) {
  switch (p) {
    case Precision::F32: reference_input_grad(W, dY, T, dX); return;
    case Precision::F16:
      around_f16(dY, T, W.rows(), dX, W.cols(), [&](const float* g, float* dx) { reference_input_grad(W, g, T, dx); });
      return;
    case Precision::Int8: input_grad_int8(W, dY, T, dX); return;
  }
}

}  // namespace nl::engine
