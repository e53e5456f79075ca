// Choosing the precision plan by gradient sensitivity (see precision_plan.h).
//
// One calibration batch, one adapter. The reference pass runs every product in f32; then each
// product in turn runs in the engine's cheapest mode (int8), and if that moves the adapter
// gradients by more than the tolerance, in its next cheaper one (f16 on an accelerator; the
// cpu engine has none); everything else stays f32 in those passes, so each measurement is
// the effect of that product alone. The passes go through a ReplayEngine, which serves each pass's
// products from the reference recording up to the first product that differs: the figures are
// those of full passes, the time is less.
#include <algorithm>
#include <chrono>
#include <cmath>

#include "nightlora/data/batcher.h"
#include "nightlora/host/precision_plan.h"
#include "nightlora/host/train_step.h"
#include "nightlora/util/error.h"
#include "replay_engine.h"

namespace nl {

namespace {

// One slot of the plan: a (layer, projection, product), or a product of the output head.
struct Slot {
  int64_t layer;  // -1: head
  Proj proj;
  FrozenProduct product;
};

std::vector<Slot> all_slots(int64_t n_layer) {
  std::vector<Slot> s;
  for (int64_t l = 0; l < n_layer; ++l)
    for (int p = 0; p < kNumProj; ++p)
      for (int k = 0; k < kNumFrozenProducts; ++k) s.push_back({l, static_cast<Proj>(p), static_cast<FrozenProduct>(k)});
  s.push_back({-1, Proj::Q, FrozenProduct::Forward});
  s.push_back({-1, Proj::Q, FrozenProduct::InputGrad});
  return s;
}

void set_slot(PrecisionPlan& plan, const Slot& s, Precision m) {
  if (s.layer >= 0) plan.set(s.layer, s.proj, s.product, m);
  else if (s.product == FrozenProduct::Forward) plan.head_forward = m;
  else plan.head_input_grad = m;
}

// All adapter gradients, in pair order, as one vector.
std::vector<float> flatten(const LoraAdapter& g) {
  std::vector<float> v;
  for (const LoraPair& p : g.pairs) {
    v.insert(v.end(), p.A.begin(), p.A.end());
    v.insert(v.end(), p.B.begin(), p.B.end());
  }
  return v;
}

nlohmann::json sensitivity_json(const ProductSensitivity& s) {
  nlohmann::json j;
  if (s.layer >= 0) {
    j["layer"] = s.layer;
    j["proj"] = proj_name(s.proj);
  } else {
    j["layer"] = "head";
  }
  j["product"] = frozen_product_name(s.product);
  j["mode"] = precision_name(s.mode);
  // JSON has no NaN: a pass whose gradients were not finite is recorded as null.
  j["rel_err"] = std::isfinite(s.rel_err) ? nlohmann::json(s.rel_err) : nlohmann::json();
  j["cosine"] = std::isfinite(s.cosine) ? nlohmann::json(s.cosine) : nlohmann::json();
  j["accepted"] = s.accepted;
  return j;
}

}  // namespace

Batch calibration_batch(const std::vector<Example>& examples, const std::vector<int64_t>& order, int64_t max_tokens) {
  if (max_tokens < 2) fail("--precision-calib-tokens " + std::to_string(max_tokens), "must be at least 2");
  std::vector<Example> picked;
  int64_t total = 0;
  for (int64_t i : order) {
    if (total >= max_tokens) break;
    if (i < 0 || i >= static_cast<int64_t>(examples.size())) fail("calibration batch", "example index out of range");
    Example e = examples[static_cast<size_t>(i)];
    const int64_t room = max_tokens - total;
    if (static_cast<int64_t>(e.tokens.size()) > room) {
      e.tokens.resize(static_cast<size_t>(room));
      e.supervised.resize(static_cast<size_t>(room));
    }
    // A label needs a supervised token after position 0 of the (cut) sequence.
    bool any = false;
    for (size_t t = 1; t < e.supervised.size(); ++t) any |= e.supervised[t] != 0;
    if (!any) continue;
    total += static_cast<int64_t>(e.tokens.size());
    picked.push_back(std::move(e));
  }
  if (picked.empty())
    fail("calibration batch", "no supervised token fits in the first " + std::to_string(max_tokens) + " tokens of the data",
         "raise --precision-calib-tokens, or use --precision f32|f16|int8");
  std::vector<int64_t> idx(picked.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int64_t>(i);
  return pack_batch(picked, idx);
}

CalibrationResult calibrate_precision(const Model& model, FrozenEngine& engine, const Batch& batch,
                                      const LoraAdapter& adapter, const CalibrationOptions& opt) {
  if (!(opt.tol >= 0) || !std::isfinite(opt.tol))
    fail("--precision-tol " + std::to_string(opt.tol), "must be a finite number >= 0", "e.g. 0.02 (2% gradient error)");
  const int64_t n_sup = batch.n_supervised();
  if (n_sup == 0)
    fail("calibration batch", "has no supervised token", "raise --precision-calib-tokens, or use --precision f32|f16|int8");
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t n_layer = model.config.n_layer;

  ReplayEngine replay(engine, opt.replay_bytes);
  PrecisionPlan trial = PrecisionPlan::uniform(n_layer, Precision::F32);
  StepOptions so;
  so.threads = opt.threads;
  so.precision = &trial;  // read at each step: changing `trial` changes the next pass
  TrainStep step(model, replay, so);
  LoraAdapter grads = adapter.zeros_like();
  const float scale = 1.0f / static_cast<float>(n_sup);

  CalibrationResult res;
  res.tokens = batch.n_tokens();
  const std::vector<Slot> slots = all_slots(n_layer);
  // The modes tried for each slot's matrix (cheapest first), and every mode tried at all.
  auto modes_of = [&](const Slot& s) {
    return engine.cheaper_modes(s.layer < 0 ? engine.output_handle() : engine.handle(s.layer, s.proj));
  };
  std::vector<Precision> modes_tried;
  int64_t max_passes = 2;  // an upper bound
  for (const Slot& s : slots) {
    const std::vector<Precision> m = modes_of(s);
    max_passes += static_cast<int64_t>(m.size());
    for (Precision p : m)
      if (std::find(modes_tried.begin(), modes_tried.end(), p) == modes_tried.end()) modes_tried.push_back(p);
  }
  auto pass = [&] {
    for (LoraPair& p : grads.pairs) {
      std::fill(p.A.begin(), p.A.end(), 0.0f);
      std::fill(p.B.begin(), p.B.end(), 0.0f);
    }
    step.forward_backward(batch, adapter, grads, scale, opt.dropout_seed);
    ++res.passes;
    if (opt.progress) opt.progress(res.passes, max_passes);
    return flatten(grads);
  };

  // The reference, computed twice: every measurement below compares a pass with it, so the
  // step must be deterministic; two identical passes that differ would make every product
  // look sensitive (and the replay unsound), so that is an error, not a plan.
  replay.start_recording();
  const std::vector<float> first = pass();
  replay.start_recording();
  const std::vector<float> ref = pass();
  if (first != ref) {
    double d_sq = 0, r_sq = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      d_sq += (static_cast<double>(first[i]) - ref[i]) * (static_cast<double>(first[i]) - ref[i]);
      r_sq += static_cast<double>(ref[i]) * ref[i];
    }
    fail("precision calibration",
         "two identical all-f32 training passes gave different adapter gradients (relative difference " +
             std::to_string(r_sq > 0 ? std::sqrt(d_sq / r_sq) : 0.0) +
             "), so sensitivities cannot be measured: the step or the engine is not deterministic here",
         "this is a bug to report (with the model and --threads); meanwhile use --precision f32|f16|int8");
  }
  double ref_sq = 0;
  for (float v : ref) ref_sq += static_cast<double>(v) * v;
  if (!std::isfinite(ref_sq))
    fail("precision calibration", "the f32 reference gradients are not finite",
         "check the model and data (train with --precision f32 to see the loss)");
  if (ref_sq == 0)
    fail("precision calibration", "the f32 reference gradients are all zero, so no sensitivity can be measured",
         "use --precision f32|f16|int8, or give more calibration tokens (--precision-calib-tokens)");

  res.plan = PrecisionPlan::uniform(n_layer, Precision::F32);
  res.plan.origin = "auto";
  // Products that the step never runs: the down projection's recompute (a recomputed block
  // stops before it), the recomputes of the blocks whose activations the step keeps (the
  // last ones; a training run keeps at least as many), and block 0's q/k/v input gradients
  // (they would only reach the frozen embedding). They cost nothing in any mode, so they get
  // the cheapest without a pass (f32 when the engine has no cheaper mode).
  const int64_t first_kept = n_layer - step.kept_blocks();
  auto never_runs = [&](const Slot& s) {
    if (s.product == FrozenProduct::InputGrad)
      return s.layer == 0 && (s.proj == Proj::Q || s.proj == Proj::K || s.proj == Proj::V);
    return s.product == FrozenProduct::Recompute && (s.proj == Proj::Down || s.layer >= first_kept);
  };
  for (const Slot& s : slots) {
    const std::vector<Precision> modes = modes_of(s);
    if (never_runs(s)) {
      if (!modes.empty()) set_slot(res.plan, s, modes[0]);
      ++res.not_run;
      continue;
    }
    for (Precision m : modes) {
      set_slot(trial, s, m);
      replay.start_replay();
      const std::vector<float> g = pass();
      set_slot(trial, s, Precision::F32);
      double dot = 0, g_sq = 0, d_sq = 0;
      for (size_t i = 0; i < g.size(); ++i) {
        const double a = g[i], b = ref[i];
        dot += a * b;
        g_sq += a * a;
        d_sq += (a - b) * (a - b);
      }
      ProductSensitivity ps{s.layer, s.proj, s.product, m};
      ps.rel_err = std::sqrt(d_sq / ref_sq);
      ps.cosine = g_sq > 0 ? dot / std::sqrt(g_sq * ref_sq) : 0.0;
      // Comparisons with NaN are false: a non-finite pass is never accepted.
      ps.accepted = ps.rel_err <= opt.tol && ps.cosine >= 1.0 - opt.tol;
      res.measured.push_back(ps);
      if (ps.accepted) {
        set_slot(res.plan, s, m);
        break;
      }
    }
  }
  res.replayed_products = replay.replayed();
  res.computed_products = replay.computed();
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  nlohmann::json measured = nlohmann::json::array();
  for (const ProductSensitivity& ps : res.measured) measured.push_back(sensitivity_json(ps));
  res.plan.calibration = {{"tol", opt.tol},
                          {"criterion", "rel_err <= tol and cosine >= 1 - tol over all adapter gradients"},
                          {"tokens", res.tokens},
                          {"supervised", n_sup},
                          {"passes", res.passes},
                          {"not_run", res.not_run},
                          {"modes_tried", [&] {
                             nlohmann::json m = nlohmann::json::array();
                             for (Precision p : modes_tried) m.push_back(precision_name(p));
                             return m;
                           }()},
                          {"seconds", res.seconds},
                          {"replayed_products", res.replayed_products},
                          {"computed_products", res.computed_products},
                          {"measured", measured}};
  return res;
}

}  // namespace nl
