// nl_bench_step: our side of the side-by-side trainer benchmark (issue 5). Loads a model,
// runs a few LoRA training steps (forward + backward through TrainStep and the frozen
// engine, then AdamW) on one random sequence, and prints tokens/s and peak RSS. The first
// step is a warm-up (page faults of the mapped weights, allocations) and is not timed.
//   nl_bench_step --model M.gguf [--seq 256] [--rank 8] [--targets all] [--loss all|completion]
//                 [--steps 3] [--threads 0] [--json FILE]
// It stands in for `nightlora bench-step` until that command exists.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>

#include <CLI/CLI.hpp>

#include "nightlora/data/batch.h"
#include "nightlora/engine/frozen_engine.h"
#include "nightlora/host/lora.h"
#include "nightlora/host/optimizer.h"
#include "nightlora/host/train_step.h"
#include "nightlora/modelio/model.h"
#include "nightlora/util/error.h"

namespace {

double peak_rss_mib() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;  // Linux reports KiB
}

// One sequence of `seq` random tokens; every position but the last predicts the next
// token ("all"), or only those in the second half ("completion": a prompt + completion
// example whose loss is on the completion).
nl::Batch random_batch(int64_t seq, int64_t vocab, bool completion_only, uint32_t seed) {
  nl::Batch b;
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(vocab - 1));
  for (int64_t t = 0; t < seq; ++t) b.tokens.push_back(tok(rng));
  for (int64_t t = 0; t < seq; ++t) {
    const bool supervised = t + 1 < seq && (!completion_only || t >= seq / 2);
    b.labels.push_back(supervised ? b.tokens[static_cast<size_t>(t + 1)] : -1);
  }
  b.seq_start = {0, seq};
  return b;
}

// Resets the kernel's VmHWM (Linux >= 4.0) so training's own peak can be read apart from
// loading's; false when the kernel does not allow it.
bool reset_peak_rss() {
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
  f.flush();
  return static_cast<bool>(f);
}

double vm_hwm_mib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Runs a few LoRA training steps on a model and prints tokens/s and peak RSS."};
  std::string model_path, targets = "all", loss = "all", json_path;
  int64_t seq = 256, rank = 8, steps = 3;
  int threads = 0;
  app.add_option("--model", model_path, "GGUF file or Hugging Face folder")->required();
  app.add_option("--seq", seq, "tokens per step (one sequence)")->check(CLI::Range(int64_t{2}, int64_t{1} << 20));
  app.add_option("--rank", rank, "LoRA rank")->check(CLI::PositiveNumber);
  app.add_option("--targets", targets, "adapted projections: q,k,v,o,gate,up,down or all");
  app.add_option("--loss", loss, "supervised positions: all, or completion (second half only)")
      ->check(CLI::IsMember({"all", "completion"}));
  app.add_option("--steps", steps, "timed steps (after one untimed warm-up step)")->check(CLI::PositiveNumber);
  app.add_option("--threads", threads, "threads for the engine and the host ops (0: all cores)");
  app.add_option("--json", json_path, "also write the figures as one JSON object to this file");
  CLI11_PARSE(app, argc, argv);

  try {
    const auto t_load = std::chrono::steady_clock::now();
    const auto model = nl::Model::load(model_path);
    nl::EngineOptions eo;
    eo.threads = threads;
    const auto engine = nl::make_engine(*model, eo);
    const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count();

    nl::LoraConfig lc;
    lc.rank = rank;
    lc.alpha = 2.0f * static_cast<float>(rank);
    lc.targets = nl::LoraConfig::parse_targets(targets);
    nl::LoraAdapter adapter = nl::LoraAdapter::init(model->config, lc);
    nl::LoraAdapter grads = adapter.zeros_like();
    nl::AdamW optimizer(adapter, nl::AdamWOptions{});
    nl::StepOptions so;
    so.threads = threads;
    nl::TrainStep step(*model, *engine, so);
    const nl::Batch batch = random_batch(seq, model->config.vocab, loss == "completion", 1234);

    // Resetting VmHWM also resets ru_maxrss, so the loading peak is read first.
    const double load_rss = peak_rss_mib();
    const bool hwm_reset = reset_peak_rss();
    double loss_sum = 0, timed_s = 0;
    for (int64_t i = 0; i <= steps; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      grads = adapter.zeros_like();
      const nl::StepResult r = step.forward_backward(batch, adapter, grads, 1.0f / static_cast<float>(batch.n_supervised()),
                                                     static_cast<uint64_t>(i));
      optimizer.step(adapter, grads, 1e-4);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (i > 0) timed_s += s;  // step 0 is the warm-up
      loss_sum = r.loss_sum;
      std::fprintf(stderr, "step %lld: %.2f s, mean loss %.4f%s\n", static_cast<long long>(i), s,
                   r.loss_sum / static_cast<double>(r.n_supervised), i == 0 ? " (warm-up, not timed)" : "");
    }
    const double tok_s = static_cast<double>(seq * steps) / timed_s;
    const double train_rss = hwm_reset ? vm_hwm_mib() : -1;
    const double rss = std::max(load_rss, peak_rss_mib());
    std::printf("model: %s\nseq %lld, rank %lld, targets %s, loss on %s (%lld supervised), threads %d, %lld timed steps\n",
                model_path.c_str(), static_cast<long long>(seq), static_cast<long long>(rank), targets.c_str(),
                loss.c_str(), static_cast<long long>(batch.n_supervised()), engine->threads(),
                static_cast<long long>(steps));
    std::printf("load %.1f s; step %.2f s; %.1f tokens/s; peak RSS %.0f MiB (while training: %.0f MiB); engine "
                "resident %.0f MiB; last loss sum %.3f\n",
                load_s, timed_s / static_cast<double>(steps), tok_s, rss, train_rss,
                static_cast<double>(engine->resident_bytes()) / (1 << 20), loss_sum);
    if (!json_path.empty()) {
      std::ofstream f(json_path);
      if (!f) nl::fail(json_path, "cannot open for writing", "check the folder exists and is writable");
      f << "{\"trainer\":\"nightlora\",\"seq\":" << seq << ",\"rank\":" << rank << ",\"loss\":\"" << loss
        << "\",\"threads\":" << engine->threads() << ",\"steps\":" << steps << ",\"step_s\":" << timed_s / steps
        << ",\"tokens_per_s\":" << tok_s << ",\"peak_rss_mib\":" << rss << ",\"train_peak_rss_mib\":" << train_rss << "}\n";
    }
  } catch (const nl::Error& e) {
    std::fprintf(stderr, "nl_bench_step: %s\n", e.what());
    return 1;
  }
  return 0;
}
