#include "tile_layout.h"

#include <cstring>

#include "nightlora/quant/qtype.h"
#include "nightlora/util/error.h"
#include "nightlora/util/half.h"

namespace nl::engine {

bool has_tiled_layout(QType t) { return t == QType::Q4_0 || t == QType::Q8_0; }

TiledMatrix make_tiles(const TensorView& w) {
  if (!has_tiled_layout(w.type) || w.cols() % kTileCols != 0)
    fail(w.name, "no tiled layout for this weight type/shape");
  TiledMatrix m;
  m.type = w.type;
  m.rows = w.rows();
  m.cols = w.cols();
  m.block_bytes = qtype_info(w.type).block_bytes;
  m.bytes.resize(m.block_bytes * static_cast<size_t>(m.n_blocks() * m.rows));
  const size_t scale_bytes = sizeof(uint16_t), quant_bytes = m.block_bytes - scale_bytes;
  for (int64_t g = 0; g < m.n_groups(); ++g) {
    const int64_t nr = m.group_rows(g);
    for (int64_t b = 0; b < m.n_blocks(); ++b) {
      uint8_t* dst = const_cast<uint8_t*>(m.tile(g, b));
      for (int64_t i = 0; i < nr; ++i) {
        // Every legacy block starts with its half-float scale, then its quants.
        const uint8_t* src = w.row(g * kTileRows + i) + static_cast<size_t>(b) * m.block_bytes;
        std::memcpy(dst + static_cast<size_t>(i) * scale_bytes, src, scale_bytes);
        std::memcpy(dst + static_cast<size_t>(nr) * scale_bytes + static_cast<size_t>(i) * quant_bytes,
                    src + scale_bytes, quant_bytes);
      }
    }
  }
  return m;
}

// Same arithmetic as quant::dequantize_row_q4_0 / q8_0 (one float multiply per element),
// so the values are identical to the reference dequantizer.
void dequantize_tiles_scalar(const TiledMatrix& m, int64_t g, int64_t b0, int64_t b1, float* panel, int64_t ld) {
  const int64_t nr = m.group_rows(g);
  const size_t quant_bytes = m.block_bytes - sizeof(uint16_t);
  for (int64_t b = b0; b < b1; ++b) {
    const uint8_t* t = m.tile(g, b);
    const uint8_t* quants = t + static_cast<size_t>(nr) * sizeof(uint16_t);
    for (int64_t i = 0; i < nr; ++i) {
      uint16_t dbits;
      std::memcpy(&dbits, t + i * 2, 2);
      const float d = fp16_to_f32(dbits);
      const uint8_t* q = quants + static_cast<size_t>(i) * quant_bytes;
      float* y = panel + i * ld + (b - b0) * kTileCols;
      if (m.type == QType::Q4_0) {
        for (int j = 0; j < 16; ++j) {
          y[j] = static_cast<float>((q[j] & 0xF) - 8) * d;
          y[j + 16] = static_cast<float>((q[j] >> 4) - 8) * d;
        }
      } else {
        for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(static_cast<int8_t>(q[j])) * d;
      }
    }
  }
}

}  // namespace nl::engine
