#version 450
// Int8 mode, forward product: quantizes each row of the input buffer (T rows of `len`
// values) per 32-value block (the last one zero-padded) with the int8 quantizer
// (quantize.glsl). One invocation per block; output layout in activations.glsl.
layout(local_size_x = 64) in;
#include "params.glsl"
#include "quantize.glsl"
layout(std430, set = 0, binding = 1) readonly buffer In { float x[]; };
layout(std430, set = 0, binding = 3) writeonly buffer QuantIn { uint xq[]; };
layout(std430, set = 0, binding = 4) writeonly buffer QuantScale { float xd[]; };

void main() {
  const uint nb = (p.len + 31u) >> 5;
  const uint id = gl_GlobalInvocationID.x;
  if (id >= p.T * nb) return;
  const uint row = id / nb, block = id % nb;
  const uint base = row * p.len, c0 = block * 32u;
  float amax = 0.0;
  for (uint j = 0u; j < 32u; ++j)
    if (c0 + j < p.len) amax = max(amax, abs(x[base + c0 + j]));
  const float d = quant_scale(amax);
  const float inv = quant_inverse(d);
  for (uint w = 0u; w < 8u; ++w) {
    uint word = 0u;
    for (uint k = 0u; k < 4u; ++k) {
      const uint c = c0 + w * 4u + k;
      const int q = quantize_value(c < p.len ? x[base + c] : 0.0, inv);
      word |= (uint(q) & 0xFFu) << (8u * k);
    }
    xq[id * 8u + w] = word;
  }
  xd[id] = d;
}
