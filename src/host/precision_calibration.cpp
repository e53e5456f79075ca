// Choosing the precision plan by gradient sensitivity (see precision_plan.h).
//
// One calibration batch, one adapter. The reference pass runs every product in f32. Then the
// products are tried in the engine's cheaper modes (int8 first; f16 on an accelerator), and a
// trial is accepted when the adapter gradients move by at most the tolerance. Two searches:
//  - groups (the default): the whole set of products that may go cheaper is tried at once on
//    top of what is already accepted; a set that fails is split in two halves, each tried in
//    turn. Every accepted trial measures the whole plan as it then stands, so the final plan's
//    own error is measured and within the tolerance, and a model where everything may go
//    cheaper costs one pass instead of one per product.
//  - each product: every product alone, everything else f32 (research; ~500 passes on a
//    24-layer model).
// The passes go through a ReplayEngine, which serves each pass's products from the reference
// recording up to the first product that differs: the figures are those of full passes, the
// time is less.
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

Precision slot_mode(const PrecisionPlan& plan, const Slot& s) {
  if (s.layer >= 0) return plan.at(s.layer, s.proj, s.product);
  return s.product == FrozenProduct::Forward ? plan.head_forward : plan.head_input_grad;
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
  // Examples are cut to the budget keeping their start; when that leaves no supervised token
  // (long prompts, short completions: a LaMP user's data), keeping their end instead.
  std::vector<Example> picked;
  for (const bool keep_end : {false, true}) {
    int64_t total = 0;
    for (int64_t i : order) {
      if (total >= max_tokens) break;
      if (i < 0 || i >= static_cast<int64_t>(examples.size())) fail("calibration batch", "example index out of range");
      Example e = examples[static_cast<size_t>(i)];
      const int64_t room = max_tokens - total;
      const int64_t cut = static_cast<int64_t>(e.tokens.size()) - room;
      if (cut > 0 && keep_end) {
        e.tokens.erase(e.tokens.begin(), e.tokens.begin() + cut);
        e.supervised.erase(e.supervised.begin(), e.supervised.begin() + cut);
      } else if (cut > 0) {
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
    if (!picked.empty()) break;
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
    // The group search tries a product at most twice per mode (in a group and alone).
    max_passes += static_cast<int64_t>(m.size()) * (opt.search == CalibrationSearch::Groups ? 2 : 1);
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
  // last ones), and block 0's q/k/v input gradients (they would only reach the frozen
  // embedding). They cost nothing in any mode now, so they get
  // the cheapest without a pass (f32 when the engine has no cheaper mode).
  const int64_t first_kept = n_layer - step.kept_blocks();
  auto never_runs = [&](const Slot& s) {
    if (s.product == FrozenProduct::InputGrad)
      return s.layer == 0 && (s.proj == Proj::Q || s.proj == Proj::K || s.proj == Proj::V);
    return s.product == FrozenProduct::Recompute && (s.proj == Proj::Down || s.layer >= first_kept);
  };
  // One trial: the gradients with `trial` as it is now, against the reference.
  auto measure = [&](double& rel_err, double& cosine) {
    replay.start_replay();
    const std::vector<float> g = pass();
    double dot = 0, g_sq = 0, d_sq = 0;
    for (size_t i = 0; i < g.size(); ++i) {
      const double a = g[i], b = ref[i];
      dot += a * b;
      g_sq += a * a;
      d_sq += (a - b) * (a - b);
    }
    rel_err = std::sqrt(d_sq / ref_sq);
    cosine = g_sq > 0 ? dot / std::sqrt(g_sq * ref_sq) : 0.0;
    // Comparisons with NaN are false: a non-finite pass is never accepted.
    return rel_err <= opt.tol && cosine >= 1.0 - opt.tol;
  };
  std::vector<Slot> runs;  // the products the step runs, in slot order
  for (const Slot& s : slots) {
    const std::vector<Precision> modes = modes_of(s);
    if (never_runs(s)) {
      if (!modes.empty()) set_slot(res.plan, s, modes[0]);
      ++res.not_run;
    } else {
      runs.push_back(s);
    }
  }
  if (opt.search == CalibrationSearch::EachProduct) {
    for (const Slot& s : runs)
      for (Precision m : modes_of(s)) {
        ProductSensitivity ps{s.layer, s.proj, s.product, m};
        set_slot(trial, s, m);
        ps.accepted = measure(ps.rel_err, ps.cosine);
        set_slot(trial, s, Precision::F32);
        res.measured.push_back(ps);
        if (ps.accepted) {
          set_slot(res.plan, s, m);
          break;
        }
      }
  } else {
    // Round r tries each product's r-th cheaper mode, for the products no earlier round
    // moved off f32. `trial` holds what is accepted so far.
    for (size_t r = 0;; ++r) {
      std::vector<Slot> todo;
      std::vector<Precision> mode_of;
      for (const Slot& s : runs) {
        const std::vector<Precision> modes = modes_of(s);
        if (r < modes.size() && slot_mode(trial, s) == Precision::F32) {
          todo.push_back(s);
          mode_of.push_back(modes[r]);
        }
      }
      if (todo.empty()) break;
      // Tries todo[i0, i1) on top of the accepted ones; on failure, each half in turn. Returns
      // whether the whole range was accepted. A range whose failure is implied (its group
      // failed and the other half went through whole) is split without a trial of its own.
      auto descend = [&](auto&& self, size_t i0, size_t i1, bool known_to_fail) -> bool {
        if (opt.max_passes > 0 && res.passes >= opt.max_passes) {  // the rest stays f32
          res.pass_budget_spent = true;
          return false;
        }
        if (!known_to_fail) {
          for (size_t i = i0; i < i1; ++i) set_slot(trial, todo[i], mode_of[i]);
          GroupTrial gt;
          gt.products = static_cast<int64_t>(i1 - i0);
          gt.accepted = measure(gt.rel_err, gt.cosine);
          res.groups.push_back(gt);
          if (i1 - i0 == 1) {
            const Slot& s = todo[i0];
            res.measured.push_back({s.layer, s.proj, s.product, mode_of[i0], gt.rel_err, gt.cosine, gt.accepted});
          }
          if (gt.accepted) {
            res.plan_rel_err = gt.rel_err;
            res.plan_cosine = gt.cosine;
            return true;
          }
          for (size_t i = i0; i < i1; ++i) set_slot(trial, todo[i], Precision::F32);
        }
        if (i1 - i0 == 1) return false;
        const size_t mid = i0 + (i1 - i0) / 2;
        const bool left = self(self, i0, mid, false);
        self(self, mid, i1, left);
        return false;
      };
      descend(descend, 0, todo.size(), false);
    }
    for (const Slot& s : runs) set_slot(res.plan, s, slot_mode(trial, s));
  }
  // A recompute the step does not run now (its block's activations are kept) runs when a
  // later session keeps fewer blocks: it takes its forward product's mode, so that it gives
  // the activations the forward pass gave.
  for (const Slot& s : slots)
    if (never_runs(s) && s.product == FrozenProduct::Recompute && s.proj != Proj::Down)
      set_slot(res.plan, s, res.plan.at(s.layer, s.proj, FrozenProduct::Forward));
  res.replayed_products = replay.replayed();
  res.computed_products = replay.computed();
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  nlohmann::json measured = nlohmann::json::array();
  for (const ProductSensitivity& ps : res.measured) measured.push_back(sensitivity_json(ps));
  nlohmann::json plan_err;  // the final plan's own measured error (group search)
  if (opt.search == CalibrationSearch::Groups)
    plan_err = {{"rel_err", std::isfinite(res.plan_rel_err) ? nlohmann::json(res.plan_rel_err) : nlohmann::json()},
                {"cosine", std::isfinite(res.plan_cosine) ? nlohmann::json(res.plan_cosine) : nlohmann::json()}};
  res.plan.calibration = {{"tol", opt.tol},
                          {"search", opt.search == CalibrationSearch::Groups ? "groups" : "each-product"},
                          {"plan_error", plan_err},
                          {"group_trials", static_cast<int64_t>(res.groups.size())},
                          {"max_passes", opt.max_passes},
                          {"pass_budget_spent", res.pass_budget_spent},
                          {"criterion", opt.search == CalibrationSearch::Groups
                                            ? "the whole plan: rel_err <= tol and cosine >= 1 - tol over all adapter gradients"
                                            : "each product alone: rel_err <= tol and cosine >= 1 - tol over all adapter gradients"},
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
