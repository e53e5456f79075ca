// The precision plan: JSON round trip and hostile plan files (clear errors, never a crash),
// the printed table, and calibration on a tiny model: a zero tolerance keeps every product
// that changes the gradients in f32, a huge one takes the cheapest mode everywhere, and the
// replayed passes measure exactly what full passes measure.
#include <gtest/gtest.h>

#include <algorithm>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "../../src/engine/kernels_int8.h"
#include "nightlora/engine/frozen_engine.h"
#include "nightlora/host/precision_plan.h"
#include "nightlora/host/train_step.h"
#include "nightlora/quant/qtype.h"
#include "nightlora/util/error.h"
#include "tiny_model.h"

namespace {

using nl::FrozenProduct;
using nl::Precision;
using nl::PrecisionPlan;
using nl::Proj;
using json = nlohmann::json;

PrecisionPlan mixed_plan(int64_t n_layer) {
  PrecisionPlan p = PrecisionPlan::uniform(n_layer, Precision::F32);
  p.origin = "auto";
  p.set(0, Proj::Q, FrozenProduct::Forward, Precision::Int8);
  p.set(0, Proj::Down, FrozenProduct::InputGrad, Precision::F16);
  p.set(n_layer - 1, Proj::Gate, FrozenProduct::Recompute, Precision::Int8);
  p.head_input_grad = Precision::F16;
  p.calibration = {{"tol", 0.02}, {"passes", 7}};
  return p;
}

TEST(PrecisionPlan, JsonRoundTripKeepsEveryMode) {
  const PrecisionPlan p = mixed_plan(3);
  const std::string text = p.to_json().dump();
  const PrecisionPlan q = PrecisionPlan::parse(text, 3, "plan.json");
  EXPECT_EQ(q.n_layer, 3);
  EXPECT_EQ(q.modes, p.modes);
  EXPECT_EQ(q.head_forward, Precision::F32);
  EXPECT_EQ(q.head_input_grad, Precision::F16);
  EXPECT_EQ(q.origin, "auto");
  EXPECT_EQ(q.calibration, p.calibration);
  EXPECT_EQ(q.at(0, Proj::Q, FrozenProduct::Forward), Precision::Int8);
  EXPECT_EQ(q.at(0, Proj::Q, FrozenProduct::Recompute), Precision::F32);
  EXPECT_EQ(q.count(Precision::Int8), 2);
  EXPECT_EQ(q.count(Precision::F16), 2);
  EXPECT_EQ(q.count(Precision::F32), 3 * 7 * 3 + 2 - 4);
  EXPECT_EQ(q.to_json(), p.to_json());
}

TEST(PrecisionPlan, TableHasALinePerLayerAndTheTotals) {
  const std::string t = mixed_plan(2).table();
  // Layer 0: q forward int8, the rest of q f32; down's input grad f16.
  EXPECT_NE(t.find("    0 IFF   FFF   FFF   FFF   FFF   FFF   FFH\n"), std::string::npos) << t;
  EXPECT_NE(t.find("    1 FFF   FFF   FFF   FFF   FIF   FFF   FFF\n"), std::string::npos) << t;
  EXPECT_NE(t.find("layer q     k     v     o     gate  up    down\n"), std::string::npos) << t;
  EXPECT_NE(t.find("head forward f32, input-grad f16"), std::string::npos) << t;
  EXPECT_NE(t.find("totals: 2 int8, 2 f16, 40 f32 (of 44 products)"), std::string::npos) << t;
}

// Each hostile edit of a valid plan must fail with nl::Error whose message contains `expect`.
TEST(PrecisionPlan, HostilePlanFilesGiveClearErrors) {
  const json good = mixed_plan(2).to_json();
  struct Case {
    const char* name;
    std::function<void(json&)> edit;
    const char* expect;
  };
  const std::vector<Case> cases = {
      {"unknown mode", [](json& j) { j["layers"][1]["k"][2] = "int4"; }, "unknown precision mode \"int4\""},
      {"mode not a string", [](json& j) { j["layers"][0]["q"][0] = 8; }, "must be a string"},
      {"two modes", [](json& j) { j["layers"][0]["v"] = {"f32", "f32"}; }, "must list 3 modes"},
      {"missing projection", [](json& j) { j["layers"][0].erase("up"); }, "\"up\" is missing"},
      {"unknown projection", [](json& j) { j["layers"][0]["qq"] = {"f32", "f32", "f32"}; }, "unknown projection \"qq\""},
      {"layer count", [](json& j) { j["n_layer"] = 3; }, "the plan is for 3 layers, the model has 2"},
      {"layers array short", [](json& j) { j["layers"].erase(1); }, "array of 2 layers"},
      {"negative layers", [](json& j) { j["n_layer"] = -1; }, "non-negative integer"},
      {"layer not an object", [](json& j) { j["layers"][1] = 5; }, "must be an object"},
      {"head missing", [](json& j) { j.erase("head"); }, "\"head\" must be an object"},
      {"head mode", [](json& j) { j["head"]["forward"] = "bf16"; }, "unknown precision mode \"bf16\""},
      {"format", [](json& j) { j["format"] = "something-else"; }, "not a precision plan"},
      {"version", [](json& j) { j["version"] = 2; }, "version 2 is not supported"},
      {"not an object", [](json& j) { j = json::array({1, 2}); }, "must be a JSON object"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    json j = good;
    c.edit(j);
    try {
      PrecisionPlan::from_json(j, 2, "bad_plan.json");
      ADD_FAILURE() << "accepted";
    } catch (const nl::Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(c.expect), std::string::npos) << msg;
      EXPECT_NE(msg.find("bad_plan.json"), std::string::npos) << msg;
    }
  }
  for (const char* text : {"", "{", "not json", "\x01\x02\xff", "{\"format\": \"nightlora-precision-plan\""}) {
    SCOPED_TRACE(text);
    EXPECT_THROW(PrecisionPlan::parse(text, 2, "bad_plan.json"), nl::Error);
  }
  // Without an expected layer count (a checkpoint's own plan), the file's count is taken.
  EXPECT_EQ(PrecisionPlan::from_json(good, -1, "plan.json").n_layer, 2);
}

TEST(PrecisionPlan, TrainStepRejectsAPlanForAnotherLayerCount) {
  nltest::TinyModel tm = nltest::make_tiny_model("llama");
  auto engine = nl::make_engine(*tm.model, {"cpu", 2});
  const PrecisionPlan p = PrecisionPlan::uniform(3, Precision::F16);
  nl::StepOptions so;
  so.threads = 2;
  so.precision = &p;
  EXPECT_THROW(nl::TrainStep(*tm.model, *engine, so), nl::Error);
}

// Q4_0: the type the cpu engine offers int8 for with every int8 set (Q8_0 not with NEON's
// widening one: int8_beats_f32_on_stored_quants).
struct Calib {
  nltest::TinyModel tm = nltest::make_tiny_model("qwen2", nl::QType::Q4_0, 4);
  std::unique_ptr<nl::FrozenEngine> engine = nl::make_engine(*tm.model, {"cpu", 2});
  nl::Batch batch = nltest::make_batch({12, 9}, tm.model->config.vocab, 2, 11);
  nl::LoraAdapter adapter;
  Calib() {
    nl::LoraConfig lc;
    lc.rank = 4;
    adapter = nltest::random_adapter(tm.model->config, lc, 5);
  }
  // The tests of the per-product measurements use that search; the group search has its own.
  nl::CalibrationResult run(double tol, size_t replay_bytes = size_t{64} << 20,
                            nl::CalibrationSearch search = nl::CalibrationSearch::EachProduct) {
    nl::CalibrationOptions o;
    o.tol = tol;
    o.search = search;
    o.threads = 2;
    o.replay_bytes = replay_bytes;
    return nl::calibrate_precision(*tm.model, *engine, batch, adapter, o);
  }
};

TEST(PrecisionCalibration, ZeroToleranceKeepsF32WhereverAModeChangesTheGradients) {
  Calib c;
  const nl::CalibrationResult r = c.run(0.0);
  const int64_t slots = 2 * 7 * 3 + 2;
  // Every product is tried in int8, the cpu engine's one cheaper mode (its f16 mode costs
  // more than f32, so it is never tried).
  int64_t changed = 0;
  for (const nl::ProductSensitivity& s : r.measured) {
    ASSERT_TRUE(std::isfinite(s.rel_err));
    if (s.accepted) {
      EXPECT_EQ(s.rel_err, 0.0);  // tol 0: only a product with no effect at all may be cheaper
    } else {
      EXPECT_GT(s.rel_err, 0.0);
      ++changed;
    }
  }
  EXPECT_EQ(r.passes, 2 + static_cast<int64_t>(r.measured.size()));
  EXPECT_GE(static_cast<int64_t>(r.measured.size()), slots - r.not_run);
  // Every forward and input-gradient product feeds the adapter gradients, so all stay f32 ...
  // except the input gradients of layer 0's q, k, v: their dX only reaches the (frozen)
  // embedding, so any mode leaves the adapter gradients exactly as they were.
  for (int64_t l = 0; l < 2; ++l)
    for (int p = 0; p < 7; ++p)
      for (FrozenProduct k : {FrozenProduct::Forward, FrozenProduct::InputGrad}) {
        const bool free = l == 0 && p <= static_cast<int>(Proj::V) && k == FrozenProduct::InputGrad;
        EXPECT_EQ(r.plan.at(l, static_cast<Proj>(p), k), free ? Precision::Int8 : Precision::F32)
            << "layer " << l << " " << nl::proj_name(static_cast<Proj>(p)) << " " << nl::frozen_product_name(k);
      }
  EXPECT_EQ(r.plan.head_forward, Precision::F32);
  EXPECT_EQ(r.plan.head_input_grad, Precision::F32);
  EXPECT_GE(changed, 2 * 7 * 2 + 2 - 3);  // int8 rejected for each of those
  for (const nl::ProductSensitivity& s : r.measured) EXPECT_EQ(s.mode, Precision::Int8);
  EXPECT_EQ(r.plan.calibration["modes_tried"], json::array({"int8"}));
  EXPECT_EQ(r.plan.origin, "auto");
  EXPECT_EQ(r.plan.calibration["measured"].size(), r.measured.size());
  EXPECT_EQ(r.plan.calibration["passes"], r.passes);
}

// Which matrices have a mode cheaper than f32 on the cpu engine: int8 on the tiles it packs
// (Q4_0's quants as stored; F16's Q8_0 copy, so Q8_0's rule) with every int8 set but NEON's
// widening one on Q8_0; elsewhere f32 stays the cheapest.
TEST(PrecisionCalibration, CheaperModesFollowTheInt8KernelSet) {
  for (const nl::QType type : {nl::QType::Q4_0, nl::QType::F16}) {
    nltest::TinyModel tm = nltest::make_tiny_model("qwen2", type, 2);
    for (const char* isa : {"auto", "scalar"}) {
      SCOPED_TRACE(std::string(nl::qtype_info(type).name) + ", isa " + isa);
      auto engine = nl::make_engine(*tm.model, {"cpu", 2, isa});
      const nl::engine::Int8Kernels& k = nl::engine::int8_kernels_for(engine->isa());
      const bool int8 = nl::engine::int8_beats_f32_on_stored_quants(k, type == nl::QType::F16 ? nl::QType::Q8_0 : type);
      for (int64_t l = 0; l < tm.model->config.n_layer; ++l)
        EXPECT_EQ(engine->cheaper_modes(engine->handle(l, Proj::Q)),
                  int8 ? std::vector<Precision>{Precision::Int8} : std::vector<Precision>{});
    }
  }
}

// An engine whose modes are never cheaper than f32 (as the cpu engine's on Q8_0 weights
// with the NEON widening set), the products of a real one.
class NoCheaperModes final : public nl::FrozenEngine {
 public:
  explicit NoCheaperModes(std::unique_ptr<nl::FrozenEngine> e) : e_(std::move(e)) {}
  std::string backend() const override { return e_->backend(); }
  int threads() const override { return e_->threads(); }
  std::vector<Precision> cheaper_modes(nl::WeightHandle) const override { return {}; }
  nl::WeightHandle handle(int64_t layer, Proj p) const override { return e_->handle(layer, p); }
  nl::WeightHandle output_handle() const override { return e_->output_handle(); }
  int64_t rows(nl::WeightHandle h) const override { return e_->rows(h); }
  int64_t cols(nl::WeightHandle h) const override { return e_->cols(h); }
  nl::EngineTicket submit_forward(nl::WeightHandle h, const float* X, int64_t T, float* Y, Precision p) override {
    return e_->submit_forward(h, X, T, Y, p);
  }
  nl::EngineTicket submit_input_grad(nl::WeightHandle h, const float* dY, int64_t T, float* dX, Precision p) override {
    return e_->submit_input_grad(h, dY, T, dX, p);
  }
  void wait(nl::EngineTicket t) override { e_->wait(t); }
  size_t resident_bytes() const override { return e_->resident_bytes(); }
  size_t resident_weight_bytes() const override { return e_->resident_weight_bytes(); }

 private:
  std::unique_ptr<nl::FrozenEngine> e_;
};

// Calibrating where no mode is cheaper tries nothing and keeps f32.
TEST(PrecisionCalibration, AutoTriesNothingWhereNoModeIsCheaper) {
  nltest::TinyModel tm = nltest::make_tiny_model("qwen2", nl::QType::Q8_0, 4);
  NoCheaperModes e(nl::make_engine(*tm.model, {"cpu", 2, "scalar"}));
  nl::FrozenEngine* engine = &e;
  const nl::Batch batch = nltest::make_batch({12, 9}, tm.model->config.vocab, 2, 11);
  nl::LoraConfig lc;
  lc.rank = 4;
  const nl::LoraAdapter adapter = nltest::random_adapter(tm.model->config, lc, 5);
  nl::CalibrationOptions o;
  o.tol = 1e9;  // any mode tried would be accepted
  o.threads = 2;
  const nl::CalibrationResult r = nl::calibrate_precision(*tm.model, *engine, batch, adapter, o);
  EXPECT_TRUE(r.measured.empty());
  EXPECT_EQ(r.passes, 2);  // the f32 reference, twice
  EXPECT_TRUE(r.plan.all(Precision::F32)) << r.plan.table();
  EXPECT_EQ(r.plan.calibration["modes_tried"], json::array());
}

TEST(PrecisionCalibration, HugeToleranceTakesTheCheapestModeEverywhere) {
  Calib c;
  const nl::CalibrationResult r = c.run(1e9);
  EXPECT_TRUE(r.plan.all(Precision::Int8)) << r.plan.table();
  // Not measured: the down projection's recompute (never runs), every recompute of the
  // last block (its activations are kept) and block 0's q/k/v input gradients: 2 + 6 + 3.
  EXPECT_EQ(r.not_run, 11);
  EXPECT_EQ(r.plan.calibration["not_run"], 11);
  EXPECT_EQ(static_cast<int64_t>(r.measured.size()), 2 * 7 * 3 + 2 - 11);  // f16 never needed
  EXPECT_EQ(r.passes, 2 + 2 * 7 * 3 + 2 - 11);
  for (const nl::ProductSensitivity& s : r.measured)
    EXPECT_FALSE(s.product == FrozenProduct::Recompute && (s.proj == Proj::Down || s.layer == 1))
        << "measured a product that never runs: layer " << s.layer << " " << nl::proj_name(s.proj);
  // Training steps then really run int8: their gradients differ from the f32 ones.
  nl::LoraAdapter g32 = c.adapter.zeros_like(), g8 = c.adapter.zeros_like();
  nl::StepOptions so;
  so.threads = 2;
  nl::TrainStep s32(*c.tm.model, *c.engine, so);
  so.precision = &r.plan;
  nl::TrainStep s8(*c.tm.model, *c.engine, so);
  const auto l32 = s32.forward_backward(c.batch, c.adapter, g32, 0.1f, 3);
  const auto l8 = s8.forward_backward(c.batch, c.adapter, g8, 0.1f, 3);
  EXPECT_NE(l32.loss_sum, l8.loss_sum);
  EXPECT_NE(g32.pairs[0].B, g8.pairs[0].B);
  // Validation runs f32 whatever the plan.
  EXPECT_EQ(s32.forward_only(c.batch, c.adapter).loss_sum, s8.forward_only(c.batch, c.adapter).loss_sum);
}

TEST(PrecisionCalibration, ReplayedPassesMeasureExactlyWhatFullPassesMeasure) {
  Calib c;
  const nl::CalibrationResult replayed = c.run(0.01);
  const nl::CalibrationResult full = c.run(0.01, 0);  // nothing recorded: every product computed
  EXPECT_GT(replayed.replayed_products, 0);
  EXPECT_EQ(full.replayed_products, 0);
  EXPECT_LT(replayed.computed_products, full.computed_products);
  ASSERT_EQ(replayed.measured.size(), full.measured.size());
  for (size_t i = 0; i < full.measured.size(); ++i) {
    EXPECT_EQ(replayed.measured[i].rel_err, full.measured[i].rel_err) << i;
    EXPECT_EQ(replayed.measured[i].cosine, full.measured[i].cosine) << i;
  }
  EXPECT_EQ(replayed.plan.modes, full.plan.modes);
}

// The default search: one pass when every product may go cheaper together.
TEST(PrecisionCalibrationGroups, HugeToleranceTakesTheCheapestModeInOnePass) {
  Calib c;
  const nl::CalibrationResult r = c.run(1e9, size_t{64} << 20, nl::CalibrationSearch::Groups);
  EXPECT_TRUE(r.plan.all(Precision::Int8)) << r.plan.table();
  EXPECT_EQ(r.passes, 3);  // the reference twice, then everything at once
  ASSERT_EQ(r.groups.size(), 1u);
  EXPECT_EQ(r.groups[0].products, 2 * 7 * 3 + 2 - 11);
  EXPECT_TRUE(r.groups[0].accepted);
  EXPECT_GT(r.plan_rel_err, 0.0);  // int8 does move the gradients
  EXPECT_EQ(r.plan.calibration["search"], "groups");
  EXPECT_EQ(r.plan.calibration["plan_error"]["rel_err"], r.plan_rel_err);
}

// At tolerance 0 only products with no effect at all may go cheaper: the group search finds
// exactly the plan the per-product search finds.
TEST(PrecisionCalibrationGroups, ZeroToleranceFindsThePerProductPlan) {
  Calib c;
  const nl::CalibrationResult each = c.run(0.0);
  const nl::CalibrationResult groups = c.run(0.0, size_t{64} << 20, nl::CalibrationSearch::Groups);
  EXPECT_EQ(groups.plan.modes, each.plan.modes) << groups.plan.table() << each.plan.table();
  EXPECT_EQ(groups.plan.head_forward, each.plan.head_forward);
  EXPECT_EQ(groups.plan.head_input_grad, each.plan.head_input_grad);
  EXPECT_EQ(groups.plan_rel_err, 0.0);
}

// In between, the final plan as a whole is within the tolerance, measured here again by a
// plain training step against the all-f32 one (no replay). (On this tiny model most products
// matter at this tolerance: the search needs more passes than measuring each product alone,
// its worst case; on real models most products go int8 together.)
TEST(PrecisionCalibrationGroups, TheWholePlanIsWithinTheTolerance) {
  Calib c;
  const nl::CalibrationResult each = c.run(0.0);
  double tol = 0;  // the smallest per-product error: some products must stay f32 at this tolerance
  for (const nl::ProductSensitivity& s : each.measured)
    if (s.rel_err > 0 && (tol == 0 || s.rel_err < tol)) tol = s.rel_err;
  tol *= 4;
  const nl::CalibrationResult r = c.run(tol, size_t{64} << 20, nl::CalibrationSearch::Groups);
  // Some products went int8 (a trial was accepted), some stayed f32.
  EXPECT_TRUE(std::any_of(r.groups.begin(), r.groups.end(), [](const nl::GroupTrial& g) { return g.accepted; }));
  EXPECT_LT(r.plan.count(Precision::Int8), 2 * 7 * 3 + 2) << r.plan.table();
  nl::LoraAdapter g32 = c.adapter.zeros_like(), gp = c.adapter.zeros_like();
  nl::StepOptions so;
  so.threads = 2;
  nl::TrainStep s32(*c.tm.model, *c.engine, so);
  so.precision = &r.plan;
  nl::TrainStep sp(*c.tm.model, *c.engine, so);
  const float scale = 1.0f / static_cast<float>(c.batch.n_supervised());
  s32.forward_backward(c.batch, c.adapter, g32, scale, 0);
  sp.forward_backward(c.batch, c.adapter, gp, scale, 0);
  double d_sq = 0, r_sq = 0;
  for (size_t i = 0; i < g32.pairs.size(); ++i)
    for (const auto& [a, b] : {std::pair{&g32.pairs[i].A, &gp.pairs[i].A}, std::pair{&g32.pairs[i].B, &gp.pairs[i].B}})
      for (size_t j = 0; j < a->size(); ++j) {
        d_sq += (static_cast<double>((*a)[j]) - (*b)[j]) * (static_cast<double>((*a)[j]) - (*b)[j]);
        r_sq += static_cast<double>((*a)[j]) * (*a)[j];
      }
  EXPECT_LE(std::sqrt(d_sq / r_sq), tol);
  EXPECT_NEAR(std::sqrt(d_sq / r_sq), r.plan_rel_err, 1e-9);
  EXPECT_LE(r.passes, 2 + 2 * (2 * 7 * 3 + 2 - r.not_run));
}

TEST(PrecisionCalibrationGroups, ReplayedPassesMeasureExactlyWhatFullPassesMeasure) {
  Calib c;
  const nl::CalibrationResult replayed = c.run(0.01, size_t{64} << 20, nl::CalibrationSearch::Groups);
  const nl::CalibrationResult full = c.run(0.01, 0, nl::CalibrationSearch::Groups);
  ASSERT_EQ(replayed.groups.size(), full.groups.size());
  for (size_t i = 0; i < full.groups.size(); ++i) EXPECT_EQ(replayed.groups[i].rel_err, full.groups[i].rel_err) << i;
  EXPECT_EQ(replayed.plan.modes, full.plan.modes);
}

TEST(PrecisionCalibration, ClearErrors) {
  Calib c;
  EXPECT_THROW(c.run(-0.1), nl::Error);
  EXPECT_THROW(c.run(std::nan("")), nl::Error);
  nl::Batch unsupervised = nltest::make_batch({6}, c.tm.model->config.vocab, 6, 1);
  nl::CalibrationOptions o;
  EXPECT_THROW(nl::calibrate_precision(*c.tm.model, *c.engine, unsupervised, c.adapter, o), nl::Error);
}

TEST(PrecisionCalibration, CalibrationBatchCutsToTheTokenBudget) {
  std::vector<nl::Example> ex(3);
  for (int i = 0; i < 3; ++i) {
    ex[i].tokens.assign(10, 7);
    ex[i].supervised.assign(10, 1);
  }
  ex[1].supervised.assign(10, 0);  // nothing to learn: skipped
  const nl::Batch b = nl::calibration_batch(ex, {1, 0, 2}, 15);
  EXPECT_EQ(b.n_tokens(), 15);  // example 0 whole, example 2 cut to 5
  EXPECT_EQ(b.n_seqs(), 2);
  EXPECT_THROW(nl::calibration_batch(ex, {1}, 15), nl::Error);
  EXPECT_THROW(nl::calibration_batch(ex, {0}, 1), nl::Error);

  // Long prompts with their completions past the budget (a LaMP user's data): the ends are
  // kept instead, so calibration still has supervised tokens.
  std::vector<nl::Example> lamp(2);
  for (nl::Example& e : lamp) {
    e.tokens.assign(300, 5);
    e.supervised.assign(300, 0);
    e.supervised[298] = e.supervised[299] = 1;
  }
  const nl::Batch tail = nl::calibration_batch(lamp, {0, 1}, 128);
  EXPECT_EQ(tail.n_tokens(), 128);
  EXPECT_GT(tail.n_supervised(), 0);
}

}  // namespace
