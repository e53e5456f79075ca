// `nightlora bench-step --model M | --preset P [--type T --layers L] --seq N ...`: a few LoRA
// training steps on any model file, or on a synthetic model of a preset's shapes written to a
// temporary folder, printing the memory plan and the step-time breakdown as a table
// (per category: seconds and share of the step), tokens/s, peak RSS, the arena, the overlap
// of host work with engine products and the share of the step outside the frozen products.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <cstdlib>
#include <memory>

#include <nlohmann/json.hpp>
#include <string>

#include "command.h"
#include "nightlora/host/memory_plan.h"
#include "nightlora/host/memory_budget.h"
#include "peak_kernels.h"
#include "nightlora/host/step_bench.h"
#include "nightlora/modelio/model.h"
#include "nightlora/modelio/synth.h"
#include "nightlora/quant/qtype.h"
#include "nightlora/util/error.h"

namespace {

namespace fs = std::filesystem;

struct BenchStepArgs {
  std::string model, preset, type = "q4_0", loss = "all", max_memory, json;
  double peak_seconds = 0.5;
  int64_t layers = 0;
  nl::StepBenchOptions opt = [] {
    nl::StepBenchOptions o;
    o.keep_blocks = 0;  // not given: the default memory budget decides
    return o;
  }();
};

// A folder removed when the command ends (the synthetic model lives there).
struct ScratchDir {
  fs::path path;
  ScratchDir() {
    path = fs::temp_directory_path() / ("nightlora-bench-step-" + std::to_string(::getpid()));
    fs::create_directories(path);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

int run_bench_step(BenchStepArgs& a) {
  if (a.model.empty() == a.preset.empty())
    nl::fail("bench-step", "give exactly one of --model FILE and --preset NAME", "see nightlora bench-step --help");
  a.opt.completion_only = a.loss == "completion";
  if (!a.max_memory.empty()) {
    a.opt.max_memory = nl::parse_memory_size(a.max_memory);
  } else if (a.opt.keep_blocks == 0) {  // neither: the default budget, as train
    const nl::MemoryBudget budget = nl::default_memory_budget(nl::read_memory_state(), false);
    a.opt.max_memory = budget.bytes;
    a.opt.max_memory_rule = budget.rule;
    a.opt.keep_blocks = 1;
  }
  std::unique_ptr<ScratchDir> scratch;
  std::string path = a.model;
  if (!a.preset.empty()) {
    nl::SynthOptions so;
    so.preset = a.preset;
    so.type = nl::parse_quant_target(a.type);
    so.layers = a.layers;
    so.tokenizer = "generated";  // the step never reads text
    scratch = std::make_unique<ScratchDir>();
    path = (scratch->path / (a.preset + "-" + a.type + ".gguf")).string();
    std::fprintf(stderr, "bench-step: writing a synthetic %s model (%s) to %s\n", a.preset.c_str(), a.type.c_str(),
                 path.c_str());
    nl::synth_model(path, so, [](const std::string& s) { std::cerr << s << "\n"; });
  } else if (a.layers > 0 || a.type != "q4_0") {
    std::cerr << "nightlora: warning: --type and --layers apply to --preset only; the model file is used as it is\n";
  }
  const auto model = nl::Model::load(path);
  const nl::ModelConfig& c = model->config;
  std::printf("model: %s (%s, %lld layers, d_model %lld, d_ff %lld, vocab %lld)\n", path.c_str(), nl::arch_name(c.arch),
              static_cast<long long>(c.n_layer), static_cast<long long>(c.d_model), static_cast<long long>(c.d_ff),
              static_cast<long long>(c.vocab));
  std::printf("step: seq %lld, rank %lld, targets %s, loss on %s, precision %s, %lld timed steps after one warm-up\n",
              static_cast<long long>(a.opt.seq), static_cast<long long>(a.opt.rank), a.opt.targets.c_str(),
              a.loss.c_str(), a.opt.precision.c_str(), static_cast<long long>(a.opt.steps));
  std::fflush(stdout);
  const nl::StepBenchResult r = nl::run_step_bench(*model, a.opt, [](const std::string& s) {
    std::fprintf(stderr, "%s\n", s.c_str());
  });
  std::printf("memory plan: %s\n", r.plan.describe().c_str());
  std::printf("%s", nl::format_step_breakdown(r).c_str());
  nl::PeakRates peak;
  if (a.peak_seconds > 0) {
    // The peaks of the instructions the engine's kernels use, on its threads, measured now
    // (the machine's speed moves within minutes: nl_bench_peak's figures from another time
    // would not do).
    // The engine's isa() names its int8 set ("avx2, int8 avx512-vnni"). Without VNNI the
    // fastest int8 sequence is the Q4_0 kernels' own (vpmaddubsw summed in int16, widened once
    // per 8; twice the rate of widening every product on Zen 3), so that is the peak.
    const auto uses = [&](const char* set) { return r.engine_isa.find(set) != std::string::npos; };
    const double cpu0 = nl::process_cpu_seconds();
    const nlbench::PeakFigure i8 = uses("avx512-vnni") ? nlbench::measure_int8_dot_avx512_vnni_peak(r.engine_threads, a.peak_seconds)
                                   : uses("vnni")      ? nlbench::measure_int8_dot_vnni_peak(r.engine_threads, a.peak_seconds)
                                                       : nlbench::measure_int8_dot_i16acc_peak(r.engine_threads, a.peak_seconds);
    const double cpu1 = nl::process_cpu_seconds();
    const nlbench::PeakFigure f32 = nlbench::measure_f32_fma_peak(r.engine_threads, a.peak_seconds);
    const double cpu2 = nl::process_cpu_seconds();
    peak.int8_ops_per_s = i8.per_second();
    peak.f32_flops_per_s = f32.per_second();
    peak.int8_isa = i8.isa;
    peak.f32_isa = f32.isa;
    // Per CPU second as well (the roofline's CPU-time line; this process runs nothing else now).
    if (cpu1 > cpu0 && cpu2 > cpu1) {
      peak.int8_ops_per_cpu_s = i8.ops / (cpu1 - cpu0);
      peak.f32_flops_per_cpu_s = f32.ops / (cpu2 - cpu1);
    }
    std::printf("%s", nl::format_roofline(r, peak).c_str());
  }
  if (!a.json.empty()) {
    std::ofstream f(a.json);
    if (!f) nl::fail(a.json, "cannot open for writing", "check the folder exists and is writable");
    nlohmann::json j = nlohmann::json::parse(
        nl::step_bench_json(r, a.opt, a.model.empty() ? "preset:" + a.preset + ":" + a.type : a.model));
    j["peak_int8_gops"] = peak.int8_ops_per_s / 1e9;
    j["peak_f32_gflops"] = peak.f32_flops_per_s / 1e9;
    f << j.dump() << "\n";
  }
  return 0;
}

nlcli::Register reg_bench_step(
    "bench-step",
    "Run a few LoRA training steps on a model (or a synthetic preset) and print the step-time breakdown, tokens/s, "
    "peak RSS and the memory plan",
    [](CLI::App& sub) -> nlcli::Run {
      auto a = std::make_shared<BenchStepArgs>();
      sub.add_option("-m,--model", a->model, "GGUF file or Hugging Face folder");
      sub.add_option("-p,--preset", a->preset, "instead of --model: a synthetic model of these shapes (see synth-model --list)");
      sub.add_option("--type", a->type, "with --preset: type of the weight matrices")->capture_default_str();
      sub.add_option("--layers", a->layers, "with --preset: number of decoder blocks (default: the preset's)")
          ->check(CLI::Range(int64_t{1}, int64_t{4096}));
      sub.add_option("--seq", a->opt.seq, "tokens per step (one sequence)")->capture_default_str()
          ->check(CLI::Range(int64_t{2}, int64_t{1} << 20));
      sub.add_option("--rank", a->opt.rank, "LoRA rank")->capture_default_str()->check(CLI::PositiveNumber);
      sub.add_option("--targets", a->opt.targets, "adapted projections: q,k,v,o,gate,up,down or all")->capture_default_str();
      sub.add_option("--loss", a->loss, "supervised positions: all, or completion (the second half only)")
          ->capture_default_str()->check(CLI::IsMember({"all", "completion"}));
      sub.add_option("--steps", a->opt.steps, "timed steps (after one untimed warm-up)")->capture_default_str()
          ->check(CLI::PositiveNumber);
      sub.add_option("-t,--threads", a->opt.threads, "engine threads (0 = all cores)")->check(CLI::NonNegativeNumber);
      sub.add_option("--host-threads", a->opt.host_threads,
                     "threads of the host's work that overlaps engine products (the rest uses --threads)")
          ->capture_default_str()->check(CLI::PositiveNumber);
      sub.add_option("--max-memory", a->max_memory,
                     "memory budget (bytes, or with KiB/MiB/GiB): keep as many blocks' activations as fit, "
                     "refuse when even full recompute does not fit");
      sub.add_option("--keep-blocks", a->opt.keep_blocks,
                     "instead of a budget: blocks whose activations are kept (default: as many as fit half of the "
                     "memory available now, as train)")
          ->check(CLI::PositiveNumber);
      sub.add_option("--precision", a->opt.precision,
                     "auto (a plan calibrated as train's default does) or the mode of every frozen product: f32, f16, int8")
          ->capture_default_str();
      sub.add_option("--peak-seconds", a->peak_seconds,
                     "time to measure each peak (int8, f32) for the roofline line after the steps; 0: no roofline")
          ->capture_default_str()->check(CLI::NonNegativeNumber);
      sub.add_option("--engine", a->opt.engine, "frozen-engine backend: cpu, vulkan or auto")
          ->capture_default_str()
          ->check(CLI::IsMember({"auto", "cpu", "vulkan"}));
      sub.add_option("--json", a->json, "also write the figures as one JSON object to this file");
      return [a]() { return run_bench_step(*a); };
    });

}  // namespace
