// The precision options of `nightlora train` (--precision, --precision-tol,
// --precision-calib-tokens) and how a run gets its precision plan: from its checkpoint when it
// resumes (never recalibrated), else forced, read from a plan file, or calibrated.
#pragma once
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "nightlora/host/precision_plan.h"
#include "nightlora/host/trainer.h"

namespace nlcli {

struct PrecisionArgs {
  std::string mode = "f32";  // auto | f32 | f16 | int8 | PATH of a precision_plan.json
  double tol = 0.02;
  int64_t calib_tokens = 128;
};

void add_precision_options(CLI::App& sub, PrecisionArgs& a);

// Checks the options that need no file (a typo fails before anything is loaded).
void check_precision_args(const PrecisionArgs& a);

// Adds what of the precision choice shapes the trajectory to a run's identity config. An f32 run
// adds nothing, so its identity (and the checkpoints of runs made before plans existed, which
// were all f32) stays as it was.
void add_precision_identity(nlohmann::json& cfg, const PrecisionArgs& a);

// With --precision PATH: the plan file, read and checked against the model (call it before
// the run folder is touched, so a bad file leaves nothing behind). Otherwise nothing.
std::optional<nl::PrecisionPlan> read_precision_file(const PrecisionArgs& a, int64_t n_layer);

// The plan of this run, set on the trainer, printed, and written to OUT/precision_plan.json.
// When resuming: `given` is the checkpoint's plan (none in checkpoints from before plans
// existed: those runs were all f32), never recalibrated. Otherwise: calibrated (auto), forced,
// or `given` (the plan file of read_precision_file).
nl::PrecisionPlan setup_precision(nl::Trainer& trainer, const PrecisionArgs& a, const std::optional<nl::PrecisionPlan>& given,
                                  bool resuming, const std::string& out_dir, int64_t n_layer);

}  // namespace nlcli
