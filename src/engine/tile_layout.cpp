#include "tile_layout.h"

#include <algorithm>
#include <cstring>

#include "../quant/blocks.h"
#include "nightlora/quant/qtype.h"
#include "nightlora/util/error.h"
#include "nightlora/util/half.h"
#include "nightlora/util/thread_pool.h"

namespace nl::engine {

int64_t tile_cols(QType t) {
  switch (t) {
    case QType::Q4_0:
    case QType::Q5_0:  // as Q8_0 tiles
    case QType::Q8_0:
    case QType::F16: return kTileCols;
    case QType::Q4_K:
    case QType::Q5_K:
    case QType::Q6_K: return kSuperTileCols;
    default: return 0;
  }
}

bool has_tiled_layout(QType t) { return tile_cols(t) > 0; }

int64_t dequant_cols(QType t) { return tile_cols(t) == kSuperTileCols ? kKQuantHalfCols : tile_cols(t); }

bool has_tiled_layout(QType t, int64_t cols) { return has_tiled_layout(t) && cols > 0 && cols % tile_cols(t) == 0; }

namespace {

// The legacy blocks start with their half-float scale: the tile stores the nr scales
// first, then the nr runs of quants.
void copy_legacy_tile(const uint8_t* const* src, int64_t nr, size_t block_bytes, uint8_t* dst) {
  const size_t scale_bytes = sizeof(uint16_t), quant_bytes = block_bytes - scale_bytes;
  for (int64_t i = 0; i < nr; ++i) {
    std::memcpy(dst + static_cast<size_t>(i) * scale_bytes, src[i], scale_bytes);
    std::memcpy(dst + static_cast<size_t>(nr) * scale_bytes + static_cast<size_t>(i) * quant_bytes,
                src[i] + scale_bytes, quant_bytes);
  }
}

// A Q5_0 block as a Q8_0 one: the same scale, the quants q - 16 (in [-16, 15]).
quant::BlockQ8_0 q8_0_of_q5_0(const uint8_t* src) {
  quant::BlockQ5_0 b;
  std::memcpy(&b, src, sizeof(b));
  quant::BlockQ8_0 out;
  out.d = b.d;
  quant::q5_0_values(b, out.qs);
  return out;
}

}  // namespace

TiledMatrix make_tiles(const TensorView& w, ThreadPool* pool) {
  if (!has_tiled_layout(w.type, w.cols()))
    fail(w.name, std::string("no tiled layout for a ") + qtype_name(w.type) + " matrix with rows of " +
                     std::to_string(w.cols()) + " elements");
  TiledMatrix m;
  m.type = resident_type(w.type);
  m.five_bit_quants = w.type == QType::Q5_0;
  m.rows = w.rows();
  m.cols = w.cols();
  m.tile_cols = tile_cols(w.type);
  // Bytes of one row's slice of a tile: tile_cols elements of the row as the tiles store it.
  m.block_bytes = qtype_row_bytes(m.type, m.tile_cols);
  m.bytes.resize(m.block_bytes * static_cast<size_t>(m.n_blocks() * m.rows));
  const bool legacy = m.type == QType::Q4_0 || m.type == QType::Q8_0;
  const size_t src_block_bytes = qtype_row_bytes(w.type, m.tile_cols);
  // Row group g's tiles: one contiguous run of the bytes (left uninitialized by resize).
  const auto group = [&](int64_t g) {
    const int64_t nr = m.group_rows(g);
    for (int64_t b = 0; b < m.n_blocks(); ++b) {
      uint8_t* dst = const_cast<uint8_t*>(m.tile(g, b));
      const uint8_t* src[kTileRows];
      quant::BlockQ8_0 converted[kTileRows];
      for (int64_t i = 0; i < nr; ++i) {
        src[i] = w.row(g * kTileRows + i) + static_cast<size_t>(b) * src_block_bytes;
        if (m.five_bit_quants) {
          converted[i] = q8_0_of_q5_0(src[i]);
          src[i] = reinterpret_cast<const uint8_t*>(&converted[i]);
        }
      }
      if (legacy) {
        copy_legacy_tile(src, nr, m.block_bytes, dst);
      } else {
        for (int64_t i = 0; i < nr; ++i) std::memcpy(dst + static_cast<size_t>(i) * m.block_bytes, src[i], m.block_bytes);
      }
    }
  };
  if (pool) {  // runs of 8 groups per task: whole pages of the tiles and of the file
    const int64_t per = 8, n_tasks = (m.n_groups() + per - 1) / per;
    pool->parallel_for(n_tasks, [&](int64_t t) {
      for (int64_t g = t * per; g < std::min(m.n_groups(), (t + 1) * per); ++g) group(g);
    });
  } else {
    for (int64_t g = 0; g < m.n_groups(); ++g) group(g);
  }
  return m;
}

void dequantize_kquant_half_scalar(QType t, const uint8_t* block, int half, float* y) {
  float super_block[kSuperTileCols];
  if (t == QType::Q4_K)
    quant::dequantize_row_q4_K(reinterpret_cast<const quant::BlockQ4_K*>(block), super_block, kSuperTileCols);
  else if (t == QType::Q5_K)
    quant::dequantize_row_q5_K(reinterpret_cast<const quant::BlockQ5_K*>(block), super_block, kSuperTileCols);
  else if (t == QType::Q6_K)
    quant::dequantize_row_q6_K(reinterpret_cast<const quant::BlockQ6_K*>(block), super_block, kSuperTileCols);
  else
    fail("dequantize_kquant_half_scalar", std::string("not a K-quant: ") + qtype_name(t));
  std::memcpy(y, super_block + half * kKQuantHalfCols, static_cast<size_t>(kKQuantHalfCols) * sizeof(float));
}

// Legacy types: the same arithmetic as quant::dequantize_row_q4_0 / q8_0 (one float
// multiply per element). K-quants: the reference dequantizer itself on the whole
// super-block, of which the asked half is kept. F16: exact conversion. The values are
// identical to the reference's.
void dequantize_tiles_scalar(const TiledMatrix& m, int64_t g, int64_t c0, int64_t c1, float* panel, int64_t ld) {
  if (!has_tiled_layout(m.type)) fail("dequantize_tiles", std::string("no tiled layout for ") + qtype_name(m.type));
  const int64_t nr = m.group_rows(g);
  for_each_unit_row(m, g, c0, c1, panel, ld, [&](const uint8_t* t, int64_t i, int half, float* y) {
    const uint8_t* block = t + static_cast<size_t>(i) * m.block_bytes;  // K-quants, F16
    switch (m.type) {
      case QType::Q4_0:
      case QType::Q8_0: {
        const size_t quant_bytes = m.block_bytes - sizeof(uint16_t);
        uint16_t dbits;
        std::memcpy(&dbits, t + i * 2, 2);
        const float d = fp16_to_f32(dbits);
        const uint8_t* q = t + static_cast<size_t>(nr) * sizeof(uint16_t) + static_cast<size_t>(i) * quant_bytes;
        if (m.type == QType::Q4_0) {
          for (int j = 0; j < 16; ++j) {
            y[j] = static_cast<float>((q[j] & 0xF) - 8) * d;
            y[j + 16] = static_cast<float>((q[j] >> 4) - 8) * d;
          }
        } else {
          for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(static_cast<int8_t>(q[j])) * d;
        }
        break;
      }
      case QType::Q4_K:
      case QType::Q5_K:
      case QType::Q6_K: dequantize_kquant_half_scalar(m.type, block, half, y); break;
      case QType::F16:
        for (int64_t j = 0; j < kTileCols; ++j) {
          uint16_t h;
          std::memcpy(&h, block + 2 * j, 2);
          y[j] = fp16_to_f32(h);
        }
        break;
      default: break;  // not a tiled type: refused above
    }
  });
}

}  // namespace nl::engine
