// How a training job gets its precision plan (TrainingJobOptions::precision): from its
// checkpoint when it resumes (never recalibrated), else forced (f32, f16, int8), read from a
// plan file, or calibrated by gradient sensitivity (auto).
#pragma once
#include <optional>

#include <nlohmann/json.hpp>

#include "nightlora/host/precision_plan.h"
#include "nightlora/host/trainer.h"
#include "nightlora/train/training_job.h"

namespace nl {

// Checks the options that need no file (a typo fails before anything is loaded).
void check_precision_options(const TrainingJobOptions& o);

// Adds what of the precision choice shapes the trajectory to a run's identity config. An f32
// run adds nothing, so its identity (and the checkpoints of runs made before plans existed,
// which were all f32) stays as it was.
void add_precision_identity(nlohmann::json& cfg, const TrainingJobOptions& o);

// With a plan file: the plan, read and checked against the model (called before the run
// folder is touched, so a bad file leaves nothing behind). Otherwise nothing.
std::optional<PrecisionPlan> read_precision_file(const TrainingJobOptions& o, int64_t n_layer);

// The replay recording's cap of a calibration with these options (CalibrationOptions::
// replay_bytes), also counted by the memory plan.
size_t calibration_replay_bytes(const TrainingJobOptions& o);

// The plan of this run, set on the trainer, reported, and written to OUT/precision_plan.json.
// When resuming: `given` is the checkpoint's plan (none in checkpoints from before plans
// existed: those runs were all f32), never recalibrated. Otherwise: calibrated (auto), forced,
// or `given` (the plan file of read_precision_file).
PrecisionPlan setup_precision(Trainer& trainer, const TrainingJobOptions& o, const std::optional<PrecisionPlan>& given,
                              bool resuming, int64_t n_layer, TrainingJobOutput& out);

}  // namespace nl
