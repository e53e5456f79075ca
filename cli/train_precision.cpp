#include "train_precision.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "nightlora/host/checkpoint.h"
#include "nightlora/job/atomic_file.h"
#include "nightlora/util/error.h"

namespace nlcli {

namespace {

namespace fs = std::filesystem;

bool is_forced_mode(const std::string& m) { return m == "f32" || m == "f16" || m == "int8"; }

}  // namespace

void add_precision_options(CLI::App& sub, PrecisionArgs& a) {
  sub.add_option("--precision", a.mode,
                 "numeric mode of the frozen products: auto (calibrate a plan by gradient sensitivity), f32, f16, "
                 "int8 (every product), or a precision_plan.json")
      ->capture_default_str();
  sub.add_option("--precision-tol", a.tol,
                 "auto: a product gets the cheapest mode (int8 < f16 < f32) whose adapter-gradient relative error is "
                 "<= X and cosine >= 1 - X")
      ->capture_default_str();
  sub.add_option("--precision-calib-tokens", a.calib_tokens, "auto: tokens of the calibration batch")
      ->capture_default_str();
}

void check_precision_args(const PrecisionArgs& a) {
  if (a.mode != "auto" && !is_forced_mode(a.mode)) {
    std::error_code ec;
    if (!fs::is_regular_file(a.mode, ec))
      nl::fail("--precision " + a.mode, "not a precision mode, and no such plan file",
               "use auto, f32, f16, int8, or the path of a precision_plan.json");
  }
  if (!(a.tol >= 0) || a.tol > 1)
    nl::fail("--precision-tol " + std::to_string(a.tol), "must be between 0 and 1", "e.g. 0.02 (2% gradient error)");
  if (a.calib_tokens < 2)
    nl::fail("--precision-calib-tokens " + std::to_string(a.calib_tokens), "must be at least 2", "e.g. 128");
}

void add_precision_identity(nlohmann::json& cfg, const PrecisionArgs& a) {
  if (a.mode == "f32") return;
  if (a.mode == "auto") {
    cfg["precision"] = "auto";
    cfg["precision-tol"] = a.tol;
    cfg["precision-calib-tokens"] = a.calib_tokens;
  } else if (is_forced_mode(a.mode)) {
    cfg["precision"] = a.mode;
  } else {
    cfg["precision"] = "file:" + nl::fingerprint_path(a.mode);
  }
}

std::optional<nl::PrecisionPlan> read_precision_file(const PrecisionArgs& a, int64_t n_layer) {
  if (a.mode == "auto" || is_forced_mode(a.mode)) return std::nullopt;
  return nl::PrecisionPlan::parse(nl::read_file(a.mode), n_layer, a.mode);
}

nl::PrecisionPlan setup_precision(nl::Trainer& trainer, const PrecisionArgs& a, const std::optional<nl::PrecisionPlan>& given,
                                  bool resuming, const std::string& out_dir, int64_t n_layer) {
  nl::PrecisionPlan plan;
  if (resuming) {
    // The checkpoint's identity matched, so its plan is the one this run chose: reuse it as is.
    plan = given ? *given : nl::PrecisionPlan::uniform(n_layer, nl::Precision::F32);
    std::printf("precision: the plan stored in the checkpoint (%s; not recalibrated)\n", plan.origin.c_str());
  } else if (a.mode == "auto") {
    std::printf("precision: calibrating on %lld tokens, tolerance %g (at most %lld forward+backward passes)\n",
                static_cast<long long>(a.calib_tokens), a.tol,
                static_cast<long long>(2 + (n_layer * nl::kNumProj * nl::kNumFrozenProducts + 2) * 2));
    std::fflush(stdout);
    nl::CalibrationOptions co;
    co.tol = a.tol;
    const bool live = isatty(fileno(stdout));
    if (live)
      co.progress = [](int64_t done, int64_t most) {
        std::printf("\r\033[Kcalibrating: pass %lld (of at most %lld)", static_cast<long long>(done),
                    static_cast<long long>(most));
        std::fflush(stdout);
      };
    nl::CalibrationResult r = trainer.calibrate_precision(co, a.calib_tokens);
    if (live) std::printf("\r\033[K");
    std::printf("calibration: %lld passes on %lld tokens in %.2f s (%lld products measured, %lld recompute products "
                "the step never runs set to int8 unmeasured; %lld engine products replayed from the reference pass, "
                "%lld computed)\n",
                static_cast<long long>(r.passes), static_cast<long long>(r.tokens), r.seconds,
                static_cast<long long>(r.measured.size()), static_cast<long long>(r.not_run),
                static_cast<long long>(r.replayed_products), static_cast<long long>(r.computed_products));
    plan = std::move(r.plan);
  } else if (is_forced_mode(a.mode)) {
    plan = nl::PrecisionPlan::uniform(n_layer, nl::parse_precision(a.mode));
  } else {
    if (!given) nl::fail("--precision " + a.mode, "internal: the plan file was not read");
    plan = *given;
    std::printf("precision: plan read from %s\n", a.mode.c_str());
  }
  trainer.set_precision(plan);
  std::printf("%s", plan.table().c_str());
  // A resumed run keeps the file its first session wrote (it has the per-product figures).
  const fs::path path = fs::path(out_dir) / "precision_plan.json";
  std::error_code ec;
  if (!resuming || !fs::exists(path, ec)) nl::write_file_atomic(path.string(), plan.to_json().dump(1) + "\n");
  std::fflush(stdout);
  return plan;
}

}  // namespace nlcli
