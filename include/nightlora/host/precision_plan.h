// The precision plan: which numeric mode (f32, f16, int8; see nl::Precision) the frozen engine
// uses for each product of a training step.
//
// A step runs three products per projection of each layer: the forward product, the same
// product again when the block is recomputed in backward (activation checkpointing), and the
// input gradient dX = dY·W. The output head runs a forward and an input-gradient product per
// loss chunk (it is never recomputed). The plan gives each of these its own mode, so that the
// products the adapter gradients are sensitive to keep f32 while the rest run cheaper.
//
// `--precision auto` (the default) chooses the plan by measurement (calibrate_precision): on
// one small calibration batch it computes the adapter gradients with every product in f32
// (the reference), then tries products in the modes the engine runs cheaper than f32 for
// their matrix (FrozenEngine::cheaper_modes, cheapest first: int8 then f16 on an
// accelerator; on the cpu engine int8 for Q4_0/Q8_0 matrices, and for every type where
// requantizing pays). A trial is accepted when its relative error ||g - g_ref|| / ||g_ref||
// is at most `tol` and its cosine with g_ref at least 1 - tol. The default search tries
// groups of products (all at once, then halves of a failing group): the final plan's own
// error is measured. The other search tries each product alone. The plan is printed, written
// next to the run, stored in its checkpoints and reused on resume.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nightlora/data/batch.h"
#include "nightlora/data/dataset.h"
#include "nightlora/engine/frozen_engine.h"
#include "nightlora/host/lora.h"
#include "nightlora/modelio/model.h"

namespace nl {

// The three frozen products of a projection in one step.
enum class FrozenProduct : uint8_t { Forward = 0, Recompute = 1, InputGrad = 2 };
constexpr int kNumFrozenProducts = 3;
const char* frozen_product_name(FrozenProduct k);  // "forward" | "recompute" | "input_grad"

struct PrecisionPlan {
  int64_t n_layer = 0;
  // modes[(layer * kNumProj + proj) * kNumFrozenProducts + product]
  std::vector<Precision> modes;
  Precision head_forward = Precision::F32;
  Precision head_input_grad = Precision::F32;
  // How the plan was made: "auto" (calibrated) or the forced mode ("f32", "f16", "int8").
  std::string origin = "f32";
  // What calibration measured (tolerance, passes, seconds, per-product errors); informative,
  // kept through the JSON round trip, null for a forced plan.
  nlohmann::json calibration;

  // Every product in mode `p`.
  static PrecisionPlan uniform(int64_t n_layer, Precision p);

  Precision at(int64_t layer, Proj p, FrozenProduct k) const { return modes[index(layer, p, k)]; }
  void set(int64_t layer, Proj p, FrozenProduct k, Precision m) { modes[index(layer, p, k)] = m; }
  // Number of products (layers x 7 x 3, plus the head's two) in mode `m`.
  int64_t count(Precision m) const;
  bool all(Precision m) const { return count(m) == static_cast<int64_t>(modes.size()) + 2; }

  // {"format": "nightlora-precision-plan", "version": 1, "origin", "n_layer",
  //  "layers": [{"q": [forward, recompute, input_grad], "k": [...], ...}, ...],
  //  "head": {"forward": m, "input_grad": m}, "calibration": {...} or null}
  nlohmann::json to_json() const;
  // Validates everything: format and version, layer count (against expect_layers when >= 0),
  // exactly the seven projections per layer with three known modes each, the head. `where`
  // names the source (a file, a checkpoint) in errors, which say what to do.
  static PrecisionPlan from_json(const nlohmann::json& j, int64_t expect_layers, const std::string& where);
  // As from_json, from the text of a plan file (malformed JSON is an nl::Error too).
  static PrecisionPlan parse(const std::string& text, int64_t expect_layers, const std::string& where);

  // A compact table: one line per layer with, for each projection, three letters (forward,
  // recompute, input grad; F = f32, H = f16, I = int8), the head, and the totals per mode.
  std::string table() const;

 private:
  size_t index(int64_t layer, Proj p, FrozenProduct k) const {
    return static_cast<size_t>((layer * kNumProj + static_cast<int64_t>(p)) * kNumFrozenProducts +
                               static_cast<int64_t>(k));
  }
};

enum class CalibrationSearch : uint8_t {
  Groups,       // the whole plan within tol: all candidates at once, failing groups halved
  EachProduct,  // each product alone within tol, everything else f32
};

struct CalibrationOptions {
  double tol = 0.02;        // accepted relative gradient error (and 1 - cosine)
  CalibrationSearch search = CalibrationSearch::Groups;
  // The group search stops after this many passes (the reference's two included) and leaves
  // the products it has not reached in f32; 0: no limit. Near the tolerance the search would
  // otherwise try most products alone.
  int64_t max_passes = 0;
  int threads = 0;          // 0: all cores
  uint64_t dropout_seed = 0;  // LoRA dropout masks of the calibration passes (the same in every pass)
  // Memory for the reference pass's engine outputs, replayed in later passes up to their first
  // product in a cheaper mode (everything before it is bit-identical to the reference pass).
  // Past the cap, products are computed again: slower, same result.
  size_t replay_bytes = size_t{512} << 20;
  // Called after each measured pass with (passes done, passes at most); may print progress.
  std::function<void(int64_t, int64_t)> progress;
};

// One measurement: the named product alone in `mode`, everything else f32.
struct ProductSensitivity {
  int64_t layer = -1;  // -1: the output head
  Proj proj = Proj::Q;
  FrozenProduct product = FrozenProduct::Forward;
  Precision mode = Precision::F32;
  double rel_err = 0;  // ||g - g_ref|| / ||g_ref|| over all adapter gradients
  double cosine = 1;   // cos(g, g_ref)
  bool accepted = false;
};

// One trial of the group search: `products` products moved to a cheaper mode on top of the
// ones accepted before.
struct GroupTrial {
  int64_t products = 0;
  double rel_err = 0, cosine = 1;
  bool accepted = false;
};

struct CalibrationResult {
  PrecisionPlan plan;  // origin "auto"; plan.calibration holds the figures below as JSON
  std::vector<ProductSensitivity> measured;  // products measured alone
  std::vector<GroupTrial> groups;            // the group search's trials, in order
  // The group search: the error of the final plan as a whole (0 / 1 when it is all f32).
  double plan_rel_err = 0, plan_cosine = 1;
  bool pass_budget_spent = false;  // max_passes ended the search
  int64_t passes = 0;           // forward+backward passes run, the reference included
  int64_t not_run = 0;          // products the step never runs: set to the cheapest mode unmeasured
  int64_t tokens = 0;           // tokens of the calibration batch
  int64_t replayed_products = 0;  // engine products served from the reference pass
  int64_t computed_products = 0;  // engine products computed
  double seconds = 0;
};

// Measures the plan on `batch` with `adapter` (the adapter training starts from). Runs the
// f32 reference twice (to check the step is deterministic), then: the group search, 1 pass
// when every candidate fits the tolerance together and about 2 log2(n) more per product that
// does not; each-product search, at most (n_layer * 21 + 2 - not_run) * (cheaper modes per
// matrix) passes (a product stops at the first, cheapest, mode within tolerance). Throws nl::Error when the batch has no supervised token, the reference gradients
// are all zero, not finite or not reproducible, or tol is negative.
CalibrationResult calibrate_precision(const Model& model, FrozenEngine& engine, const Batch& batch,
                                      const LoraAdapter& adapter, const CalibrationOptions& opt);

// The calibration batch: examples of `examples` in the given order, packed until `max_tokens`
// (the last one cut to fit, keeping its start, or its end when no example's start has a
// supervised token); examples with no supervised token left after the cut are skipped. Throws nl::Error when no supervised token fits.
Batch calibration_batch(const std::vector<Example>& examples, const std::vector<int64_t>& order, int64_t max_tokens);

}  // namespace nl
