#version 450
// Input-gradient product dX (T x cols) = dY (T x rows) · W, from the same weight buffer and
// the same dequantization routine as the forward product (no transposed copy).
// A workgroup computes a 32-column x 32-token tile of dX (column block b); each of its 64
// threads owns one column for 16 tokens and accumulates in f32, rows in increasing order.
//  F32 / F16 mode: it walks the row groups of W (8 rows), staging each 8 x 32 weight tile
//    and the matching 32-token x 8-row slice of dY. (F16: dY is read as the halves guard_f16
//    made of it, activations.glsl; guard_f16 rounds dX after, per row.)
//  Int8 mode (the cpu engine's definition, src/engine/kernels_int8.h): it walks row blocks
//    of 32 rows. W's block scale dw[r, b] varies along the reduction, so it is folded into
//    dY first, under a scale bound: with ey = max_r |dY[t, r]| / 127, y = dY / ey,
//    m = max_r |dw[r, b]| and rho = dw / m, qv[r] = round(y[r] * rho[r]) in the cpu engine's
//    fixed point (requantize_grad, quantize.glsl) and e = ey * m;
//    then isum = sum_r qv[r] * qw[r, c] exactly in integers and acc = fma(float(isum), e, acc).
//    F32/F16 weights are quantized per row and 32-column block with the same quantizer.
layout(local_size_x = 64) in;
#include "params.glsl"
#include "weights.glsl"
#include "quantize.glsl"
layout(std430, set = 0, binding = 1) readonly buffer In { float dy[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Out { float dx[]; };
layout(std430, set = 0, binding = 3) readonly buffer HalfIn { uint xq[]; };       // F16 mode: dY as halves
layout(std430, set = 0, binding = 4) readonly buffer HalfScale { float xd[]; };  // and their row scales
#include "activations.glsl"

const uint TILE_ROWS = 8u;
const uint TILE_TOKENS = 32u;
const uint ROW_BLOCK = 32u;  // int8 mode

shared float w_tile[TILE_ROWS][33];
shared float dy_tile[TILE_TOKENS][TILE_ROWS + 1u];
// int8 mode
shared int wq_block[ROW_BLOCK][33];
shared float wd_block[ROW_BLOCK];       // dw, then rho = dw / wd_max
shared float wd_max;
shared float v_block[TILE_TOKENS][33];  // dY, then its quants (small integers, exact)
shared float e_block[TILE_TOKENS];      // ey, then e = ey * wd_max

void store(float acc[16], uint b, uint t0, uint j, uint th);

void f32_product(uint b, uint t0, uint lid, uint j, uint th) {
  float acc[16];
  for (uint k = 0u; k < 16u; ++k) acc[k] = 0.0;
  const uint n_groups = (p.rows + TILE_ROWS - 1u) / TILE_ROWS;
  for (uint g = 0u; g < n_groups; ++g) {
    const uint r0 = g * TILE_ROWS;
    for (uint k = 0u; k < 4u; ++k) {
      const uint idx = lid + 64u * k, i = idx >> 5, jj = idx & 31u;
      const uint r = r0 + i, c = b * 32u + jj;
      w_tile[i][jj] = r < p.rows && c < p.cols ? weight_at(r, c) : 0.0;
    }
    for (uint k = 0u; k < 4u; ++k) {
      const uint idx = lid + 64u * k, tt = idx >> 3, i = idx & 7u;
      const uint t = t0 + tt, r = r0 + i;
      const bool inside = t < p.T && r < p.rows;
      if (p.mode == MODE_F16)
        dy_tile[tt][i] = inside ? act_f16(t, r, p.rows) : 0.0;
      else
        dy_tile[tt][i] = inside ? dy[t * p.rows + r] : 0.0;
    }
    barrier();
    for (uint k = 0u; k < 16u; ++k) {
      const uint tt = th + 2u * k;
      // One row at a time, in increasing order: the reference's summation order.
      for (uint i = 0u; i < TILE_ROWS; ++i) acc[k] += dy_tile[tt][i] * w_tile[i][j];
    }
    barrier();
  }
  store(acc, b, t0, j, th);
}

void int8_product(uint b, uint t0, uint lid, uint j, uint th) {
  float acc[16];
  for (uint k = 0u; k < 16u; ++k) acc[k] = 0.0;
  const bool stored_quants = weights_are_quantized();
  const uint n_row_blocks = (p.rows + ROW_BLOCK - 1u) / ROW_BLOCK;
  for (uint R = 0u; R < n_row_blocks; ++R) {
    const uint r0 = R * ROW_BLOCK;
    // The weights of this 32 x 32 block, as int8 quants and per-row scales.
    if (stored_quants) {
      for (uint k = 0u; k < 16u; ++k) {
        const uint idx = lid + 64u * k, i = idx >> 5, jj = idx & 31u;
        const uint r = r0 + i, c = b * 32u + jj;
        wq_block[i][jj] = r < p.rows ? block_quant(r, c) : 0;
      }
      if (lid < ROW_BLOCK) wd_block[lid] = r0 + lid < p.rows ? block_scale(r0 + lid, b) : 0.0;
    } else {
      for (uint k = 0u; k < 16u; ++k) {  // stage the floats in v_block, quantize per row
        const uint idx = lid + 64u * k, i = idx >> 5, jj = idx & 31u;
        const uint r = r0 + i, c = b * 32u + jj;
        v_block[i][jj] = r < p.rows && c < p.cols ? weight_at(r, c) : 0.0;
      }
      barrier();
      if (lid < ROW_BLOCK) {
        float amax = 0.0;
        for (uint jj = 0u; jj < 32u; ++jj) amax = max(amax, abs(v_block[lid][jj]));
        wd_block[lid] = quant_scale(amax);
      }
      barrier();
      for (uint k = 0u; k < 16u; ++k) {
        const uint idx = lid + 64u * k, i = idx >> 5, jj = idx & 31u;
        wq_block[i][jj] = quantize_value(v_block[i][jj], quant_inverse(wd_block[i]));
      }
    }
    barrier();
    // The scale bound of the block's weight scales, and their ratios to it.
    if (lid == 0u) {
      float m = 0.0;
      for (uint i = 0u; i < ROW_BLOCK; ++i) m = max(m, abs(wd_block[i]));
      wd_max = m;
    }
    // dY for 32 tokens x 32 rows, and each token's scale ey.
    for (uint k = 0u; k < 16u; ++k) {
      const uint idx = lid + 64u * k, tt = idx >> 5, i = idx & 31u;
      const uint t = t0 + tt, r = r0 + i;
      v_block[tt][i] = t < p.T && r < p.rows ? dy[t * p.rows + r] : 0.0;
    }
    barrier();
    if (lid < ROW_BLOCK) wd_block[lid] = wd_max != 0.0 ? wd_block[lid] / wd_max : 0.0;
    if (lid < TILE_TOKENS) {
      float amax = 0.0;
      for (uint i = 0u; i < ROW_BLOCK; ++i) amax = max(amax, abs(v_block[lid][i]));
      e_block[lid] = quant_scale(amax);
    }
    barrier();
    for (uint k = 0u; k < 16u; ++k) {
      const uint idx = lid + 64u * k, tt = idx >> 5, i = idx & 31u;
      const float y = v_block[tt][i] * quant_inverse(e_block[tt]);
      v_block[tt][i] = float(requantize_grad(y, wd_block[i]));
    }
    barrier();
    if (lid < TILE_TOKENS) e_block[lid] *= wd_max;
    barrier();
    for (uint k = 0u; k < 16u; ++k) {
      const uint tt = th + 2u * k;
      int s = 0;
      for (uint i = 0u; i < ROW_BLOCK; ++i) s += int(v_block[tt][i]) * wq_block[i][j];
      acc[k] = fma(float(s), e_block[tt], acc[k]);
    }
    barrier();
  }
  store(acc, b, t0, j, th);
}

void store(float acc[16], uint b, uint t0, uint j, uint th) {
  const uint c = b * 32u + j;
  for (uint k = 0u; k < 16u; ++k) {
    const uint t = t0 + th + 2u * k;
    if (t < p.T && c < p.cols) dx[t * p.cols + c] = acc[k];
  }
}

void main() {
  const uint lid = gl_LocalInvocationID.x;
  const uint b = gl_WorkGroupID.x, t0 = gl_WorkGroupID.y * TILE_TOKENS;
  const uint j = lid & 31u, th = lid >> 5;  // this thread: column 32b + j, tokens t0 + th + 2k
  if (p.mode == MODE_INT8)
    int8_product(b, t0, lid, j, th);
  else
    f32_product(b, t0, lid, j, th);
}
