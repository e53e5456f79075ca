// Activations the product shaders read in the reduced-precision modes (the including shader
// declares xq, binding 3, and xd, binding 4).
//  Int8, as quantize_q8.comp writes them: each row of `len` values is cut into 32-value
//    blocks (the last one zero-padded); block k of row t has 8 words of packed signed bytes
//    at xq[(t * nb + k) * 8] and its f32 scale at xd[t * nb + k] (value = q * scale).
//  F16, as guard_f16.comp writes them: row t holds ceil(len / 2) words of packed halves at
//    xq[t * ceil(len / 2)] (element i in word i / 2, low half first) and its power-of-two
//    scale at xd[t] (value = half * scale, exact: the scale only moves the exponent).
int act_quant(uint t, uint i, uint nb) {
  const uint word = xq[(t * nb + (i >> 5)) * 8u + ((i & 31u) >> 2)];
  return bitfieldExtract(int(word), int(8u * (i & 3u)), 8);
}
float act_scale(uint t, uint block, uint nb) { return xd[t * nb + block]; }

float act_f16(uint t, uint i, uint len) {
  const vec2 pair = unpackHalf2x16(xq[t * ((len + 1u) >> 1) + (i >> 1)]);
  return ((i & 1u) == 0u ? pair.x : pair.y) * xd[t];
}
