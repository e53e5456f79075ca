// The cpu engine's precision modes (f16 and int8) for every weight type, both products and
// every instruction set this machine runs:
//  - against the scalar references of src/engine/precision_reference.h: int8 bit for bit on
//    every ISA (same integers, same f32 chains); f16 bit for bit with the scalar kernels and
//    within one f16 rounding of the row maximum with SIMD ones (their f32 products round
//    differently before the f16 rounding);
//  - against the f32 product, within the bounds documented at kF16VsF32 / kInt8VsF32;
//  - with rows of 1e6 and 1e-8 (f16 overflow and underflow without the range guard).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#if defined(__aarch64__)
#include <sys/auxv.h>
#endif

#include "../../src/engine/kernels_int8.h"
#include "../../src/engine/precision_reference.h"
#include "nightlora/engine/frozen_engine.h"
#include "nightlora/engine/reference_products.h"
#include "nightlora/quant/qtype.h"
#include "nightlora/tokenizer/tokenizer.h"
#include "nightlora/util/error.h"
#include "test_util.h"

namespace {

using nl::Precision;
using nl::QType;

// Relative error (Frobenius norm of the difference over the norm of the f32 product).
//  f16: activations and outputs each carry one f16 rounding (relative 2^-11).
constexpr double kF16VsF32 = 2e-3;
//  int8: activations rounded to 1/254 of their block's maximum, dY with W's scales folded in
//  to 1/254 of the bound max|dY| max|dw| (coarser when the two peak on different rows, as
//  on these rows of different magnitudes); ~1% on random data. Types requantized from f32 panels (F16, F32, K-quants) add
//  the same rounding on the weights.
constexpr double kInt8VsF32 = 2.5e-2;
constexpr double kInt8RequantizedVsF32 = 4e-2;

using nltest::random_vec;

// A one-layer model whose 8 matrices all have one shape (the engine needs a whole model).
struct PrecisionModel {
  nl::Model model;
  std::vector<uint8_t> bytes;
  PrecisionModel(QType type, int64_t rows, int64_t cols, uint32_t seed) {
    const size_t rb = nl::qtype_row_bytes(type, cols);
    bytes.resize(rb * static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
      // Rows of different magnitudes, so W's block scales vary along the input-gradient
      // reduction (what the int8 mode folds into dY).
      const std::vector<float> row = random_vec(static_cast<size_t>(cols), seed + static_cast<uint32_t>(r),
                                                0.5f * std::ldexp(1.0f, static_cast<int>(r % 5) - 2));
      nl::quantize_row(type, row.data(), bytes.data() + rb * static_cast<size_t>(r), cols);
    }
    model.config.n_layer = 1;
    model.weights.layers.resize(1);
    nl::LayerWeights& L = model.weights.layers[0];
    for (nl::TensorView* v : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down, &model.weights.output}) {
      v->name = "w";
      v->type = type;
      v->ne = {cols, rows};
      v->data = bytes.data();
      v->nbytes = bytes.size();
    }
  }
  const nl::TensorView& w() const { return model.weights.layers[0].wq; }
};

// "scalar" and, where it differs, what "auto" picks on this machine.
std::vector<std::string> isas() {
  std::vector<std::string> out = {"scalar"};
  PrecisionModel m(QType::Q8_0, 8, 32, 1);
  nl::EngineOptions o;
  o.threads = 1;
  const std::string best = nl::make_engine(m.model, o)->isa();
  if (best != "scalar") out.push_back(best);
  else std::printf("[precision] no SIMD kernels on this machine: only the scalar ISA is tested\n");
  return out;
}

double rel_error(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    num += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
    den += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

// f16 results of SIMD kernels: within one f16 rounding of each row's maximum.
void expect_within_f16_rounding(const std::vector<float>& got, const std::vector<float>& want, int64_t n,
                                const std::string& what) {
  for (size_t r0 = 0; r0 < want.size(); r0 += static_cast<size_t>(n)) {
    double m = 0;
    for (int64_t i = 0; i < n; ++i) m = std::max(m, std::fabs(static_cast<double>(want[r0 + static_cast<size_t>(i)])));
    for (int64_t i = 0; i < n; ++i) {
      const size_t k = r0 + static_cast<size_t>(i);
      ASSERT_TRUE(std::isfinite(got[k])) << what << " element " << k;
      ASSERT_LE(std::fabs(static_cast<double>(got[k]) - want[k]), m * std::ldexp(1.0, -9)) << what << " element " << k;
    }
  }
}

struct PrecisionCase {
  QType type;
  int64_t rows, cols, T;
};

class PrecisionModes : public ::testing::TestWithParam<PrecisionCase> {};

TEST_P(PrecisionModes, MatchTheReferencesAndStayNearF32) {
  const PrecisionCase c = GetParam();
  PrecisionModel mm(c.type, c.rows, c.cols, 3);
  const nl::TensorView& W = mm.w();
  const std::vector<float> X = random_vec(static_cast<size_t>(c.T * c.cols), 5);
  const std::vector<float> dY = random_vec(static_cast<size_t>(c.T * c.rows), 6);
  std::vector<float> Y32(static_cast<size_t>(c.T * c.rows)), dX32(static_cast<size_t>(c.T * c.cols));
  nl::reference_forward(W, X.data(), c.T, Y32.data());
  nl::reference_input_grad(W, dY.data(), c.T, dX32.data());
  const bool native_int8 = c.type == QType::Q4_0 || c.type == QType::Q8_0 || c.type == QType::Q5_0;

  for (Precision p : {Precision::F16, Precision::Int8}) {
    std::vector<float> Yref(Y32.size()), dXref(dX32.size());
    nl::engine::reference_forward_precision(W, X.data(), c.T, Yref.data(), p);
    nl::engine::reference_input_grad_precision(W, dY.data(), c.T, dXref.data(), p);
    const double bound =
        p == Precision::F16 ? kF16VsF32 : (native_int8 ? kInt8VsF32 : kInt8RequantizedVsF32);
    EXPECT_LE(rel_error(Yref, Y32), bound) << nl::precision_name(p) << " forward vs f32";
    EXPECT_LE(rel_error(dXref, dX32), bound) << nl::precision_name(p) << " input grad vs f32";
    EXPECT_GT(rel_error(Yref, Y32), 0.0) << "the mode must change something";

    // 3 threads as well: more tasks than threads or fewer, and with int8 more than one thread
    // stealing parts of the last tasks (cpu_engine.cpp, steal_int8_grad_work)
    for (const std::string& isa : isas()) {
      for (int threads : {2, 3}) {
        const std::string what =
            std::string(nl::precision_name(p)) + " " + isa + ", " + std::to_string(threads) + " threads";
        nl::EngineOptions o;
        o.threads = threads;
        o.isa = isa;
        auto e = nl::make_engine(mm.model, o);
        const nl::WeightHandle h = e->handle(0, nl::Proj::Q);
        std::vector<float> Y(Y32.size(), NAN), dX(dX32.size(), NAN);
        e->forward(h, X.data(), c.T, Y.data(), p);
        e->input_grad(h, dY.data(), c.T, dX.data(), p);
        if (p == Precision::Int8 || isa == "scalar") {
          EXPECT_EQ(Y, Yref) << what << " forward: must reproduce the reference bit for bit";
          EXPECT_EQ(dX, dXref) << what << " input grad: must reproduce the reference bit for bit";
        } else {
          expect_within_f16_rounding(Y, Yref, c.rows, what + " forward");
          expect_within_f16_rounding(dX, dXref, c.cols, what + " input grad");
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Types, PrecisionModes,
    ::testing::Values(PrecisionCase{QType::Q4_0, 72, 96, 70},   // 9 row groups, 2.25 row blocks, 2 token blocks
                      PrecisionCase{QType::Q8_0, 72, 96, 70},
                      PrecisionCase{QType::Q4_0, 13, 288, 5},   // partial row group, input grad over 2 column tasks
                      PrecisionCase{QType::Q8_0, 40, 64, 3},
                      // Q5_0: Q8_0 tiles of its quants (Signed5 panels)
                      PrecisionCase{QType::Q5_0, 72, 96, 70},
                      PrecisionCase{QType::Q5_0, 13, 288, 5},
                      // tall and wide enough that int8 input-gradient tasks take every token
                      // (int8_grad_tokens_per_task): 8 column tasks of one token block, where
                      // a smaller matrix would get 7 x 2 token blocks; a ragged last row block
                      PrecisionCase{QType::Q4_0, 1064, 1568, 6},
                      // one int8 input-gradient task (6 column blocks, one token block) over
                      // 256 row blocks: the second thread takes part of it (work stealing)
                      PrecisionCase{QType::Q8_0, 8192, 192, 3},
                      PrecisionCase{QType::F16, 45, 75, 9},     // ragged columns (not whole 32-blocks)
                      PrecisionCase{QType::F32, 33, 64, 6},
                      PrecisionCase{QType::Q4_K, 40, 256, 5},
                      // Q4_K input-gradient offsets over 3 slabs of rows and 3 super-blocks
                      PrecisionCase{QType::Q4_K, 300, 768, 9},
                      PrecisionCase{QType::Q5_K, 24, 512, 5},
                      // Q5_K's offsets over 3 slabs of rows and 3 super-blocks, as Q4_K's
                      PrecisionCase{QType::Q5_K, 300, 768, 9},
                      PrecisionCase{QType::Q6_K, 24, 256, 4}),
    [](const ::testing::TestParamInfo<PrecisionCase>& i) {
      return std::string(nl::qtype_info(i.param.type).name) + "_" + std::to_string(i.param.rows) + "x" +
             std::to_string(i.param.cols) + "_T" + std::to_string(i.param.T);
    });

// Q4_K's, Q5_K's, Q6_K's and Q5_0's int8 forward products take the weights as stored
// (kernels_int8.h: s (q - 8) or s (q - 16) plus the offsets, d sc (q - 32); Q5_0's Q8_0 tiles
// d (q - 16)), so against the dequantized weights
// times the quantized activations they differ by f32 rounding only; requantizing the weights
// to int8 would add ~1e-3.
class KQuantInt8 : public ::testing::TestWithParam<QType> {};
TEST_P(KQuantInt8, ForwardUsesTheStoredWeights) {
  const QType type = GetParam();
  const int64_t rows = 40, cols = 512, T = 7, nb = cols / 32;
  PrecisionModel mm(type, rows, cols, 12);
  const std::vector<float> X = random_vec(static_cast<size_t>(T * cols), 13);
  std::vector<float> Y(static_cast<size_t>(T * rows));
  nl::engine::reference_forward_precision(mm.w(), X.data(), T, Y.data(), Precision::Int8);
  std::vector<float> w(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) nl::dequantize_row(type, mm.w().row(r), w.data() + r * cols, cols);
  std::vector<int8_t> q(static_cast<size_t>(cols));
  std::vector<float> d(static_cast<size_t>(nb));
  std::vector<int32_t> sum(static_cast<size_t>(nb));
  double worst = 0;
  for (int64_t t = 0; t < T; ++t) {
    nl::engine::int8_kernels_scalar().quantize_row(X.data() + t * cols, cols, q.data(), d.data(), sum.data());
    for (int64_t r = 0; r < rows; ++r) {
      double want = 0, scale = 0;
      for (int64_t c = 0; c < cols; ++c) {
        const double x = static_cast<double>(q[static_cast<size_t>(c)]) * d[static_cast<size_t>(c / 32)];
        want += static_cast<double>(w[static_cast<size_t>(r * cols + c)]) * x;
        scale += std::fabs(static_cast<double>(w[static_cast<size_t>(r * cols + c)]) * x);
      }
      worst = std::max(worst, std::fabs(Y[static_cast<size_t>(t * rows + r)] - want) / scale);
    }
  }
  std::printf("[%s int8] worst |int8 - exact| / sum|w x| = %.2e\n", nl::qtype_info(type).name, worst);
  EXPECT_LT(worst, 1e-5);
}
INSTANTIATE_TEST_SUITE_P(Types, KQuantInt8, ::testing::Values(QType::Q4_K, QType::Q5_K, QType::Q6_K, QType::Q5_0),
                         [](const ::testing::TestParamInfo<QType>& i) { return std::string(nl::qtype_info(i.param).name); });

// Rows of 1e6 (f16 overflow: max 65504) and 1e-8 (below half of f16's smallest subnormal,
// 6e-8: zero) through the f16 mode: outputs finite and as close to f32 as any other row.
TEST(PrecisionF16, RangeGuardKeepsExtremeRowsFiniteAndAccurate) {
  const int64_t rows = 40, cols = 64, T = 6;
  PrecisionModel mm(QType::Q8_0, rows, cols, 8);
  std::vector<float> X = random_vec(static_cast<size_t>(T * cols), 9);
  std::vector<float> dY = random_vec(static_cast<size_t>(T * rows), 10);
  const float row_scale[T] = {1e6f, 1e-8f, 1.0f, 3e5f, 2e-8f, 1e-3f};
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t i = 0; i < cols; ++i) X[static_cast<size_t>(t * cols + i)] *= row_scale[t];
    for (int64_t i = 0; i < rows; ++i) dY[static_cast<size_t>(t * rows + i)] *= row_scale[t];
  }
  std::vector<float> Y32(static_cast<size_t>(T * rows)), dX32(static_cast<size_t>(T * cols));
  nl::reference_forward(mm.w(), X.data(), T, Y32.data());
  nl::reference_input_grad(mm.w(), dY.data(), T, dX32.data());
  for (const std::string& isa : isas()) {
    nl::EngineOptions o;
    o.isa = isa;
    auto e = nl::make_engine(mm.model, o);
    std::vector<float> Y(Y32.size()), dX(dX32.size());
    e->forward(0, X.data(), T, Y.data(), Precision::F16);
    e->input_grad(0, dY.data(), T, dX.data(), Precision::F16);
    for (const auto& [got, want, n, what] :
         {std::tuple{&Y, &Y32, rows, "forward"}, std::tuple{&dX, &dX32, cols, "input grad"}})
      for (int64_t t = 0; t < T; ++t) {
        const std::vector<float> g(got->begin() + t * n, got->begin() + (t + 1) * n);
        const std::vector<float> w(want->begin() + t * n, want->begin() + (t + 1) * n);
        for (float v : g) ASSERT_TRUE(std::isfinite(v)) << isa << " " << what << " row " << t;
        EXPECT_LE(rel_error(g, w), kF16VsF32) << isa << " " << what << " row " << t << " (scale " << row_scale[t] << ")";
      }
  }
}

TEST(PrecisionInt8, ScaleInvariantOnExtremeRows) {
  const int64_t rows = 32, cols = 64, T = 4;
  PrecisionModel mm(QType::Q4_0, rows, cols, 11);
  std::vector<float> X = random_vec(static_cast<size_t>(T * cols), 12);
  const float row_scale[T] = {1e6f, 1e-8f, 1.0f, 1e-30f};
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < cols; ++i) X[static_cast<size_t>(t * cols + i)] *= row_scale[t];
  std::vector<float> Y32(static_cast<size_t>(T * rows)), Y(Y32.size());
  nl::reference_forward(mm.w(), X.data(), T, Y32.data());
  auto e = nl::make_engine(mm.model, nl::EngineOptions{});
  e->forward(0, X.data(), T, Y.data(), Precision::Int8);
  for (int64_t t = 0; t < T; ++t) {
    const std::vector<float> g(Y.begin() + t * rows, Y.begin() + (t + 1) * rows);
    const std::vector<float> w(Y32.begin() + t * rows, Y32.begin() + (t + 1) * rows);
    EXPECT_LE(rel_error(g, w), kInt8VsF32) << "row " << t;
  }
}

// The engine offers int8 as cheaper than f32 for Q4_0, Q8_0, Q5_0, Q4_K, Q5_K and Q6_K weights
// (whose quants it uses as stored) and F16 ones (its Q8_0 copy) on every CPU, but for Q8_0
// (F16) not on an arm64 one without the dot-product extension, where the widening int8 kernels
// execute more instructions than the f32 ones (the arm64 tests run under qemu both ways:
// -cpu max and -cpu cortex-a53).
TEST(PrecisionInt8, OfferedForStoredQuantsExceptSignedOnArm64WithoutDotprod) {
  bool dotprod = true;
#if defined(__aarch64__)
  dotprod = (getauxval(AT_HWCAP) & (1ul << 20)) != 0;  // HWCAP_ASIMDDP
#endif
  for (const QType type : {QType::Q4_0, QType::Q8_0, QType::Q5_0, QType::Q4_K, QType::Q5_K, QType::Q6_K, QType::F16}) {
    PrecisionModel mm(type, 32, 256, 13);
    // Q8_0 and F16 (int8 on its Q8_0 copy) not with the widening set; Q5_K and Q5_0 (Signed5
    // panels) everywhere.
    const bool cheaper = (type != QType::Q8_0 && type != QType::F16) || dotprod;
    auto e = nl::make_engine(mm.model, nl::EngineOptions{});
    EXPECT_EQ(e->cheaper_modes(e->handle(0, nl::Proj::Q)),
              cheaper ? std::vector<Precision>{Precision::Int8} : std::vector<Precision>{})
        << nl::qtype_info(type).name << ", isa " << e->isa();
  }
}

TEST(Precision, NamesRoundTripAndBadNamesSayWhatIsAccepted) {
  for (Precision p : {Precision::F32, Precision::F16, Precision::Int8})
    EXPECT_EQ(nl::parse_precision(nl::precision_name(p)), p);
  try {
    nl::parse_precision("fp8");
    FAIL() << "expected nl::Error";
  } catch (const nl::Error& err) {
    const std::string msg = err.what();
    EXPECT_NE(msg.find("fp8"), std::string::npos) << msg;
    EXPECT_NE(msg.find("f32, f16 or int8"), std::string::npos) << msg;
  }
}

}  // namespace
