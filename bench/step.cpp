// nl_bench_step: the training-step benchmark as a standalone program. A thin wrapper over the
// library code behind `nightlora bench-step` (nl::run_step_bench): same step, same memory
// plan, same breakdown; bench/run_step.sh uses the CLI command.
//   nl_bench_step --model M.gguf [--seq 256] [--rank 8] [--targets all] [--loss all|completion]
//                 [--steps 3] [--threads 0] [--host-threads 1] [--max-memory SIZE] [--json FILE]
#include <cstdio>
#include <fstream>
#include <string>

#include <CLI/CLI.hpp>

#include "nightlora/host/memory_plan.h"
#include "nightlora/host/step_bench.h"
#include "nightlora/modelio/model.h"
#include "nightlora/util/error.h"

int bench_step_main(int argc, char** argv) {
  CLI::App app{"Runs a few LoRA training steps on a model and prints the step-time breakdown, tokens/s and peak RSS."};
  std::string model_path, loss = "all", json_path, max_memory;
  nl::StepBenchOptions opt;
  app.add_option("--model", model_path, "GGUF file or Hugging Face folder")->required();
  app.add_option("--seq", opt.seq, "tokens per step (one sequence)")->check(CLI::Range(int64_t{2}, int64_t{1} << 20));
  app.add_option("--rank", opt.rank, "LoRA rank")->check(CLI::PositiveNumber);
  app.add_option("--targets", opt.targets, "adapted projections: q,k,v,o,gate,up,down or all");
  app.add_option("--loss", loss, "supervised positions: all, or completion (second half only)")
      ->check(CLI::IsMember({"all", "completion"}));
  app.add_option("--steps", opt.steps, "timed steps (after one untimed warm-up step)")->check(CLI::PositiveNumber);
  app.add_option("--threads", opt.threads, "engine threads (0: all cores)");
  app.add_option("--host-threads", opt.host_threads, "host threads while engine products run")->check(CLI::PositiveNumber);
  app.add_option("--max-memory", max_memory, "memory budget of the step's plan (bytes or KiB/MiB/GiB)");
  app.add_option("--json", json_path, "also write the figures as one JSON object to this file");
  CLI11_PARSE(app, argc, argv);
  try {
    opt.completion_only = loss == "completion";
    if (!max_memory.empty()) opt.max_memory = nl::parse_memory_size(max_memory);
    const auto model = nl::Model::load(model_path);
    const nl::StepBenchResult r =
        nl::run_step_bench(*model, opt, [](const std::string& s) { std::fprintf(stderr, "%s\n", s.c_str()); });
    std::printf("model: %s\nmemory plan: %s\n%s", model_path.c_str(), r.plan.describe().c_str(),
                nl::format_step_breakdown(r).c_str());
    if (!json_path.empty()) {
      std::ofstream f(json_path);
      if (!f) nl::fail(json_path, "cannot open for writing", "check the folder exists and is writable");
      f << nl::step_bench_json(r, opt, model_path) << "\n";
    }
  } catch (const nl::Error& e) {
    std::fprintf(stderr, "nl_bench_step: %s\n", e.what());
    return 1;
  }
  return 0;
}
