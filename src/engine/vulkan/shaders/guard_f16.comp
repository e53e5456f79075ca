#version 450
// F16 mode: stores each row of the input (target 0) or output (target 1) buffer as f16 with
// the per-row range guard: the row is scaled by 2^k, k chosen from its largest magnitude so
// that it lands in [2^14, 2^15) (no overflow at 65504, small values do not flush; the same
// exponent as the cpu engine's range_guard.h), rounded to f16 (half to even) and unscaled. The rounded values are kept in the f32 buffer: the numbers are exactly
// those an f16 activation buffer with a per-row power-of-two scale holds.
// One workgroup per row.
layout(local_size_x = 64) in;
#include "params.glsl"
layout(std430, set = 0, binding = 1) buffer In { float x[]; };
layout(std430, set = 0, binding = 2) buffer Out { float y[]; };

shared float partial_max[64];

float load(uint i) { return p.target == 0u ? x[i] : y[i]; }
void store(uint i, float v) {
  if (p.target == 0u) x[i] = v; else y[i] = v;
}

void main() {
  const uint row = gl_WorkGroupID.x, lid = gl_LocalInvocationID.x;
  if (row >= p.T) return;
  const uint base = row * p.len;
  float m = 0.0;
  for (uint i = lid; i < p.len; i += 64u) m = max(m, abs(load(base + i)));
  partial_max[lid] = m;
  barrier();
  for (uint s = 32u; s > 0u; s >>= 1) {
    if (lid < s) partial_max[lid] = max(partial_max[lid], partial_max[lid + s]);
    barrier();
  }
  const float amax = partial_max[0];
  int k = 0;
  if (amax > 0.0 && !isinf(amax) && !isnan(amax)) {
    int e;
    frexp(amax, e);  // amax < 2^e
    k = clamp(15 - e, -126, 126);  // amax * 2^k in [2^14, 2^15), as the cpu engine's guard
  }
  for (uint i = lid; i < p.len; i += 64u) {
    const float scaled = ldexp(load(base + i), k);
    const float h = unpackHalf2x16(packHalf2x16(vec2(scaled, 0.0))).x;
    store(base + i, ldexp(h, -k));
  }
}
