// Every tiled weight type (Q4_0, Q8_0, Q4_K, Q5_K, Q6_K, F16) x product (forward, input grad) x
// instruction set this build can run (scalar; AVX2 on x86-64; NEON on arm64, under qemu in
// CI) through the cpu engine, against the scalar reference products (reference_products.h).
// Shapes are awkward on purpose: rows not a multiple of the 8-row tile group, more rows than
// one input-gradient panel (53 > 48 or 32 rows: dX is carried across panels), token counts that are not a
// multiple of the engine's token block nor of the kernels' register blocks, one token, and
// bands of f32 tasks with a partial last band: 141 rows (18 row groups: a forward band of
// 16 and one of 2), 640 or 768 columns (5 or 6 input-gradient column ranges of 128: bands of
// 4) and 1312 or 1536 (6 ranges of 256, the AVX2 set's width).
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../../src/engine/kernels.h"
#include "nightlora/engine/frozen_engine.h"
#include "nightlora/engine/reference_products.h"
#include "nightlora/quant/qtype.h"
#include "nightlora/tokenizer/tokenizer.h"  // complete type for Model's unique_ptr<Tokenizer>
#include "nightlora/util/error.h"
#include "test_util.h"

namespace {

using nl::QType;

// A one-layer model whose eight matrices all have one shape and type (random weights).
struct TilesModel {
  nl::Model model;
  std::vector<std::vector<uint8_t>> bytes;

  TilesModel(QType type, int64_t rows, int64_t cols, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    model.config.n_layer = 1;
    model.weights.layers.resize(1);
    nl::LayerWeights& L = model.weights.layers[0];
    nl::TensorView* slots[8] = {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down, &model.weights.output};
    bytes.resize(8);
    const size_t rb = nl::qtype_row_bytes(type, cols);
    std::vector<float> row(static_cast<size_t>(cols));
    for (int i = 0; i < 8; ++i) {
      auto& b = bytes[static_cast<size_t>(i)];
      b.resize(rb * static_cast<size_t>(rows));
      for (int64_t r = 0; r < rows; ++r) {
        for (auto& v : row) v = nd(rng) * 0.5f;
        nl::quantize_row(type, row.data(), b.data() + rb * static_cast<size_t>(r), cols);
      }
      nl::TensorView& v = *slots[i];
      v.name = std::string("m").append(std::to_string(i));  // (not "m" + ...: a GCC 12 -Wrestrict false positive)
      v.type = type;
      v.ne = {cols, rows};
      v.data = b.data();
      v.nbytes = b.size();
    }
  }
  const nl::TensorView& first() const { return model.weights.layers[0].wq; }
};

using nltest::random_vec;

// The instruction sets of this build and CPU, by the names EngineOptions::isa takes.
std::vector<std::string> isas_here() {
  std::vector<std::string> isas = {"scalar"};
  if (nl::engine::avx2_kernels()) isas.push_back("avx2");
  if (nl::engine::neon_kernels()) isas.push_back("neon");
  if (isas.size() == 1) std::printf("[tiles] no SIMD kernel set on this machine: only the scalar one is tested\n");
  return isas;
}

// Scalar: bit for bit. SIMD: fused multiply-adds and other partial sums, so within float
// rounding of the sums: |got - ref| <= 2e-6 * max(1, max |ref|) (the sums here have up to
// ~1000 terms of size ~1, so rounding differences are ~1e-6 relative to the largest value).
void expect_close(const std::vector<float>& got, const std::vector<float>& ref, const std::string& isa,
                  const std::string& what) {
  ASSERT_EQ(got.size(), ref.size());
  if (isa == "scalar") {
    EXPECT_EQ(got, ref) << what << ": the scalar kernels must reproduce the reference bit for bit";
    return;
  }
  double m = 1, e = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got[i])) << what << " element " << i;
    m = std::max(m, std::fabs(static_cast<double>(ref[i])));
    e = std::max(e, std::fabs(static_cast<double>(got[i]) - ref[i]));
  }
  EXPECT_LE(e / m, 2e-6) << what << " (" << isa << ") vs the scalar reference";
}

struct TilesShape {
  int64_t rows, cols, T;
};

class TiledProducts : public ::testing::TestWithParam<QType> {};

TEST_P(TiledProducts, EveryInstructionSetMatchesTheScalarReference) {
  const QType type = GetParam();
  const bool kquant = type == QType::Q4_K || type == QType::Q5_K || type == QType::Q6_K;
  // Columns: K-quants need whole 256-element super-blocks.
  const std::vector<TilesShape> shapes =
      kquant ? std::vector<TilesShape>{{13, 256, 1}, {53, 512, 67}, {8, 768, 5}, {141, 256, 130}, {13, 768, 130},
                                  {13, 1536, 130}}
             : std::vector<TilesShape>{{13, 96, 1},     {53, 160, 67},  {8, 544, 5},     {27, 32, 130},
                                  {141, 64, 130},  {27, 640, 130}, {27, 1312, 130}};
  for (const TilesShape& s : shapes) {
    SCOPED_TRACE(std::string(nl::qtype_name(type)) + " " + std::to_string(s.rows) + "x" + std::to_string(s.cols) +
                 " T=" + std::to_string(s.T));
    TilesModel mm(type, s.rows, s.cols, static_cast<uint32_t>(s.rows * 7 + s.cols));
    const auto X = random_vec(static_cast<size_t>(s.T * s.cols), 11);
    const auto dY = random_vec(static_cast<size_t>(s.T * s.rows), 12);
    std::vector<float> Yref(static_cast<size_t>(s.T * s.rows)), dXref(static_cast<size_t>(s.T * s.cols));
    nl::reference_forward(mm.first(), X.data(), s.T, Yref.data());
    nl::reference_input_grad(mm.first(), dY.data(), s.T, dXref.data());
    for (const std::string& isa : isas_here()) {
      nl::EngineOptions o;
      o.threads = 2;
      o.isa = isa;
      auto engine = nl::make_engine(mm.model, o);
      ASSERT_EQ(engine->isa().substr(0, engine->isa().find(",")), isa) << engine->isa();  // "avx2, int8 SET"
      const nl::WeightHandle h = engine->handle(0, nl::Proj::Q);
      std::vector<float> Y(Yref.size(), NAN), dX(dXref.size(), NAN);
      engine->forward(h, X.data(), s.T, Y.data());
      engine->input_grad(h, dY.data(), s.T, dX.data());
      expect_close(Y, Yref, isa, "forward");
      expect_close(dX, dXref, isa, "input grad");
    }
  }
}

// The SIMD input-gradient kernels on their own, for any panel height (the AVX2 one copies
// each column slab in pieces of at most 256 rows) and width (24-, 16- and 8-column slabs and
// a ragged tail): each output is D plus the chain of fused multiply-adds over the rows in
// increasing order, bit for bit.
TEST(PanelKernels, InputGradIsTheRowOrderedChainForAnyPanel) {
  std::vector<const nl::engine::PanelKernels*> sets;
  if (nl::engine::avx2_kernels()) sets.push_back(nl::engine::avx2_kernels());
  if (nl::engine::neon_kernels()) sets.push_back(nl::engine::neon_kernels());
  if (sets.empty()) GTEST_SKIP() << "no SIMD kernel set on this machine";
  for (const int64_t nr : {1, 8, 130, 257, 600})
    for (const int64_t n : {8, 24, 40, 128, 131})
      for (const int64_t nt : {1, 6}) {
        SCOPED_TRACE("rows " + std::to_string(nr) + " cols " + std::to_string(n) + " tokens " + std::to_string(nt));
        const int64_t ldp = n + 3, ldg = nr + 5, ldd = n + 7;
        const auto P = random_vec(static_cast<size_t>(nr * ldp), 21);
        const auto G = random_vec(static_cast<size_t>(nt * ldg), 22);
        const auto D0 = random_vec(static_cast<size_t>(nt * ldd), 23);
        std::vector<float> want = D0;
        for (int64_t t = 0; t < nt; ++t)
          for (int64_t k = 0; k < n; ++k) {
            float acc = want[static_cast<size_t>(t * ldd + k)];
            for (int64_t i = 0; i < nr; ++i)
              acc = std::fma(G[static_cast<size_t>(t * ldg + i)], P[static_cast<size_t>(i * ldp + k)], acc);
            want[static_cast<size_t>(t * ldd + k)] = acc;
          }
        for (const nl::engine::PanelKernels* k : sets) {
          std::vector<float> got = D0;
          k->input_grad(G.data(), ldg, nt, P.data(), ldp, nr, n, got.data(), ldd);
          for (int64_t t = 0; t < nt; ++t)
            for (int64_t c = 0; c < n; ++c)
              ASSERT_EQ(got[static_cast<size_t>(t * ldd + c)], want[static_cast<size_t>(t * ldd + c)])
                  << k->isa << " token " << t << " column " << c;
        }
      }
}

// Resident bytes: the tiles take exactly the quantized bytes (the issue allows +5%).
TEST_P(TiledProducts, ResidentWeightsAreTheQuantizedBytes) {
  const QType type = GetParam();
  const int64_t rows = 200, cols = (type == QType::Q4_K || type == QType::Q5_K || type == QType::Q6_K) ? 512 : 160;
  TilesModel mm(type, rows, cols, 4);
  nl::EngineOptions o;
  o.threads = 1;
  auto engine = nl::make_engine(mm.model, o);
  size_t quantized = 0;
  for (const auto& b : mm.bytes) quantized += b.size();
  EXPECT_EQ(engine->resident_weight_bytes(), quantized);
  EXPECT_LE(static_cast<double>(engine->resident_bytes()), 1.05 * static_cast<double>(quantized));
}

INSTANTIATE_TEST_SUITE_P(Types, TiledProducts,
                         ::testing::Values(QType::Q4_0, QType::Q8_0, QType::Q4_K, QType::Q5_K, QType::Q6_K, QType::F16),
                         [](const ::testing::TestParamInfo<QType>& i) { return std::string(nl::qtype_name(i.param)); });

}  // namespace
