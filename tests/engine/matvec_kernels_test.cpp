// The matrix-vector kernels of the cpu engine (src/engine/kernels_matvec.h), which run the
// int8 products of one to four tokens on Q4_0/Q8_0 and Q4_K/Q5_K/Q6_K tiles (a decoder's
// one-token steps):
//  - every set this machine runs (scalar, AVX2, AVX-VNNI, NEON) reproduces the int8
//    definition (precision_reference.h) bit for bit, for 1 to 6 tokens, with full and
//    partial row groups;
//  - through the engine, a product of T <= 4 tokens (the matrix-vector route) gives the
//    same bits as the panel route, in int8, f32 and f16 mode, so a token decoded alone gets
//    the logits it gets inside a prompt (prefill and decode agree), for 1, 2 and 3 threads;
//  - every set's f32 kernel (AVX2, and AVX-512 where the CPU has it) gives the AVX2 panel
//    forward's bits for 1 to 6 tokens on F16, Q4_K, Q5_K and Q6_K tiles.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../../src/engine/kernels_int8.h"
#include "../../src/engine/kernels_matvec.h"
#include "../../src/engine/precision_reference.h"
#include "../../src/engine/tile_layout.h"
#include "nightlora/engine/frozen_engine.h"
#include "nightlora/modelio/model.h"
#include "nightlora/quant/qtype.h"
#include "nightlora/tokenizer/tokenizer.h"
#include "test_util.h"

namespace {

using nl::Precision;
using nl::QType;
using nl::engine::MatvecKernels;

std::vector<const MatvecKernels*> matvec_sets() {
  std::vector<const MatvecKernels*> sets = {&nl::engine::matvec_kernels_scalar()};
  for (const MatvecKernels* k : {nl::engine::matvec_kernels_avx2(), nl::engine::matvec_kernels_avx2_vnni(),
                                 nl::engine::matvec_kernels_avx512(), nl::engine::matvec_kernels_neon()})
    if (k) sets.push_back(k);
  if (sets.size() == 1) std::printf("[matvec] no SIMD matrix-vector kernels on this machine: scalar only\n");
  return sets;
}

// A quantized matrix (rows of different magnitudes), its view and its tiles.
struct Matrix {
  std::vector<uint8_t> bytes;
  nl::TensorView view;
  nl::engine::TiledMatrix tiles;
  Matrix(QType type, int64_t rows, int64_t cols, uint32_t seed) {
    const size_t rb = nl::qtype_row_bytes(type, cols);
    bytes.resize(rb * static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
      const std::vector<float> row = nltest::random_vec(static_cast<size_t>(cols), seed + static_cast<uint32_t>(r),
                                                        std::ldexp(1.0f, static_cast<int>(r % 5) - 2));
      nl::quantize_row(type, row.data(), bytes.data() + rb * static_cast<size_t>(r), cols);
    }
    view.name = "w";
    view.type = type;
    view.ne = {cols, rows};
    view.data = bytes.data();
    view.nbytes = bytes.size();
    tiles = nl::engine::make_tiles(view);
  }
};

struct Shape {
  QType type;
  int64_t rows, cols;
};
const Shape kShapes[] = {{QType::Q4_0, 64, 256}, {QType::Q8_0, 64, 256},   // whole row groups
                         {QType::Q4_0, 43, 96},  {QType::Q8_0, 43, 96},    // a partial last group
                         {QType::Q4_0, 8, 32},   {QType::Q8_0, 5, 32},     // one block; a lone partial group
                         // the K-quants: offsets (Q4_K, Q5_K), per-16 integer scales (Q6_K)
                         {QType::Q4_K, 64, 512}, {QType::Q5_K, 43, 256}, {QType::Q6_K, 64, 512},
                         {QType::Q6_K, 43, 256}, {QType::Q4_K, 5, 256}};

std::string name(const Shape& s) {
  return std::string(nl::qtype_info(s.type).name) + " " + std::to_string(s.rows) + "x" + std::to_string(s.cols);
}

TEST(MatvecKernels, EverySetReproducesTheInt8Definition) {
  const nl::engine::Int8Kernels& quant = nl::engine::int8_kernels_scalar();
  for (const Shape& s : kShapes) {
    const Matrix m(s.type, s.rows, s.cols, 7);
    const int64_t nb = s.cols / 32, groups = (s.rows + 7) / 8;
    for (int64_t nt = 1; nt <= 6; ++nt) {
      // Activations of very different sizes per token (the per-block scales differ).
      std::vector<float> X;
      for (int64_t t = 0; t < nt; ++t) {
        const auto x = nltest::random_vec(static_cast<size_t>(s.cols), 100 + static_cast<uint32_t>(t),
                                          std::ldexp(1.0f, static_cast<int>(t) * 3 - 6));
        X.insert(X.end(), x.begin(), x.end());
      }
      std::vector<float> want(static_cast<size_t>(nt * s.rows));
      nl::engine::reference_forward_precision(m.view, X.data(), nt, want.data(), Precision::Int8);
      std::vector<int8_t> q(static_cast<size_t>(nt * nb * 32));
      std::vector<float> d(static_cast<size_t>(nt * nb));
      std::vector<int32_t> sum(static_cast<size_t>(nt * nb));
      for (int64_t t = 0; t < nt; ++t)
        quant.quantize_row(X.data() + t * s.cols, s.cols, q.data() + t * nb * 32, d.data() + t * nb, sum.data() + t * nb);
      std::vector<float> z(d.size());  // the offsets' factors (Q4_K, Q5_K)
      nl::engine::forward_offset_factors(d.data(), sum.data(), nt * nb, z.data());
      for (const MatvecKernels* k : matvec_sets()) {
        std::vector<float> got(want.size(), NAN);
        // In two calls (row groups split), as the engine's tasks make them.
        const int64_t half = groups / 2;
        k->int8_tiles(m.tiles, 0, half, q.data(), d.data(), sum.data(), z.data(), nt, got.data(), s.rows);
        k->int8_tiles(m.tiles, half, groups, q.data(), d.data(), sum.data(), z.data(), nt, got.data(), s.rows);
        EXPECT_EQ(got, want) << k->isa << ", " << name(s) << ", " << nt << " tokens";
      }
    }
  }
}

// A one-layer model whose matrices all have one shape (the engine needs a whole model).
struct MatvecModel {
  Matrix m;
  nl::Model model;
  MatvecModel(QType type, int64_t rows, int64_t cols) : m(type, rows, cols, 11) {
    model.config.n_layer = 1;
    model.weights.layers.resize(1);
    nl::LayerWeights& L = model.weights.layers[0];
    for (nl::TensorView* v : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down, &model.weights.output})
      *v = m.view;
  }
};

TEST(MatvecKernels, FewTokenProductsEqualTheSameTokensInABlock) {
  // 136 rows: 17 row groups (the AVX2 f32 kernel's blocks of 4 groups and a single one; the
  // AVX-512 one's block of 8, pairs and a lone group); 43 rows: a partial group (int8 only:
  // f32 keeps the panels there); F16 tiles and K-quant tiles (transposed, then widened), f32
  // and f16 modes, with the scales, mins and levels of every K-quant type.
  for (const Shape& s : {Shape{QType::Q4_0, 136, 320}, Shape{QType::Q8_0, 136, 96}, Shape{QType::Q8_0, 43, 96},
                         Shape{QType::F16, 40, 160}, Shape{QType::F16, 136, 64}, Shape{QType::Q4_K, 24, 512},
                         Shape{QType::Q4_K, 136, 256}, Shape{QType::Q5_K, 88, 512}, Shape{QType::Q6_K, 40, 256},
                         Shape{QType::Q6_K, 136, 512}}) {
    // (F16: the f32 kernel only; int8 keeps the panels for it)
    MatvecModel mm(s.type, s.rows, s.cols);
    const int64_t T = 40;
    const std::vector<float> X = nltest::random_vec(static_cast<size_t>(T * s.cols), 21);
    std::vector<float> int8_ref(static_cast<size_t>(T * s.rows));
    nl::engine::reference_forward_precision(mm.m.view, X.data(), T, int8_ref.data(), Precision::Int8);
    for (const Precision p : {Precision::Int8, Precision::F32, Precision::F16})
      for (const std::string isa : {"scalar", "auto"})
        for (int threads : {1, 2, 3}) {
          nl::EngineOptions o;
          o.threads = threads;
          o.isa = isa;
          auto e = nl::make_engine(mm.model, o);
          const nl::WeightHandle h = e->handle(0, nl::Proj::Q);
          const std::string what = name(s) + ", " + nl::precision_name(p) + ", " + e->isa() + ", " +
                                   std::to_string(threads) + " threads";
          std::vector<float> block(int8_ref.size(), NAN);
          e->forward(h, X.data(), T, block.data(), p);  // the panel route: the mode's definition on this ISA
          if (p == Precision::Int8) {
            EXPECT_EQ(block, int8_ref) << what << ", block of " << T;
          }
          // Every set's f32 kernel directly (the plain AVX2 one too, which the engine does not
          // pick on an AVX-VNNI CPU), against the panel route of the same ISA.
          if (p == Precision::F32 && isa == "auto" && threads == 1 && s.rows % 8 == 0) {
            for (const MatvecKernels* k : matvec_sets()) {
              // (the AVX2 sets' f32 kernel keeps the AVX2 panel forward's order)
              if (!k->f32_tiles || e->isa().rfind("avx2", 0) != 0) continue;
              for (int64_t nt = 1; nt <= 6; ++nt) {  // (5 and 6: two passes over the weights)
                std::vector<float> got(static_cast<size_t>(nt * s.rows), NAN);
                // In two calls (row groups split at a multiple of 8), as the engine's tasks make them.
                const int64_t groups = s.rows / 8, split = groups / 16 * 8;
                k->f32_tiles(mm.m.tiles, 0, split, X.data() + 5 * s.cols, s.cols, nt, got.data(), s.rows);
                k->f32_tiles(mm.m.tiles, split, groups, X.data() + 5 * s.cols, s.cols, nt, got.data(), s.rows);
                EXPECT_TRUE(std::equal(got.begin(), got.end(), block.begin() + 5 * s.rows))
                    << what << ", set " << k->isa << ", " << nt << " tokens";
              }
            }
          }
          for (int64_t n = 1; n <= 5; ++n)  // 1-4 tokens: the matrix-vector route; 5: panels again
            for (int64_t t0 = 0; t0 + n <= T; t0 += 13) {
              std::vector<float> few(static_cast<size_t>(n * s.rows), NAN);
              e->forward(h, X.data() + t0 * s.cols, n, few.data(), p);
              EXPECT_TRUE(std::equal(few.begin(), few.end(), block.begin() + t0 * s.rows))
                  << what << ", tokens " << t0 << ".." << t0 + n - 1;
            }
        }
  }
}

}  // namespace
