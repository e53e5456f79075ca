// The frozen engine's cpu backend (F32, F16, Q8_0, Q4_0, Q4_K, Q6_K) against a naive
// dense reference (a test-only fully dequantized copy of W, products in double), the
// scalar reference functions, independence of the thread count and of how tokens are split,
// asynchronous submission, and its memory rules: resident weight bytes equal the quantized
// size, and no allocation the size of a dequantized matrix.
#include <atomic>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "nightlora/engine/frozen_engine.h"
#include "nightlora/engine/reference_products.h"
#include "nightlora/tokenizer/tokenizer.h"
#include "nightlora/quant/qtype.h"
#include "nightlora/util/error.h"
#include "alloc_probe.h"
#include "test_util.h"

namespace {

using nl::QType;

// A one-layer model whose projections are given matrices (rows x cols), for the engine.
struct MatrixModel {
  nl::Model model;
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<std::vector<float>> dense;  // what the quantized rows dequantize to

  MatrixModel(QType type, const std::vector<std::pair<int64_t, int64_t>>& shapes, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    model.config.n_layer = 1;
    model.weights.layers.resize(1);
    nl::LayerWeights& L = model.weights.layers[0];
    nl::TensorView* slots[8] = {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down, &model.weights.output};
    bytes.resize(8);
    dense.resize(8);
    for (int i = 0; i < 8; ++i) {
      auto [rows, cols] = shapes[static_cast<size_t>(i) % shapes.size()];
      const size_t rb = nl::qtype_row_bytes(type, cols);
      bytes[static_cast<size_t>(i)].resize(rb * static_cast<size_t>(rows));
      dense[static_cast<size_t>(i)].resize(static_cast<size_t>(rows * cols));
      std::vector<float> row(static_cast<size_t>(cols));
      for (int64_t r = 0; r < rows; ++r) {
        for (auto& v : row) v = nd(rng) * 0.5f;
        uint8_t* dst = bytes[static_cast<size_t>(i)].data() + rb * static_cast<size_t>(r);
        nl::quantize_row(type, row.data(), dst, cols);
        nl::dequantize_row(type, dst, dense[static_cast<size_t>(i)].data() + r * cols, cols);
      }
      nl::TensorView& v = *slots[i];
      v.name = "m" + std::to_string(i);
      v.type = type;
      v.ne = {cols, rows};
      v.data = bytes[static_cast<size_t>(i)].data();
      v.nbytes = bytes[static_cast<size_t>(i)].size();
    }
  }
};

using nltest::random_vec;

// max |a-b| / max(1, max|b|)
double rel_max_err(const std::vector<float>& a, const std::vector<double>& b) {
  double m = 1, e = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    m = std::max(m, std::fabs(b[i]));
    e = std::max(e, std::fabs(a[i] - b[i]));
  }
  return e / m;
}

struct Case {
  QType type;
  int64_t rows, cols, T;
};

// The instruction sets this machine can run: "scalar" always, "avx2" where available.
std::vector<std::string> available_isas() {
  std::vector<std::string> isas = {"scalar"};
  MatrixModel mm(QType::Q8_0, {{8, 32}}, 1);
  try {
    nl::EngineOptions o;
    o.threads = 1;
    o.isa = "avx2";
    nl::make_engine(mm.model, o);
    isas.push_back("avx2");
  } catch (const nl::Error&) {
    std::printf("[engine] no AVX2+FMA+F16C here: SIMD kernels not tested\n");
  }
  return isas;
}

std::unique_ptr<nl::FrozenEngine> engine_for(const nl::Model& m, int threads, const std::string& isa) {
  nl::EngineOptions o;
  o.threads = threads;
  o.isa = isa;
  return nl::make_engine(m, o);
}

// The scalar kernels reproduce the scalar reference bit for bit; the SIMD ones (fused
// multiply-adds, another summation order) agree to float rounding of the sums:
// |got - ref| <= 2e-6 * max(1, max |ref|).
void expect_matches_reference(const std::vector<float>& got, const std::vector<float>& ref, const std::string& isa,
                              const std::string& what) {
  ASSERT_EQ(got.size(), ref.size());
  if (isa == "scalar") {
    EXPECT_EQ(got, ref) << what << ": the scalar kernels must reproduce the scalar reference bit for bit";
    return;
  }
  double m = 1, e = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    m = std::max(m, std::fabs(static_cast<double>(ref[i])));
    e = std::max(e, std::fabs(static_cast<double>(got[i]) - ref[i]));
    ASSERT_TRUE(std::isfinite(got[i])) << what << " element " << i;
  }
  EXPECT_LE(e / m, 2e-6) << what << " (" << isa << ") vs the scalar reference";
}

class EngineProducts : public ::testing::TestWithParam<Case> {};

TEST_P(EngineProducts, MatchDenseReferenceAndScalarReference) {
  const Case c = GetParam();
  MatrixModel mm(c.type, {{c.rows, c.cols}, {32, c.cols}}, 7);
  const std::vector<float>& W = mm.dense[0];
  std::vector<float> X = random_vec(static_cast<size_t>(c.T * c.cols), 11);
  std::vector<float> dY = random_vec(static_cast<size_t>(c.T * c.rows), 13);

  // Dense double-precision products and the scalar reference functions.
  std::vector<double> Yd(static_cast<size_t>(c.T * c.rows)), dXd(static_cast<size_t>(c.T * c.cols), 0.0);
  for (int64_t t = 0; t < c.T; ++t)
    for (int64_t r = 0; r < c.rows; ++r) {
      double s = 0;
      for (int64_t k = 0; k < c.cols; ++k) {
        s += static_cast<double>(X[t * c.cols + k]) * W[r * c.cols + k];
        dXd[static_cast<size_t>(t * c.cols + k)] += static_cast<double>(dY[t * c.rows + r]) * W[r * c.cols + k];
      }
      Yd[static_cast<size_t>(t * c.rows + r)] = s;
    }
  std::vector<float> Yref(Yd.size()), dXref(dXd.size());
  nl::reference_forward(mm.model.weights.layers[0].wq, X.data(), c.T, Yref.data());
  nl::reference_input_grad(mm.model.weights.layers[0].wq, dY.data(), c.T, dXref.data());

  for (const std::string& isa : available_isas()) {
    SCOPED_TRACE("isa " + isa);
    auto engine = engine_for(mm.model, 3, isa);
    ASSERT_EQ(engine->isa().substr(0, engine->isa().find(",")), isa) << engine->isa();  // "avx2, int8 SET"
    const nl::WeightHandle h = engine->handle(0, nl::Proj::Q);
    ASSERT_EQ(engine->rows(h), c.rows);
    ASSERT_EQ(engine->cols(h), c.cols);

    std::vector<float> Y(Yd.size(), NAN);
    engine->forward(h, X.data(), c.T, Y.data());
    EXPECT_LT(rel_max_err(Y, Yd), 1e-5);
    expect_matches_reference(Y, Yref, isa, "forward");

    std::vector<float> dX(dXd.size(), NAN);
    engine->input_grad(h, dY.data(), c.T, dX.data());
    EXPECT_LT(rel_max_err(dX, dXd), 1e-5);
    expect_matches_reference(dX, dXref, isa, "input grad");
  }
}

INSTANTIATE_TEST_SUITE_P(
    Types, EngineProducts,
    ::testing::Values(Case{QType::F32, 5, 32, 1}, Case{QType::F32, 40, 96, 70}, Case{QType::F16, 17, 64, 3},
                      Case{QType::F16, 33, 288, 131}, Case{QType::Q8_0, 5, 32, 1}, Case{QType::Q8_0, 17, 64, 3},
                      Case{QType::Q8_0, 40, 96, 70}, Case{QType::Q8_0, 33, 544, 131}, Case{QType::Q4_0, 5, 32, 1},
                      Case{QType::Q4_0, 17, 64, 3}, Case{QType::Q4_0, 40, 96, 70}, Case{QType::Q4_0, 33, 544, 131},
                      Case{QType::Q4_K, 9, 512, 37}, Case{QType::Q6_K, 9, 768, 70},
                      // Token counts of the kernel blocking (1, 7, 64, 300) on shapes that are not
                      // multiples of the 8-row tiles, the 4-row / 3-token register blocks or
                      // (f32, f16) of the 8-lane vectors.
                      Case{QType::Q4_0, 45, 160, 7}, Case{QType::Q4_0, 29, 288, 64}, Case{QType::Q4_0, 21, 96, 300},
                      Case{QType::Q8_0, 45, 160, 7}, Case{QType::Q8_0, 29, 288, 64}, Case{QType::Q8_0, 21, 96, 300},
                      Case{QType::F32, 13, 77, 7}, Case{QType::F32, 11, 45, 300}, Case{QType::F16, 19, 83, 64},
                      Case{QType::Q4_K, 11, 256, 300}),
    [](const ::testing::TestParamInfo<Case>& i) {
      return std::string(nl::qtype_name(i.param.type)) + "_" + std::to_string(i.param.rows) + "x" +
             std::to_string(i.param.cols) + "_T" + std::to_string(i.param.T);
    });

TEST(Engine, ResultsDoNotDependOnThreadCount) {
  MatrixModel mm(QType::Q4_0, {{70, 320}}, 3);
  auto e1 = nl::make_engine(mm.model, {"cpu", 1});
  auto e4 = nl::make_engine(mm.model, {"cpu", 4});
  const int64_t T = 150;
  std::vector<float> X = random_vec(static_cast<size_t>(T * 320), 5), dY = random_vec(static_cast<size_t>(T * 70), 6);
  std::vector<float> y1(static_cast<size_t>(T * 70)), y4(y1.size()), d1(X.size()), d4(X.size());
  e1->forward(e1->handle(0, nl::Proj::Up), X.data(), T, y1.data());
  e4->forward(e4->handle(0, nl::Proj::Up), X.data(), T, y4.data());
  e1->input_grad(e1->handle(0, nl::Proj::Up), dY.data(), T, d1.data());
  e4->input_grad(e4->handle(0, nl::Proj::Up), dY.data(), T, d4.data());
  EXPECT_EQ(y1, y4);
  EXPECT_EQ(d1, d4);
}

// A token's outputs are the same bits whether it is computed with 150 others or in small
// groups (the training step splits the output head's rows into loss chunks, and a step must
// not depend on the chunk size): every ISA, every mode, shapes with several column chunks
// and a row count that is not a multiple of the 24-row forward tasks.
TEST(Engine, ResultsDoNotDependOnHowTokensAreSplit) {
  for (const QType type : {QType::Q4_0, QType::F32}) {
    MatrixModel mm(type, {{70, 544}}, 4);
    const int64_t rows = 70, cols = 544, T = 150;
    const std::vector<float> X = random_vec(static_cast<size_t>(T * cols), 8);
    const std::vector<float> dY = random_vec(static_cast<size_t>(T * rows), 9);
    for (const std::string& isa : available_isas())
      for (const nl::Precision p : {nl::Precision::F32, nl::Precision::F16, nl::Precision::Int8}) {
        SCOPED_TRACE(std::string(nl::qtype_name(type)) + " isa " + isa + " precision " + nl::precision_name(p));
        auto e = engine_for(mm.model, 2, isa);
        const nl::WeightHandle h = e->handle(0, nl::Proj::Q);
        std::vector<float> y_all(static_cast<size_t>(T * rows)), y_split(y_all.size());
        std::vector<float> d_all(static_cast<size_t>(T * cols)), d_split(d_all.size());
        e->forward(h, X.data(), T, y_all.data(), p);
        e->input_grad(h, dY.data(), T, d_all.data(), p);
        for (int64_t t0 = 0, n = 1; t0 < T; t0 += n, n = n % 7 + 1) {  // groups of 1, 2, ..., 7 tokens
          const int64_t nt = std::min(n, T - t0);
          e->forward(h, X.data() + t0 * cols, nt, y_split.data() + t0 * rows, p);
          e->input_grad(h, dY.data() + t0 * rows, nt, d_split.data() + t0 * cols, p);
        }
        EXPECT_EQ(y_split, y_all);
        EXPECT_EQ(d_split, d_all);
      }
  }
}

TEST(Engine, AsynchronousSubmissionsAllComplete) {
  MatrixModel mm(QType::Q8_0, {{48, 64}, {64, 96}}, 9);
  auto e = nl::make_engine(mm.model, {"cpu", 2});
  const int64_t T = 33;
  // Eight products in flight at once, waited on in reverse order of submission.
  std::vector<std::vector<float>> ins, outs, refs;
  std::vector<nl::EngineTicket> tickets;
  for (int i = 0; i < 8; ++i) {
    const nl::Proj p = static_cast<nl::Proj>(i % 7);
    const nl::WeightHandle h = i == 7 ? e->output_handle() : e->handle(0, p);
    const bool fwd = i % 2 == 0;
    const int64_t n_in = fwd ? e->cols(h) : e->rows(h), n_out = fwd ? e->rows(h) : e->cols(h);
    ins.push_back(random_vec(static_cast<size_t>(T * n_in), 100 + static_cast<uint32_t>(i)));
    outs.emplace_back(static_cast<size_t>(T * n_out), NAN);
    refs.emplace_back(static_cast<size_t>(T * n_out));
    const nl::TensorView& W = i == 7 ? mm.model.weights.output : mm.model.weights.layers[0].proj(p);
    if (fwd) {
      tickets.push_back(e->submit_forward(h, ins.back().data(), T, outs.back().data()));
      nl::reference_forward(W, ins.back().data(), T, refs.back().data());
    } else {
      tickets.push_back(e->submit_input_grad(h, ins.back().data(), T, outs.back().data()));
      nl::reference_input_grad(W, ins.back().data(), T, refs.back().data());
    }
  }
  for (int i = 7; i >= 0; --i) e->wait(tickets[static_cast<size_t>(i)]);
  for (int i = 0; i < 8; ++i)
    expect_matches_reference(outs[static_cast<size_t>(i)], refs[static_cast<size_t>(i)], e->isa(),
                             "product " + std::to_string(i));
}

// The training step's timing monitor waits for every product from its own thread while the
// submitting thread waits for some of them: a submitter that waits runs its queued products
// itself, any other waiter only sleeps until they are done (by the dispatcher or the
// submitter). Every product completes, in order, with the reference's results; also with
// EngineOptions::waiter_runs_products, where the dispatcher runs only what another thread
// waits for.
TEST(Engine, ProductsCompleteWhenAnotherThreadWaitsForThem) {
  for (const bool waiter_runs : {false, true}) {
    SCOPED_TRACE(waiter_runs ? "waiter_runs_products" : "default");
    MatrixModel mm(QType::Q4_0, {{48, 64}, {64, 96}}, 11);
    nl::EngineOptions eo{"cpu", 2};
    eo.waiter_runs_products = waiter_runs;
    auto e = nl::make_engine(mm.model, eo);
    const nl::WeightHandle h = e->handle(0, nl::Proj::Q);
    const nl::TensorView& W = mm.model.weights.layers[0].proj(nl::Proj::Q);
    const int64_t T = 9, rounds = 40;
    std::vector<std::vector<float>> ins, outs(static_cast<size_t>(rounds));
    std::vector<nl::EngineTicket> tickets(static_cast<size_t>(rounds));
    for (int64_t i = 0; i < rounds; ++i) {
      ins.push_back(random_vec(static_cast<size_t>(T * e->cols(h)), 200 + static_cast<uint32_t>(i)));
      outs[static_cast<size_t>(i)].assign(static_cast<size_t>(T * e->rows(h)), NAN);
    }
    std::atomic<int64_t> submitted{0}, seen{0};
    std::thread monitor([&] {
      for (int64_t i = 0; i < rounds; ++i) {
        while (submitted.load() <= i) std::this_thread::yield();
        e->wait(tickets[static_cast<size_t>(i)]);
        seen = i + 1;
      }
    });
    for (int64_t i = 0; i < rounds; ++i) {
      const size_t k = static_cast<size_t>(i);
      tickets[k] = e->submit_forward(h, ins[k].data(), T, outs[k].data());
      submitted = i + 1;
      if (i % 3 == 2) e->wait(tickets[k]);  // sometimes the submitter waits too
    }
    monitor.join();
    EXPECT_EQ(seen.load(), rounds);
    std::vector<float> ref(static_cast<size_t>(T * e->rows(h)));
    for (int64_t i = 0; i < rounds; ++i) {
      nl::reference_forward(W, ins[static_cast<size_t>(i)].data(), T, ref.data());
      expect_matches_reference(outs[static_cast<size_t>(i)], ref, e->isa(), "product " + std::to_string(i));
    }
  }
}

// (Q5_0's: its Q8_0 tiles, 34 bytes per 32 weights where the file has 22.)
TEST(Engine, ResidentBytesAreTheQuantizedSize) {
  for (QType t : {QType::F32, QType::F16, QType::Q8_0, QType::Q4_0, QType::Q5_0}) {
    MatrixModel mm(t, {{64, 128}, {96, 64}, {32, 96}}, 1);
    size_t quantized = 0;
    for (const auto& b : mm.bytes) quantized += b.size();
    if (t == QType::Q5_0) quantized = quantized / 22 * 34;
    auto e = nl::make_engine(mm.model, {"cpu", 2});
    EXPECT_EQ(e->resident_weight_bytes(), quantized) << nl::qtype_name(t);
    // Metadata: handles, shapes and names of 8 matrices; far below one dequantized matrix.
    EXPECT_GE(e->resident_bytes(), quantized);
    EXPECT_LT(e->resident_bytes() - quantized, 4096u) << nl::qtype_name(t);
  }
}

TEST(Engine, NeverAllocatesADequantizedMatrix) {
  const int64_t rows = 256, cols = 1024, T = 40;
  MatrixModel mm(QType::Q4_0, {{rows, cols}}, 2);
  auto e = nl::make_engine(mm.model, {"cpu", 3});
  std::vector<float> X = random_vec(static_cast<size_t>(T * cols), 1), Y(static_cast<size_t>(T * rows));
  std::vector<float> dX(X.size());
  size_t peak = 0;
  {
    nltest::AllocProbe probe;
    for (int rep = 0; rep < 2; ++rep) {
      e->forward(e->handle(0, nl::Proj::Q), X.data(), T, Y.data());
      e->input_grad(e->handle(0, nl::Proj::Q), Y.data(), T, dX.data());
    }
    peak = probe.peak();
  }
  const size_t dequantized_matrix = static_cast<size_t>(rows * cols) * sizeof(float);
  EXPECT_LT(peak, dequantized_matrix / 16) << "largest allocation during the products: " << peak << " bytes";
}

TEST(Engine, ClearErrors) {
  MatrixModel mm(QType::F32, {{32, 32}}, 1);
  EXPECT_THROW(nl::make_engine(mm.model, {"npu-that-does-not-exist", 1}), nl::Error);
  mm.model.weights.layers[0].wk.data = nullptr;
  try {
    nl::make_engine(mm.model, {"cpu", 1});
    FAIL() << "a missing weight must be an error";
  } catch (const nl::Error& err) {
    EXPECT_NE(std::string(err.what()).find("missing"), std::string::npos) << err.what();
  }
}

}  // namespace
