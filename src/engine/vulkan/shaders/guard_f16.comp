#version 450
// F16 mode: each row of the input (target 0) or output (target 1) buffer becomes f16 with the
// per-row range guard: the row is scaled by 2^k, k chosen from its largest magnitude so that
// it lands in [2^14, 2^15) (no overflow at 65504, small values do not flush; the same
// exponent as the cpu engine's range_guard.h) and rounded to f16 (half to even).
//  target 0 (the product's input): the halves are what the product reads: packed two to a
//    word, row t at word t * ceil(len / 2) of binding 3, its scale 2^-k at binding 4
//    (activations.glsl, act_f16), so the product shader reads 2 bytes per activation.
//  target 1 (the product's output, which the host gets as f32): rounded and unscaled in
//    place, value = f16 * 2^-k, the numbers an f16 buffer with a row scale holds.
// One workgroup per row.
layout(local_size_x = 64) in;
#include "params.glsl"
layout(std430, set = 0, binding = 1) readonly buffer In { float x[]; };
layout(std430, set = 0, binding = 2) buffer Out { float y[]; };
layout(std430, set = 0, binding = 3) writeonly buffer HalfIn { uint xh[]; };
layout(std430, set = 0, binding = 4) writeonly buffer HalfScale { float xs[]; };

shared float partial_max[64];

float load(uint i) { return p.target == 0u ? x[i] : y[i]; }

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
  if (p.target == 0u) {
    const uint words = (p.len + 1u) >> 1;  // an odd row pads its last word with a zero half
    for (uint w = lid; w < words; w += 64u) {
      const uint i = 2u * w;
      const float hi = i + 1u < p.len ? x[base + i + 1u] : 0.0;
      xh[row * words + w] = packHalf2x16(vec2(ldexp(x[base + i], k), ldexp(hi, k)));
    }
    if (lid == 0u) xs[row] = ldexp(1.0, -k);
  } else {
    for (uint i = lid; i < p.len; i += 64u) {
      const float h = unpackHalf2x16(packHalf2x16(vec2(ldexp(y[base + i], k), 0.0))).x;
      y[base + i] = ldexp(h, -k);
    }
  }
}
