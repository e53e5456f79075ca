// The training-step benchmark behind `nightlora bench-step` (and bench/run_step.sh): a few
// LoRA steps (forward + backward through TrainStep, gradient clipping, AdamW) on one
// sequence of random tokens, with the step-time breakdown of every step, tokens/s, peak
// RSS and the memory plan. The first step is a warm-up (page faults of the mapped weights)
// and is not timed. Timings are measurements of this machine at this moment, never asserted.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "nightlora/host/memory_plan.h"
#include "nightlora/host/precision_plan.h"
#include "nightlora/host/step_timing.h"
#include "nightlora/modelio/model.h"

namespace nl {

struct StepBenchOptions {
  int64_t seq = 256;
  int64_t rank = 8;
  std::string targets = "all";
  bool completion_only = false;  // loss on the second half of the sequence only
  int64_t steps = 3;             // timed steps after the warm-up
  int threads = 0;               // engine threads (0: all cores)
  int host_threads = 1;          // host threads while engine products run (see StepOptions)
  size_t max_memory = 0;         // budget for the memory plan (0: keep only the last block)
  std::string max_memory_rule;   // non-empty: max_memory is a default budget (MemoryRequest::budget_rule)
  int64_t keep_blocks = 1;       // without a budget
  // auto (a plan calibrated as train's default: calibrate_precision, group search) or every
  // frozen product in one mode (f32, f16, int8).
  std::string precision = "auto";
  double precision_tol = 0.05;
  int64_t precision_calib_passes = 16;
  int64_t precision_calib_tokens = 128;
  std::string engine = "cpu";    // frozen-engine backend: cpu, vulkan or auto
};

struct StepBenchResult {
  MemoryPlan plan;
  std::vector<StepTiming> steps;  // the timed steps
  StepTiming mean;                // their mean
  int64_t tokens = 0, supervised = 0;
  int engine_threads = 0, host_threads = 0;
  std::string engine_isa;
  double load_s = 0;              // engine construction (resident layout)
  double tokens_per_s = 0;
  // Mean CPU time of the whole process per timed step (user + system, every thread): on a
  // machine shared with other jobs the wall time stretches with the load; this much less.
  double cpu_s = 0;
  size_t peak_rss_bytes = 0;      // whole process (loading included)
  size_t train_peak_rss_bytes = 0;  // VmHWM reset after loading; 0 when the kernel refuses
  size_t arena_bytes = 0;
  double last_loss = 0;           // mean NLL of the last step
  PrecisionPlan precision;        // the plan the steps ran
  double calib_s = 0;             // auto: calibration time (not in the steps)
  int64_t calib_passes = 0;
};

// The machine's peaks, measured in the same run (bench/peak_kernels.h), for the roofline.
struct PeakRates {
  double int8_ops_per_s = 0, f32_flops_per_s = 0;
  // The same operations per CPU second of the measuring threads (0: not measured).
  double int8_ops_per_cpu_s = 0, f32_flops_per_cpu_s = 0;
  std::string int8_isa, f32_isa;
};
// The step against the peaks: its frozen products' int8 and f32 operations, the time they
// would take at the peaks, and that time as a share of the step (and of the engine's busy
// time). "" when the peaks are unknown.
std::string format_roofline(const StepBenchResult& r, const PeakRates& peak);

// Runs the benchmark; `progress` receives one line per step (meant for stderr).
StepBenchResult run_step_bench(const Model& model, const StepBenchOptions& opt,
                               const std::function<void(const std::string&)>& progress = {});

// The breakdown as a table: per category seconds and share of the step, then tokens/s,
// peak RSS, arena, overlap and the share of time outside the three frozen products.
std::string format_step_breakdown(const StepBenchResult& r);
// The same figures as one JSON object (one line).
std::string step_bench_json(const StepBenchResult& r, const StepBenchOptions& opt, const std::string& model_path);

}  // namespace nl
