// Int8 activations as quantize_q8.comp writes them: each row of `len` values is cut into
// 32-value blocks (the last one zero-padded); block k of row t has 8 words of packed signed
// bytes at xq[(t * nb + k) * 8] and its f32 scale at xd[t * nb + k] (value = q * scale).
int act_quant(uint t, uint i, uint nb) {
  const uint word = xq[(t * nb + (i >> 5)) * 8u + ((i & 31u) >> 2)];
  return bitfieldExtract(int(word), int(8u * (i & 3u)), 8);
}
float act_scale(uint t, uint block, uint nb) { return xd[t * nb + block]; }
