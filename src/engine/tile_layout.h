// The resident tile layout of the cpu engine, made once at load, for Q4_0, Q8_0, Q4_K, Q5_K,
// Q6_K and F16 weights, and Q5_0 weights stored as Q8_0 tiles (below).
//
// Rows are taken in groups of 8 (the last group may be shorter) and columns in tiles of
// `tile_cols`: one quant block for Q4_0/Q8_0 (32), one super-block for the K-quants (256),
// 32 halves for F16. A tile (row group g, column tile b) is one contiguous run of bytes
// holding the 8 rows' slices of those columns, so a kernel that wants an 8-row tile reads
// one run (as llama.cpp's repacked layouts do) instead of 8 strided rows:
//   Q4_0, Q8_0:  [ d(row 0) .. d(row nr-1) ][ quants(row 0) ] .. [ quants(row nr-1) ]
//                (scales first, so an integer kernel finds the 8 scales together)
//   K-quants:    [ block(row 0) ] .. [ block(row nr-1) ]    whole ggml super-blocks
//   F16:         [ 32 halves(row 0) ] .. [ 32 halves(row nr-1) ]
// Nothing is added or dropped: the tiles take exactly the bytes of the quantized rows.
// Q5_0 rows (the fallback of K-quant files for rows that are not whole super-blocks, e.g.
// most of Qwen2.5-0.5B's Q4_K_M) become Q8_0 tiles exactly: the same scale d and the quants
// q - 16, so every kernel and product takes them as Q8_0 with the same values, and none
// needs a Q8_0 copy beside them (8.5 bits per weight instead of 5.5 + 8.5).
//
// Every product (forward and input gradient, any ISA) gets its weights through
// dequantize_tiles(), so all of them see the same effective weights bit for bit: the ones
// of the reference dequantizer nl::dequantize_row.
#pragma once
#include <cstddef>
#include <cstdint>
#include <new>
#include <utility>
#include <vector>

#include "nightlora/modelio/model.h"

namespace nl {
class ThreadPool;
}

namespace nl::engine {

inline constexpr int64_t kTileRows = 8;
inline constexpr int64_t kTileCols = 32;        // one Q4_0 / Q8_0 block; an F16 tile
inline constexpr int64_t kSuperTileCols = 256;  // one Q4_K / Q5_K / Q6_K super-block

// Storage whose first byte starts a 64-byte cache line, so F16 and Q4_K/Q5_K tiles (8 rows x
// 64, 144 or 176 bytes) each start one too: a one-token product reads every byte once, and a
// tile straddling lines costs a line more per tile (std::vector's new gave 16-byte alignment).
// resize() leaves the bytes uninitialized (default-initialized, no zeroing pass): whoever
// resizes writes every byte (make_tiles, the cpu engine's Q8_0 copy).
template <class T>
struct CacheLineAllocator {
  using value_type = T;
  static constexpr std::align_val_t kAlign{64};
  CacheLineAllocator() = default;
  template <class U>
  CacheLineAllocator(const CacheLineAllocator<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), kAlign)); }
  void deallocate(T* p, size_t) { ::operator delete(p, kAlign); }
  template <class U>
  void construct(U* p) {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
  template <class U>
  bool operator==(const CacheLineAllocator<U>&) const { return true; }
};

struct TiledMatrix {
  QType type = QType::F32;  // of the tiles: Q8_0 for Q5_0 weights (resident_type)
  // Q8_0 tiles of Q5_0 weights: every quant is in [-16, 15], so the int8 panels are Signed5
  // ones, whose kernels sum more products in int16 than Q8_0's (kernels_int8.h).
  bool five_bit_quants = false;
  int64_t rows = 0, cols = 0;
  int64_t tile_cols = kTileCols;  // columns per tile
  size_t block_bytes = 0;         // bytes of one row's slice of a tile
  std::vector<uint8_t, CacheLineAllocator<uint8_t>> bytes;

  int64_t n_groups() const { return (rows + kTileRows - 1) / kTileRows; }
  int64_t group_rows(int64_t g) const { return rows - g * kTileRows < kTileRows ? rows - g * kTileRows : kTileRows; }
  int64_t n_blocks() const { return cols / tile_cols; }
  // Start of the tile for (row group g, column tile b).
  const uint8_t* tile(int64_t g, int64_t b) const {
    const size_t row_bytes = block_bytes * static_cast<size_t>(n_blocks());
    return bytes.data() + static_cast<size_t>(g * kTileRows) * row_bytes +
           static_cast<size_t>(b * group_rows(g)) * block_bytes;
  }
};

// Columns per tile of a weight type, or 0 for the types that keep their rows as stored.
int64_t tile_cols(QType t);
// The type of the tiles a weight type gets: Q8_0 for Q5_0, else the type itself.
inline QType resident_type(QType t) { return t == QType::Q5_0 ? QType::Q8_0 : t; }
// True for the weight types that get a tiled layout (others keep their rows).
bool has_tiled_layout(QType t);
// True when a matrix of this type with rows of `cols` elements can be tiled (whole tiles).
bool has_tiled_layout(QType t, int64_t cols);

// Repacks the rows of `w` (has_tiled_layout(type, cols)) into tiles, on the pool's threads
// when given one (the work is first touches of the tiles and the file: page faults).
TiledMatrix make_tiles(const TensorView& w, ThreadPool* pool = nullptr);

// The columns a dequantizer call starts and ends on: a tile, except for the K-quants, whose
// super-blocks split into two halves of 128 columns (Q4_K, Q5_K: sub-blocks 0-3 and 4-7,
// Q6_K: its two 128-value groups), so an input-gradient task can take 128 columns.
inline constexpr int64_t kKQuantHalfCols = 128;

// The kernels read each resident tile once per product (or per token block, or per decoded
// token), from memory: they ask for the n bytes `distance` past p ahead of time. (Past a
// run's end that is another group's or matrix's bytes, or none; the address is computed as
// an integer and a prefetch never faults, so that is harmless.)
inline void prefetch_ahead(const uint8_t* p, size_t distance, size_t n) {
  const uintptr_t ahead = reinterpret_cast<uintptr_t>(p) + distance;
  for (size_t o = 0; o < n; o += 64) __builtin_prefetch(reinterpret_cast<const void*>(ahead + o), 0, 3);
}
int64_t dequant_cols(QType t);

// A dequantizer of tiles: writes rows [g*8, g*8 + nr) and columns [c0, c1) (multiples of
// dequant_cols) of the matrix as floats into `panel`, row-major: row i at panel + i * ld.
using DequantizeTilesFn = void (*)(const TiledMatrix& m, int64_t g, int64_t c0, int64_t c1, float* panel, int64_t ld);

// The walk every dequantizer makes: fn(tile, i, half, y) for each dequantizer unit of
// columns [c0, c1) and each row i of group g, with `tile` the unit's tile, `half` which half
// of a K-quant super-block the unit is (0 otherwise) and y where the row's values go.
template <class F>
void for_each_unit_row(const TiledMatrix& m, int64_t g, int64_t c0, int64_t c1, float* panel, int64_t ld, F&& fn) {
  const int64_t nr = m.group_rows(g), unit = dequant_cols(m.type);
  for (int64_t c = c0; c < c1; c += unit) {
    const uint8_t* tile = m.tile(g, c / m.tile_cols);
    const int half = static_cast<int>(c % m.tile_cols / kKQuantHalfCols);
    for (int64_t i = 0; i < nr; ++i) fn(tile, i, half, panel + i * ld + (c - c0));
  }
}

// Half `half` (128 values) of one K-quant super-block (Q4_K, Q5_K, Q6_K) at y, by the
// reference dequantizer (the whole super-block, of which the half is kept).
void dequantize_kquant_half_scalar(QType t, const uint8_t* block, int half, float* y);

// The scalar dequantizer (always available); kernels.h has the one picked for this CPU.
void dequantize_tiles_scalar(const TiledMatrix& m, int64_t g, int64_t c0, int64_t c1, float* panel, int64_t ld);

}  // namespace nl::engine
