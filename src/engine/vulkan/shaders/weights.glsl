// The ONE dequantization routine of the Vulkan backend: forward, recompute and input-gradient
// shaders all read the same resident buffer through these functions, so every product sees
// the same effective weights (no transposed or dequantized copy exists).
//
// Device layout of a matrix (32-bit words; built by device_layout.cpp):
//  F32  row-major floats (their bits).
//  F16  row-major halves, two per word (element e in word e/2, low half first).
//  Q4_0 / Q8_0  8-row x 32-column tiles, tile (g, b) = row group g, column block b, index
//       ti = g * n_blocks + b. First the scales of every tile: 4 words per tile (8 halves,
//       row i of the group in half i). Then the quants of every tile: 8 rows x QW words,
//       QW = 4 (Q4_0: 16 bytes, byte j holds column j in its low nibble and j + 16 in its
//       high one, as ggml stores them) or 8 (Q8_0: 32 signed bytes). Rows past the end of
//       the matrix (the last group) are zero.
// The arithmetic is the reference dequantizer's: float(q) * d with d the f16 scale.
layout(std430, set = 0, binding = 0) readonly buffer Weights { uint w_words[]; };

bool weights_are_quantized() { return p.wtype == WT_Q4_0 || p.wtype == WT_Q8_0; }

uint tile_index(uint r, uint b) { return (r >> 3) * p.n_blocks + b; }

// f16 scale of block b (columns 32b .. 32b+31) of row r. Quantized types only.
float block_scale(uint r, uint b) {
  vec2 pair = unpackHalf2x16(w_words[tile_index(r, b) * 4u + ((r & 7u) >> 1)]);
  return (r & 1u) == 0u ? pair.x : pair.y;
}

// Integer quant of element (r, c), as the block stores it (Q4_0: already minus 8).
int block_quant(uint r, uint c) {
  const uint j = c & 31u;
  const uint quant_base = ((p.rows + 7u) >> 3) * p.n_blocks * 4u;
  if (p.wtype == WT_Q4_0) {
    const uint row_start = quant_base + tile_index(r, c >> 5) * 32u + (r & 7u) * 4u;
    const uint byte_index = j & 15u;
    const uint word = w_words[row_start + (byte_index >> 2)];
    const uint byte_value = (word >> (8u * (byte_index & 3u))) & 0xFFu;
    return int(j < 16u ? (byte_value & 0xFu) : (byte_value >> 4)) - 8;
  }
  const uint row_start = quant_base + tile_index(r, c >> 5) * 64u + (r & 7u) * 8u;
  return bitfieldExtract(int(w_words[row_start + (j >> 2)]), int(8u * (j & 3u)), 8);
}

// Element (r, c) of W as f32. The caller keeps r < rows and c < cols.
float weight_at(uint r, uint c) {
  if (p.wtype == WT_F32) return uintBitsToFloat(w_words[r * p.cols + c]);
  if (p.wtype == WT_F16) {
    const uint e = r * p.cols + c;
    vec2 pair = unpackHalf2x16(w_words[e >> 1]);
    return (e & 1u) == 0u ? pair.x : pair.y;
  }
  return float(block_quant(r, c)) * block_scale(r, c >> 5);
}
