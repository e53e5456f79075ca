#version 450
// Input-gradient product dX (T x cols) = dY (T x rows) · W, from the same weight buffer and
// the same dequantization routine as the forward product (no transposed copy).
// A workgroup computes a 32-column x 32-token tile of dX (column block b); each of its 64
// threads owns one column for 16 tokens and accumulates in f32, rows in increasing order.
//  F32 / F16 mode: it walks the row groups of W (8 rows), staging each 8 x 32 weight tile
//    and the matching 32-token x 8-row slice of dY. (F16: dY is read as the halves guard_f16
//    made of it, activations.glsl; guard_f16 rounds dX after, per row.)
//  Int8 mode (the cpu engine's definition, src/engine/kernels_int8.h): it walks row blocks
//    of 64 rows. W's block scale dw[r, b] varies along the reduction, so it is folded into
//    dY first, under a scale bound: with ey = max_r |dY[t, r]| / 127, y = dY / ey,
//    m = max_r |dw[r, b]| and rho = dw / m, qv[r] = round(y[r] * rho[r]) in the cpu engine's
//    fixed point (requantize_grad, quantize.glsl) and e = ey * m;
//    then isum = sum_r qv[r] * qw[r, c] exactly in integers and acc = fma(float(isum), e, acc).
//    F32/F16 weights are quantized per row and 32-column block with the same quantizer.
//    The scales of a block come first (from global memory); its weights and dY are then
//    staged 32 rows at a time, so shared memory holds a 32 x 32 tile of each.
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
const uint ROW_BLOCK = 64u;  // int8 mode: rows per reduction block
const uint ROW_STAGE = 32u;  // int8 mode: rows staged at a time

shared float w_tile[TILE_ROWS][33];
shared float dy_tile[TILE_TOKENS][TILE_ROWS + 1u];
// int8 mode
shared int wq_block[ROW_STAGE][33];
shared float wd_block[ROW_BLOCK];       // the rows' weight scales dw
shared float wd_max;
shared float v_block[TILE_TOKENS][33];  // the tokens' quants of dY (small integers, exact)
shared float e_block[TILE_TOKENS];      // ey

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
    // Each row's weight scale (one thread per row: local_size_x = ROW_BLOCK) and each
    // token's dY scale ey.
    {
      const uint r = r0 + lid;
      if (stored_quants) {
        wd_block[lid] = r < p.rows ? block_scale(r, b) : 0.0;
      } else {  // the Q8_0 copy's scale of the row's 32 columns
        float amax = 0.0;
        for (uint jj = 0u; jj < 32u; ++jj) {
          const uint c = b * 32u + jj;
          amax = max(amax, abs(r < p.rows && c < p.cols ? weight_at(r, c) : 0.0));
        }
        wd_block[lid] = weight_scale(amax);
      }
    }
    if (lid < TILE_TOKENS) {
      const uint t = t0 + lid;
      float amax = 0.0;
      for (uint i = 0u; i < ROW_BLOCK; ++i) amax = max(amax, abs(t < p.T && r0 + i < p.rows ? dy[t * p.rows + r0 + i] : 0.0));
      e_block[lid] = quant_scale(amax);
    }
    barrier();
    // The scale bound of the block's weight scales (rho = dw / wd_max below).
    if (lid == 0u) {
      float m = 0.0;
      for (uint i = 0u; i < ROW_BLOCK; ++i) m = max(m, abs(wd_block[i]));
      wd_max = m;
    }
    barrier();
    int isum[16];
    for (uint k = 0u; k < 16u; ++k) isum[k] = 0;
    for (uint h = 0u; h < ROW_BLOCK; h += ROW_STAGE) {
      // The weights of these 32 rows x 32 columns as int8 quants, and dY for 32 tokens x
      // 32 rows with W's scales folded in, requantized.
      for (uint k = 0u; k < 16u; ++k) {
        const uint idx = lid + 64u * k, i = idx >> 5, jj = idx & 31u;
        const uint r = r0 + h + i, c = b * 32u + jj;
        if (stored_quants)
          wq_block[i][jj] = r < p.rows ? block_quant(r, c) : 0;
        else
          wq_block[i][jj] = r < p.rows && c < p.cols ? quantize_weight(weight_at(r, c), wd_block[h + i]) : 0;
      }
      for (uint k = 0u; k < 16u; ++k) {
        const uint idx = lid + 64u * k, tt = idx >> 5, i = idx & 31u;
        const uint t = t0 + tt, r = r0 + h + i;
        const float y = (t < p.T && r < p.rows ? dy[t * p.rows + r] : 0.0) * quant_inverse(e_block[tt]);
        const float rho = wd_max != 0.0 ? wd_block[h + i] / wd_max : 0.0;
        v_block[tt][i] = float(requantize_grad(y, rho));
      }
      barrier();
      for (uint k = 0u; k < 16u; ++k) {
        const uint tt = th + 2u * k;
        for (uint i = 0u; i < ROW_STAGE; ++i) isum[k] += int(v_block[tt][i]) * wq_block[i][j];
      }
      barrier();
    }
    for (uint k = 0u; k < 16u; ++k) acc[k] = fma(float(isum[k]), e_block[th + 2u * k] * wd_max, acc[k]);
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
