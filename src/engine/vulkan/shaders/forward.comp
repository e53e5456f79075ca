#version 450
// Forward / recompute product Y (T x rows) = X (T x cols) · Wᵀ.
// A workgroup computes an 8-row x 32-token tile of Y: for each 32-column block it stages the
// weight tile (through weights.glsl) and the 32 x 32 activation tile in shared memory, then
// each of its 64 threads accumulates one row for 4 tokens, in f32, blocks in increasing order.
//  F32 / F16 mode: f32 dot products (in F16 mode guard_f16 has rounded X before and rounds
//    Y after, per row).
//  Int8 mode (the cpu engine's definition, src/engine/kernels_int8.h): X was quantized per
//    32-block (quantize_q8.comp); Q4_0/Q8_0 weights give their own quants and scales, F32/F16
//    weights are quantized per row and block here with the same quantizer; each block's dot
//    product is exact in integers, then acc = fma(float(isum), dw * dx, acc).
layout(local_size_x = 64) in;
#include "params.glsl"
#include "weights.glsl"
#include "quantize.glsl"
layout(std430, set = 0, binding = 1) readonly buffer In { float x[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Out { float y[]; };
layout(std430, set = 0, binding = 3) readonly buffer QuantIn { uint xq[]; };
layout(std430, set = 0, binding = 4) readonly buffer QuantScale { float xd[]; };
#include "activations.glsl"

const uint TILE_ROWS = 8u;
const uint TILE_TOKENS = 32u;

shared float w_tile[TILE_ROWS][33];  // 33: a padding column keeps threads off one bank
shared int wq_tile[TILE_ROWS][33];
shared float wd_tile[TILE_ROWS];
shared float x_tile[TILE_TOKENS][33];
shared int xq_tile[TILE_TOKENS][33];
shared float xd_tile[TILE_TOKENS];

void main() {
  const uint lid = gl_LocalInvocationID.x;
  const uint r0 = gl_WorkGroupID.x * TILE_ROWS, t0 = gl_WorkGroupID.y * TILE_TOKENS;
  const uint ri = lid & 7u, tb = lid >> 3;  // this thread: row r0 + ri, tokens t0 + tb + 8k
  const bool int8 = p.mode == MODE_INT8;
  const bool stored_quants = int8 && weights_are_quantized();
  float acc[4] = float[4](0.0, 0.0, 0.0, 0.0);

  for (uint b = 0u; b < p.n_blocks; ++b) {
    for (uint k = 0u; k < 4u; ++k) {
      const uint idx = lid + 64u * k, i = idx >> 5, j = idx & 31u;
      const uint r = r0 + i, c = b * 32u + j;
      const bool inside = r < p.rows && c < p.cols;
      if (stored_quants)
        wq_tile[i][j] = inside ? block_quant(r, c) : 0;
      else
        w_tile[i][j] = inside ? weight_at(r, c) : 0.0;
    }
    if (stored_quants && lid < TILE_ROWS) wd_tile[lid] = r0 + lid < p.rows ? block_scale(r0 + lid, b) : 0.0;
    for (uint k = 0u; k < 16u; ++k) {
      const uint idx = lid + 64u * k, tt = idx >> 5, j = idx & 31u;
      const uint t = t0 + tt, c = b * 32u + j;
      const bool inside = t < p.T && c < p.cols;
      if (int8)
        xq_tile[tt][j] = inside ? act_quant(t, c, p.n_blocks) : 0;
      else
        x_tile[tt][j] = inside ? x[t * p.cols + c] : 0.0;
    }
    if (int8 && lid < TILE_TOKENS) xd_tile[lid] = t0 + lid < p.T ? act_scale(t0 + lid, b, p.n_blocks) : 0.0;
    barrier();
    if (int8 && !stored_quants) {  // F32/F16 weights: quantize each row of the tile
      if (lid < TILE_ROWS) {
        float amax = 0.0;
        for (uint j = 0u; j < 32u; ++j) amax = max(amax, abs(w_tile[lid][j]));
        wd_tile[lid] = quant_scale(amax);
      }
      barrier();
      for (uint k = 0u; k < 4u; ++k) {
        const uint idx = lid + 64u * k, i = idx >> 5, j = idx & 31u;
        wq_tile[i][j] = quantize_value(w_tile[i][j], quant_inverse(wd_tile[i]));
      }
      barrier();
    }

    for (uint k = 0u; k < 4u; ++k) {
      const uint tt = tb + 8u * k;
      if (int8) {
        int s = 0;
        for (uint j = 0u; j < 32u; ++j) s += wq_tile[ri][j] * xq_tile[tt][j];
        acc[k] = fma(float(s), wd_tile[ri] * xd_tile[tt], acc[k]);
      } else {
        float s = 0.0;
        for (uint j = 0u; j < 32u; ++j) s += w_tile[ri][j] * x_tile[tt][j];
        acc[k] += s;
      }
    }
    barrier();
  }

  const uint r = r0 + ri;
  for (uint k = 0u; k < 4u; ++k) {
    const uint t = t0 + tb + 8u * k;
    if (t < p.T && r < p.rows) y[t * p.rows + r] = acc[k];
  }
}
