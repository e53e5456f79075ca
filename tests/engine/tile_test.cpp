// The resident tile layout (src/engine/tile_layout.h) of Q4_0, Q8_0, Q4_K, Q5_K, Q6_K and F16: it
// holds exactly the quantized bytes (Q5_0: as Q8_0 tiles of the same values), and every dequantizer of it (scalar, AVX2, NEON) gives
// the reference dequantizer's values bit for bit, which is what lets the forward and
// input-gradient kernels see the same weights.
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../../src/engine/kernels.h"
#include "../../src/engine/tile_layout.h"
#include "nightlora/engine/frozen_engine.h"
#include "nightlora/quant/qtype.h"
#include "nightlora/util/error.h"
#include "nightlora/util/thread_pool.h"

namespace {

using nl::QType;

struct QuantizedMatrix {
  std::vector<uint8_t> bytes;
  nl::TensorView view;
  QuantizedMatrix(QType type, int64_t rows, int64_t cols, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const size_t rb = nl::qtype_row_bytes(type, cols);
    bytes.resize(rb * static_cast<size_t>(rows));
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
      // Rows of very different magnitudes, so scales span many binades (and f16 subnormals).
      const float scale = std::ldexp(1.0f, static_cast<int>(r % 40) - 30);
      for (auto& v : row) v = nd(rng) * scale;
      nl::quantize_row(type, row.data(), bytes.data() + rb * static_cast<size_t>(r), cols);
    }
    view.name = "w";
    view.type = type;
    view.ne = {cols, rows};
    view.data = bytes.data();
    view.nbytes = bytes.size();
  }
};

std::vector<const nl::engine::PanelKernels*> kernel_sets() {
  std::vector<const nl::engine::PanelKernels*> k = {&nl::engine::scalar_kernels()};
  if (nl::engine::avx2_kernels()) k.push_back(nl::engine::avx2_kernels());
  if (nl::engine::neon_kernels()) k.push_back(nl::engine::neon_kernels());
  return k;
}

const QType kTiledTypes[] = {QType::Q4_0, QType::Q5_0, QType::Q8_0, QType::Q4_K, QType::Q5_K, QType::Q6_K, QType::F16};

// Row lengths made of `tiles` whole tiles of the type (32 or 256 columns each).
int64_t cols_of(QType t, int64_t tiles) { return tiles * nl::engine::tile_cols(t); }

TEST(Tiles, HoldExactlyTheQuantizedBytes) {
  for (QType t : kTiledTypes)
    for (int64_t rows : {1, 8, 13, 64, 67}) {
      QuantizedMatrix q(t, rows, cols_of(t, 3), 3);
      const nl::engine::TiledMatrix m = nl::engine::make_tiles(q.view);
      if (t == QType::Q5_0)
        EXPECT_EQ(m.bytes.size(), nl::qtype_row_bytes(QType::Q8_0, q.view.cols()) * static_cast<size_t>(rows));
      else
        EXPECT_EQ(m.bytes.size(), q.bytes.size()) << nl::qtype_name(t) << " rows " << rows;
      EXPECT_EQ(m.type, nl::engine::resident_type(t));
      EXPECT_EQ(m.five_bit_quants, t == QType::Q5_0);
    }
}

// On a pool's threads (as the cpu engine makes them) the tiles are the same bytes, for whole
// and partial row groups and more groups than a task's run of 8.
TEST(Tiles, APoolMakesTheSameTiles) {
  nl::ThreadPool pool(3);
  for (QType t : kTiledTypes)
    for (int64_t rows : {5, 64, 133}) {
      QuantizedMatrix q(t, rows, cols_of(t, 2), 4);
      const nl::engine::TiledMatrix one = nl::engine::make_tiles(q.view), many = nl::engine::make_tiles(q.view, &pool);
      ASSERT_EQ(one.bytes.size(), many.bytes.size());
      EXPECT_EQ(0, std::memcmp(one.bytes.data(), many.bytes.data(), one.bytes.size()))
          << nl::qtype_name(t) << " rows " << rows;
    }
}

// Q5_0 rows become Q8_0 tiles of the same scale and the quants q - 16: each tile row's bytes
// are the Q8_0 block of those values, checked against the Q5_0 block's bits directly.
TEST(Tiles, Q5_0RowsBecomeQ8_0TilesOfTheSameQuants) {
  const int64_t rows = 13, cols = 96;
  QuantizedMatrix q(QType::Q5_0, rows, cols, 11);
  const nl::engine::TiledMatrix m = nl::engine::make_tiles(q.view);
  ASSERT_EQ(m.type, QType::Q8_0);
  ASSERT_EQ(m.block_bytes, 34u);
  bool saw_minus16 = false, saw_15 = false;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < cols / 32; ++b) {
      const uint8_t* src = q.view.row(r) + b * 22;  // d, qh[4], qs[16]
      const int64_t g = r / 8, i = r % 8, nr = m.group_rows(g);
      const uint8_t* tile = m.tile(g, b);
      EXPECT_EQ(0, std::memcmp(tile + 2 * i, src, 2)) << "scale of row " << r << " block " << b;
      const auto* quants = reinterpret_cast<const int8_t*>(tile + 2 * nr + 32 * i);
      uint32_t qh;
      std::memcpy(&qh, src + 2, 4);
      for (int j = 0; j < 32; ++j) {
        const int nibble = j < 16 ? (src[6 + j] & 0x0F) : (src[6 + j - 16] >> 4);
        const int want = (nibble | static_cast<int>((qh >> j) & 1) << 4) - 16;
        ASSERT_EQ(quants[j], want) << "row " << r << " block " << b << " column " << j;
        saw_minus16 = saw_minus16 || want == -16;
        saw_15 = saw_15 || want == 15;
      }
    }
  EXPECT_TRUE(saw_minus16 && saw_15) << "the test matrix should reach both ends of Q5_0's range";
}

TEST(Tiles, EveryDequantizerReproducesTheReferenceBitForBit) {
  for (QType t : kTiledTypes)
    for (int64_t rows : {5, 8, 21}) {
      const int64_t tc = nl::engine::tile_cols(t), cols = cols_of(t, 5);
      QuantizedMatrix q(t, rows, cols, 5);
      const nl::engine::TiledMatrix m = nl::engine::make_tiles(q.view);
      ASSERT_EQ(m.tile_cols, tc);
      std::vector<float> ref(static_cast<size_t>(cols));
      for (const auto* k : kernel_sets()) {
        for (int64_t g = 0; g < m.n_groups(); ++g) {
          const int64_t nr = m.group_rows(g);
          // Column ranges as the input-gradient tasks ask for them, in dequantizer units
          // (a tile; half a K-quant super-block): all, whole tiles inside, and ranges that
          // start or end on a K-quant half.
          const int64_t u = nl::engine::dequant_cols(t);
          for (auto [c0, c1] : {std::pair<int64_t, int64_t>{0, cols}, {2 * tc, 4 * tc}, {u, 3 * tc + u}, {3 * u, 4 * u}}) {
            const int64_t n = c1 - c0;
            std::vector<float> panel(static_cast<size_t>(nr * n), NAN);
            k->dequantize_tiles(m, g, c0, c1, panel.data(), n);
            for (int64_t i = 0; i < nr; ++i) {
              nl::dequantize_row(t, q.view.row(g * 8 + i), ref.data(), cols);
              ASSERT_EQ(0, std::memcmp(panel.data() + i * n, ref.data() + c0, static_cast<size_t>(n) * 4))
                  << k->isa << " " << nl::qtype_name(t) << " row " << g * 8 + i << " columns " << c0 << ".." << c1;
            }
          }
        }
      }
    }
}

// F16 halves that are subnormal, infinite or quiet NaN convert exactly too (payloads kept).
// Signalling NaNs are left out: F16C quiets them, and no weight file holds them.
TEST(Tiles, F16SpecialValuesConvertExactly) {
  const int64_t rows = 9, cols = 64;
  std::vector<uint16_t> halves(static_cast<size_t>(rows * cols));
  std::mt19937 rng(8);
  for (auto& h : halves) {
    h = static_cast<uint16_t>(rng());
    if ((h & 0x7C00) == 0x7C00) h |= 0x0200;  // a NaN or inf pattern: make it a quiet NaN
  }
  halves[0] = 0x0001;  // smallest subnormal
  halves[1] = 0x7C00;  // +inf
  halves[2] = 0xFE01;  // NaN with payload
  nl::TensorView v;
  v.name = "w";
  v.type = QType::F16;
  v.ne = {cols, rows};
  v.data = reinterpret_cast<const uint8_t*>(halves.data());
  v.nbytes = halves.size() * 2;
  const nl::engine::TiledMatrix m = nl::engine::make_tiles(v);
  std::vector<float> ref(static_cast<size_t>(cols)), panel(static_cast<size_t>(8 * cols));
  for (const auto* k : kernel_sets())
    for (int64_t g = 0; g < m.n_groups(); ++g) {
      k->dequantize_tiles(m, g, 0, cols, panel.data(), cols);
      for (int64_t i = 0; i < m.group_rows(g); ++i) {
        nl::dequantize_row(QType::F16, v.row(g * 8 + i), ref.data(), cols);
        ASSERT_EQ(0, std::memcmp(panel.data() + i * cols, ref.data(), static_cast<size_t>(cols) * 4))
            << k->isa << " row " << g * 8 + i;
      }
    }
}

TEST(Tiles, RowsOfPartialTilesKeepTheirRowsWithAClearReason) {
  EXPECT_TRUE(nl::engine::has_tiled_layout(QType::F16, 64));
  EXPECT_FALSE(nl::engine::has_tiled_layout(QType::F16, 83));   // not whole 32-column tiles
  EXPECT_FALSE(nl::engine::has_tiled_layout(QType::Q4_K, 128));  // not a whole super-block
  EXPECT_FALSE(nl::engine::has_tiled_layout(QType::F32, 64));   // no tiled layout at all
  std::vector<uint16_t> halves(3 * 83, 0);
  nl::TensorView v;
  v.name = "blk.0.attn_q.weight";
  v.type = QType::F16;
  v.ne = {83, 3};
  v.data = reinterpret_cast<const uint8_t*>(halves.data());
  v.nbytes = halves.size() * 2;
  try {
    nl::engine::make_tiles(v);
    FAIL() << "83 columns are not whole F16 tiles";
  } catch (const nl::Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("blk.0.attn_q.weight"), std::string::npos) << msg;
    EXPECT_NE(msg.find("83"), std::string::npos) << msg;
  }
}

TEST(Tiles, UnknownInstructionSetIsAClearError) {
  try {
    nl::engine::select_kernels("sse9");
    FAIL() << "an unknown isa must be an error";
  } catch (const nl::Error& e) {
    EXPECT_NE(std::string(e.what()).find("sse9"), std::string::npos) << e.what();
  }
}

}  // namespace
