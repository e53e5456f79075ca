// The resident tile layout (src/engine/tile_layout.h): it holds exactly the quantized bytes,
// and every dequantizer of it (scalar, AVX2) gives the reference dequantizer's values bit
// for bit, which is what lets the forward and input-gradient kernels see the same weights.
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
  return k;
}

TEST(Tiles, HoldExactlyTheQuantizedBytes) {
  for (QType t : {QType::Q4_0, QType::Q8_0})
    for (int64_t rows : {1, 8, 13, 64, 67}) {
      QuantizedMatrix q(t, rows, 96, 3);
      const nl::engine::TiledMatrix m = nl::engine::make_tiles(q.view);
      EXPECT_EQ(m.bytes.size(), q.bytes.size()) << nl::qtype_name(t) << " rows " << rows;
    }
}

TEST(Tiles, EveryDequantizerReproducesTheReferenceBitForBit) {
  for (QType t : {QType::Q4_0, QType::Q8_0})
    for (int64_t rows : {5, 8, 21}) {
      const int64_t cols = 160;
      QuantizedMatrix q(t, rows, cols, 5);
      const nl::engine::TiledMatrix m = nl::engine::make_tiles(q.view);
      std::vector<float> ref(static_cast<size_t>(cols));
      for (const auto* k : kernel_sets()) {
        for (int64_t g = 0; g < m.n_groups(); ++g) {
          const int64_t nr = m.group_rows(g);
          // A sub-range of blocks, as the input-gradient tasks ask for.
          for (auto [b0, b1] : {std::pair<int64_t, int64_t>{0, 5}, {2, 4}}) {
            const int64_t n = (b1 - b0) * 32;
            std::vector<float> panel(static_cast<size_t>(nr * n), NAN);
            k->dequantize_tiles(m, g, b0, b1, panel.data(), n);
            for (int64_t i = 0; i < nr; ++i) {
              nl::dequantize_row(t, q.view.row(g * 8 + i), ref.data(), cols);
              ASSERT_EQ(0, std::memcmp(panel.data() + i * n, ref.data() + b0 * 32, static_cast<size_t>(n) * 4))
                  << k->isa << " " << nl::qtype_name(t) << " row " << g * 8 + i << " blocks " << b0 << ".." << b1;
            }
          }
        }
      }
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
