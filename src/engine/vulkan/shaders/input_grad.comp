#version 450
// Input-gradient product dX (T x cols) = dY (T x rows) · W, from the same weight buffer and
// the same dequantization routine as the forward product (no transposed copy).
// A workgroup computes a 32-column x 32-token tile of dX: it walks the row groups of W in
// increasing order, staging each 8 x 32 weight tile and the matching 32-token x 8-row slice
// of dY in shared memory; each of its 64 threads owns one column for 16 tokens (f32).
//  Int8 mode: dY was quantized per 32 rows (quantize_q8 over rows of length `rows`; a tile's
//    8 rows lie in one block). With Q4_0/Q8_0 weights each product is int8 x int4/int8 in
//    integer arithmetic, scaled by the weight row's block scale (the sum runs across weight
//    rows, whose scales differ) and the activation block's scale.
layout(local_size_x = 64) in;
#include "params.glsl"
#include "weights.glsl"
layout(std430, set = 0, binding = 1) readonly buffer In { float dy[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Out { float dx[]; };
layout(std430, set = 0, binding = 3) readonly buffer QuantIn { uint xq[]; };
layout(std430, set = 0, binding = 4) readonly buffer QuantScale { float xd[]; };
#include "activations.glsl"

const uint TILE_ROWS = 8u;
const uint TILE_TOKENS = 32u;

shared float w_tile[TILE_ROWS][33];
shared int wq_tile[TILE_ROWS][33];
shared float wd_tile[TILE_ROWS];
shared float dy_tile[TILE_TOKENS][TILE_ROWS + 1u];
shared int dyq_tile[TILE_TOKENS][TILE_ROWS + 1u];
shared float dyd_tile[TILE_TOKENS];

void main() {
  const uint lid = gl_LocalInvocationID.x;
  const uint b = gl_WorkGroupID.x, t0 = gl_WorkGroupID.y * TILE_TOKENS;
  const uint j = lid & 31u, th = lid >> 5;  // this thread: column 32b + j, tokens t0 + th + 2k
  const bool int_acts = p.mode == MODE_INT8;
  const bool int_weights = int_acts && weights_are_quantized();
  const uint nb_rows = (p.rows + 31u) >> 5;  // 32-blocks of a dY row (int8 mode)
  float acc[16];
  for (uint k = 0u; k < 16u; ++k) acc[k] = 0.0;

  const uint n_groups = (p.rows + TILE_ROWS - 1u) / TILE_ROWS;
  for (uint g = 0u; g < n_groups; ++g) {
    const uint r0 = g * TILE_ROWS;
    for (uint k = 0u; k < 4u; ++k) {
      const uint idx = lid + 64u * k, i = idx >> 5, jj = idx & 31u;
      const uint r = r0 + i, c = b * 32u + jj;
      const bool inside = r < p.rows && c < p.cols;
      if (int_weights)
        wq_tile[i][jj] = inside ? block_quant(r, c) : 0;
      else
        w_tile[i][jj] = inside ? weight_at(r, c) : 0.0;
    }
    if (int_weights && lid < TILE_ROWS) wd_tile[lid] = r0 + lid < p.rows ? block_scale(r0 + lid, b) : 0.0;
    for (uint k = 0u; k < 4u; ++k) {
      const uint idx = lid + 64u * k, tt = idx >> 3, i = idx & 7u;
      const uint t = t0 + tt, r = r0 + i;
      const bool inside = t < p.T && r < p.rows;
      if (int_acts)
        dyq_tile[tt][i] = inside ? act_quant(t, r, nb_rows) : 0;
      else
        dy_tile[tt][i] = inside ? dy[t * p.rows + r] : 0.0;
    }
    if (int_acts && lid < TILE_TOKENS) dyd_tile[lid] = t0 + lid < p.T ? act_scale(t0 + lid, r0 >> 5, nb_rows) : 0.0;
    barrier();

    for (uint k = 0u; k < 16u; ++k) {
      const uint tt = th + 2u * k;
      if (int_weights) {
        float s = 0.0;
        for (uint i = 0u; i < TILE_ROWS; ++i) s += float(dyq_tile[tt][i] * wq_tile[i][j]) * wd_tile[i];
        acc[k] += s * dyd_tile[tt];
      } else if (int_acts) {
        float s = 0.0;
        for (uint i = 0u; i < TILE_ROWS; ++i) s += float(dyq_tile[tt][i]) * w_tile[i][j];
        acc[k] += s * dyd_tile[tt];
      } else {
        // Rows in increasing order, one at a time: the reference's summation order.
        for (uint i = 0u; i < TILE_ROWS; ++i) acc[k] += dy_tile[tt][i] * w_tile[i][j];
      }
    }
    barrier();
  }

  const uint c = b * 32u + j;
  for (uint k = 0u; k < 16u; ++k) {
    const uint t = t0 + th + 2u * k;
    if (t < p.T && c < p.cols) dx[t * p.cols + c] = acc[k];
  }
}
