#version 450
// Forward / recompute product Y (T x rows) = X (T x cols) · Wᵀ.
// A workgroup computes a 32-row x 32-token tile of Y: for each 32-column block it stages the
// 32 x 32 weight tile (through weights.glsl) and the 32 x 32 activation tile in shared
// memory, then each of its 64 threads accumulates a 4-row x 4-token register block (rows
// ri + 8a, tokens tb + 8k), in f32, blocks in increasing order. Per column a thread reads 4
// weights and 4 activations from shared memory for 16 multiply-adds, and X is read from the
// device buffer once per 32 rows of W.
//  F32 / F16 mode: f32 dot products. In F16 mode X is read as the halves guard_f16 made of
//    it (activations.glsl) and guard_f16 rounds Y after, per row.
//  Int8 mode (the cpu engine's definition, src/engine/kernels_int8.h): X was quantized per
//    32-block (quantize_q8.comp); Q4_0/Q8_0 weights give their own quants and scales, F32/F16
//    weights are quantized per row and block here as the cpu engine's Q8_0 copy of them; each block's dot
//    product is exact, then acc = fma(isum, dw * dx, acc). The quants sit in the same float
//    tiles: a block's sum of 32 products of int8 values is at most 32 * 128^2 = 2^19, so
//    every partial sum is an integer that f32 holds exactly (as an integer sum would).
layout(local_size_x = 64) in;
#include "params.glsl"
#include "weights.glsl"
#include "quantize.glsl"
layout(std430, set = 0, binding = 1) readonly buffer In { float x[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Out { float y[]; };
layout(std430, set = 0, binding = 3) readonly buffer QuantIn { uint xq[]; };
layout(std430, set = 0, binding = 4) readonly buffer QuantScale { float xd[]; };
#include "activations.glsl"

const uint TILE_ROWS = 32u;    // vulkan_engine.cpp dispatches ceil(rows / TILE_ROWS) groups
const uint TILE_TOKENS = 32u;

shared float w_tile[TILE_ROWS][33];  // 33: a padding column keeps threads off one bank
shared float wd_tile[TILE_ROWS];     // int8: the weight rows' block scales
shared float x_tile[TILE_TOKENS][33];
shared float xd_tile[TILE_TOKENS];   // int8: the tokens' block scales

void main() {
  const uint lid = gl_LocalInvocationID.x;
  const uint r0 = gl_WorkGroupID.x * TILE_ROWS, t0 = gl_WorkGroupID.y * TILE_TOKENS;
  const uint ri = lid & 7u, tb = lid >> 3;  // this thread: rows r0 + ri + 8a, tokens t0 + tb + 8k
  const bool int8 = p.mode == MODE_INT8, f16 = p.mode == MODE_F16;
  const bool stored_quants = int8 && weights_are_quantized();
  float acc[4][4];
  for (uint a = 0u; a < 4u; ++a)
    for (uint k = 0u; k < 4u; ++k) acc[a][k] = 0.0;

  for (uint b = 0u; b < p.n_blocks; ++b) {
    for (uint k = 0u; k < 16u; ++k) {
      const uint idx = lid + 64u * k, i = idx >> 5, j = idx & 31u;
      const uint r = r0 + i, c = b * 32u + j;
      const bool inside = r < p.rows && c < p.cols;
      if (stored_quants)
        w_tile[i][j] = inside ? float(block_quant(r, c)) : 0.0;
      else
        w_tile[i][j] = inside ? weight_at(r, c) : 0.0;
    }
    if (stored_quants && lid < TILE_ROWS) wd_tile[lid] = r0 + lid < p.rows ? block_scale(r0 + lid, b) : 0.0;
    for (uint k = 0u; k < 16u; ++k) {
      const uint idx = lid + 64u * k, tt = idx >> 5, j = idx & 31u;
      const uint t = t0 + tt, c = b * 32u + j;
      const bool inside = t < p.T && c < p.cols;
      if (int8)
        x_tile[tt][j] = inside ? float(act_quant(t, c, p.n_blocks)) : 0.0;
      else if (f16)
        x_tile[tt][j] = inside ? act_f16(t, c, p.cols) : 0.0;
      else
        x_tile[tt][j] = inside ? x[t * p.cols + c] : 0.0;
    }
    if (int8 && lid < TILE_TOKENS) xd_tile[lid] = t0 + lid < p.T ? act_scale(t0 + lid, b, p.n_blocks) : 0.0;
    barrier();
    if (int8 && !stored_quants) {  // F32/F16 weights: quantize each row of the tile
      if (lid < TILE_ROWS) {
        float amax = 0.0;
        for (uint j = 0u; j < 32u; ++j) amax = max(amax, abs(w_tile[lid][j]));
        wd_tile[lid] = weight_scale(amax);
      }
      barrier();
      for (uint k = 0u; k < 16u; ++k) {  // each thread quantizes the elements it staged
        const uint idx = lid + 64u * k, i = idx >> 5, j = idx & 31u;
        w_tile[i][j] = float(quantize_weight(w_tile[i][j], wd_tile[i]));
      }
      barrier();
    }

    float s[4][4];
    for (uint a = 0u; a < 4u; ++a)
      for (uint k = 0u; k < 4u; ++k) s[a][k] = 0.0;
    // Columns in increasing order within the block, as the reference sums them.
    for (uint j = 0u; j < 32u; ++j) {
      float wv[4], xv[4];
      for (uint a = 0u; a < 4u; ++a) wv[a] = w_tile[ri + 8u * a][j];
      for (uint k = 0u; k < 4u; ++k) xv[k] = x_tile[tb + 8u * k][j];
      for (uint a = 0u; a < 4u; ++a)
        for (uint k = 0u; k < 4u; ++k) s[a][k] += wv[a] * xv[k];
    }
    for (uint a = 0u; a < 4u; ++a)
      for (uint k = 0u; k < 4u; ++k) {
        if (int8)
          acc[a][k] = fma(s[a][k], wd_tile[ri + 8u * a] * xd_tile[tb + 8u * k], acc[a][k]);
        else
          acc[a][k] += s[a][k];
      }
    barrier();
  }

  for (uint a = 0u; a < 4u; ++a) {
    const uint r = r0 + ri + 8u * a;
    for (uint k = 0u; k < 4u; ++k) {
      const uint t = t0 + tb + 8u * k;
      if (t < p.T && r < p.rows) y[t * p.rows + r] = acc[a][k];
    }
  }
}
