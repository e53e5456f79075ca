#include "precision_setup.h"

#include <cstdio>
#include <filesystem>

#include "nightlora/host/checkpoint.h"
#include "nightlora/host/memory_plan.h"
#include "nightlora/job/atomic_file.h"
#include "nightlora/util/error.h"
#include "nightlora/util/strformat.h"
#include "plan_cache.h"

namespace nl {

namespace {

namespace fs = std::filesystem;

bool is_forced_mode(const std::string& m) { return m == "f32" || m == "f16" || m == "int8"; }

CalibrationSearch parse_search(const std::string& s) {
  if (s == "groups") return CalibrationSearch::Groups;
  if (s == "each") return CalibrationSearch::EachProduct;
  fail("--precision-search " + s, "not a search", "use groups (the default) or each");
}

// What a calibrated plan depends on (plan_cache.h).
nlohmann::json plan_key(const Trainer& trainer, const TrainingJobOptions& o) {
  return {{"format", "nightlora-plan-cache"},
          {"version", 1},
          {"model", fingerprint_path(o.model)},
          {"engine", trainer.engine().backend()},
          {"isa", trainer.engine().isa()},
          {"targets", trainer.lora_config().targets_string()},
          {"rank", trainer.lora_config().rank},
          {"tol", o.precision_tol},
          {"calib_tokens", o.precision_calib_tokens},
          {"calib_passes", o.precision_calib_passes},
          {"search", o.precision_search}};
}

std::optional<PrecisionPlan> cached_plan(const Trainer& trainer, const TrainingJobOptions& o, int64_t n_layer,
                                         TrainingJobOutput& out) {
  const std::string dir = plan_cache_dir(o.plan_cache);
  if (dir.empty()) return std::nullopt;
  std::string why_not;
  std::optional<PrecisionPlan> plan = load_cached_plan(dir, plan_key(trainer, o), n_layer, why_not);
  if (plan) {
    out.line("precision: the plan calibrated earlier for this model, engine and adapter shape, from the cache " + dir +
             " (--plan-cache off recalibrates)");
    plan->origin = "auto";
  } else {
    out.line("precision: " + why_not);
  }
  return plan;
}

// Calibrates (auto without a cached plan), prints the outcome and caches the plan. auto is
// the default: a run that f32 can train must not fail for want of a measure, so a calibration
// that cannot be made (no supervised token in reach, a non-deterministic step) gives f32 with
// a warning saying why.
PrecisionPlan calibrate(Trainer& trainer, const TrainingJobOptions& o, int64_t n_layer, TrainingJobOutput& out) {
  // (How many passes depends on the engine's cheaper modes: the progress and the summary say.)
  out.line(strformat("precision: calibrating on %lld tokens, tolerance %g", static_cast<long long>(o.precision_calib_tokens),
                     o.precision_tol));
  CalibrationOptions co;
  co.tol = o.precision_tol;
  co.max_passes = o.precision_calib_passes;
  co.search = parse_search(o.precision_search);
  co.replay_bytes = calibration_replay_bytes(o);
  co.progress = [&out](int64_t done, int64_t most) { out.calibration_progress(done, most); };
  CalibrationResult r;
  try {
    r = trainer.calibrate_precision(co, o.precision_calib_tokens);
  } catch (const Error& e) {
    out.warning(std::string("precision calibration failed, training in f32: ") + e.what());
    PrecisionPlan plan = PrecisionPlan::uniform(n_layer, Precision::F32);
    plan.origin = "auto";
    plan.calibration = {{"failed", e.what()}};
    return plan;
  }
  const std::string what =
      co.search == CalibrationSearch::Groups
          ? strformat("the plan moves the adapter gradients by %.2f%% (cosine %.5f), tolerance %g%s", 100.0 * r.plan_rel_err,
                      r.plan_cosine, o.precision_tol,
                      r.pass_budget_spent ? "; pass budget spent: products not reached stay f32" : "")
          : strformat("%lld products measured alone, tolerance %g each", static_cast<long long>(r.measured.size()),
                      o.precision_tol);
  out.line(strformat("calibration: %lld passes on %lld tokens in %.2f s; %s (%lld engine products replayed from the "
                     "reference pass, %lld computed)",
                     static_cast<long long>(r.passes), static_cast<long long>(r.tokens), r.seconds, what.c_str(),
                     static_cast<long long>(r.replayed_products), static_cast<long long>(r.computed_products)));
  if (const std::string dir = plan_cache_dir(o.plan_cache); !dir.empty()) {
    const std::string why = store_cached_plan(dir, plan_key(trainer, o), r.plan);
    if (!why.empty()) out.warning("precision plan not cached: " + why);
  }
  return std::move(r.plan);
}

}  // namespace

size_t calibration_replay_bytes(const TrainingJobOptions& o) {
  // The group search's first trial changes the first product already, so a recording of the
  // reference pass serves little; kept small, so that calibration stays within the memory a
  // run plans for.
  return parse_search(o.precision_search) == CalibrationSearch::Groups ? kGroupSearchReplayBytes : size_t{512} << 20;
}

void check_precision_options(const TrainingJobOptions& o) {
  if (o.precision != "auto" && !is_forced_mode(o.precision)) {
    std::error_code ec;
    if (!fs::is_regular_file(o.precision, ec))
      fail("--precision " + o.precision, "not a precision mode, and no such plan file",
           "use auto, f32, f16, int8, or the path of a precision_plan.json");
  }
  if (!(o.precision_tol >= 0) || o.precision_tol > 1)
    fail("--precision-tol " + std::to_string(o.precision_tol), "must be between 0 and 1", "e.g. 0.05 (5% gradient error)");
  parse_search(o.precision_search);
  if (o.precision_calib_passes < 3)
    fail("--precision-calib-passes " + std::to_string(o.precision_calib_passes), "must be at least 3",
         "e.g. 16 (the f32 reference twice, then the plan's trials)");
  if (o.precision_calib_tokens < 2)
    fail("--precision-calib-tokens " + std::to_string(o.precision_calib_tokens), "must be at least 2", "e.g. 128");
}

void add_precision_identity(nlohmann::json& cfg, const TrainingJobOptions& o) {
  if (o.precision == "f32") return;
  if (o.precision == "auto") {
    cfg["precision"] = "auto";
    cfg["precision-tol"] = o.precision_tol;
    cfg["precision-calib-tokens"] = o.precision_calib_tokens;
    if (o.precision_search != "groups") cfg["precision-search"] = o.precision_search;
    cfg["precision-calib-passes"] = o.precision_calib_passes;
  } else if (is_forced_mode(o.precision)) {
    cfg["precision"] = o.precision;
  } else {
    cfg["precision"] = "file:" + fingerprint_path(o.precision);
  }
}

std::optional<PrecisionPlan> read_precision_file(const TrainingJobOptions& o, int64_t n_layer) {
  if (o.precision == "auto" || is_forced_mode(o.precision)) return std::nullopt;
  return PrecisionPlan::parse(read_file(o.precision), n_layer, o.precision);
}

PrecisionPlan setup_precision(Trainer& trainer, const TrainingJobOptions& o, const std::optional<PrecisionPlan>& given,
                              bool resuming, int64_t n_layer, TrainingJobOutput& out) {
  PrecisionPlan plan;
  std::optional<PrecisionPlan> cached;
  if (resuming) {
    // The checkpoint's identity matched, so its plan is the one this run chose: reuse it as is.
    plan = given ? *given : PrecisionPlan::uniform(n_layer, Precision::F32);
    out.line("precision: the plan stored in the checkpoint (" + plan.origin + "; not recalibrated)");
  } else if (o.precision == "auto" && (cached = cached_plan(trainer, o, n_layer, out))) {
    plan = std::move(*cached);
  } else if (o.precision == "auto") {
    plan = calibrate(trainer, o, n_layer, out);
  } else if (is_forced_mode(o.precision)) {
    plan = PrecisionPlan::uniform(n_layer, parse_precision(o.precision));
  } else {
    if (!given) fail("--precision " + o.precision, "internal: the plan file was not read");
    plan = *given;
    out.line("precision: plan read from " + o.precision);
  }
  trainer.set_precision(plan);
  // The per-layer table only when the plan mixes modes; one mode for all is said in a line.
  std::string table = plan.table();
  if (!table.empty() && table.back() == '\n') table.pop_back();
  for (Precision m : {Precision::F32, Precision::F16, Precision::Int8})
    if (plan.all(m))
      table = strformat("precision plan (%s): every product %s (%lld products)", plan.origin.c_str(), precision_name(m),
                        static_cast<long long>(plan.modes.size()) + 2);
  out.line(table);
  // A resumed run keeps the file its first session wrote (it has the per-product figures).
  const fs::path path = fs::path(o.out) / "precision_plan.json";
  std::error_code ec;
  if (!resuming || !fs::exists(path, ec)) write_file_atomic(path.string(), plan.to_json().dump(1) + "\n");
  return plan;
}

}  // namespace nl
