// The resident tile layout of the cpu engine for Q4_0 and Q8_0 weights, made once at load.
//
// Rows are taken in groups of 8 (the last group may be shorter). Inside a group the blocks
// of the 8 rows that cover the same 32 columns are stored next to each other, scales first:
//   group g, block b:  [ d(row 0) .. d(row nr-1) ][ quants(row 0) ] .. [ quants(row nr-1) ]
// so a kernel that wants an 8-row x 32-column tile reads one contiguous run of bytes (as
// llama.cpp's repacked layouts do) instead of 8 strided rows. Nothing is added or dropped:
// the tiles take exactly the bytes of the quantized rows.
//
// Every product (forward and input gradient, any ISA) gets its weights through
// dequantize_tiles(), so all of them see the same effective weights bit for bit: the ones
// of the reference dequantizer nl::dequantize_row.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "nightlora/modelio/model.h"

namespace nl::engine {

inline constexpr int64_t kTileRows = 8;
inline constexpr int64_t kTileCols = 32;  // one Q4_0 / Q8_0 block

struct TiledMatrix {
  QType type = QType::F32;
  int64_t rows = 0, cols = 0;
  size_t block_bytes = 0;  // bytes of one quant block (scale + quants)
  std::vector<uint8_t> bytes;

  int64_t n_groups() const { return (rows + kTileRows - 1) / kTileRows; }
  int64_t group_rows(int64_t g) const { return rows - g * kTileRows < kTileRows ? rows - g * kTileRows : kTileRows; }
  int64_t n_blocks() const { return cols / kTileCols; }
  // Start of the tile for (row group g, column block b).
  const uint8_t* tile(int64_t g, int64_t b) const {
    const size_t row_bytes = block_bytes * static_cast<size_t>(n_blocks());
    return bytes.data() + static_cast<size_t>(g * kTileRows) * row_bytes +
           static_cast<size_t>(b * group_rows(g)) * block_bytes;
  }
};

// True for the weight types that get a tiled layout (others keep their rows).
bool has_tiled_layout(QType t);

// Repacks the rows of `w` (a has_tiled_layout type, cols a multiple of 32) into tiles.
TiledMatrix make_tiles(const TensorView& w);

// A dequantizer of tiles: writes rows [g*8, g*8 + nr) and column blocks [b0, b1) of the
// matrix as floats into `panel`, row-major: row i at panel + i * ld.
using DequantizeTilesFn = void (*)(const TiledMatrix& m, int64_t g, int64_t b0, int64_t b1, float* panel, int64_t ld);

// The scalar dequantizer (always available) and the one the dispatcher picked for this CPU.
void dequantize_tiles_scalar(const TiledMatrix& m, int64_t g, int64_t b0, int64_t b1, float* panel, int64_t ld);

}  // namespace nl::engine
