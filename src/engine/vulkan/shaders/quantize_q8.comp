#version 450
// Int8 mode: quantizes each row of the input buffer (T rows of `len` values) per 32-value
// block, as ggml's Q8_0 does: scale = max|x| / 127, q = round(x / scale) in [-127, 127]
// (the scale is kept in f32). One invocation per block.
layout(local_size_x = 64) in;
#include "params.glsl"
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
  const float d = amax / 127.0;
  const float inv = d != 0.0 ? 1.0 / d : 0.0;
  for (uint w = 0u; w < 8u; ++w) {
    uint word = 0u;
    for (uint k = 0u; k < 4u; ++k) {
      const uint c = c0 + w * 4u + k;
      const float v = c < p.len ? x[base + c] : 0.0;
      const int q = clamp(int(round(v * inv)), -127, 127);
      word |= (uint(q) & 0xFFu) << (8u * k);
    }
    xq[id * 8u + w] = word;
  }
  xd[id] = d;
}
