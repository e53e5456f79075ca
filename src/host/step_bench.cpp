// The training-step benchmark: the same TrainStep, memory plan and optimizer as `train`,
// on a random sequence, with each step's breakdown.
#include "nightlora/host/step_bench.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "nightlora/data/batch.h"
#include "nightlora/engine/frozen_engine.h"
#include "nightlora/host/lora.h"
#include "nightlora/host/optimizer.h"
#include "nightlora/host/precision_plan.h"
#include "nightlora/host/train_step.h"
#include "nightlora/util/error.h"

namespace nl {
namespace {

// One sequence of `seq` random tokens; every position but the last predicts the next token,
// or only those in the second half (a prompt + completion example with the loss on the
// completion).
Batch random_batch(int64_t seq, int64_t vocab, bool completion_only, uint32_t seed) {
  Batch b;
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

// Resets the kernel's VmHWM (Linux >= 4.0) so training's own peak reads apart from loading's.
bool reset_peak_rss() {
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
  f.flush();
  return static_cast<bool>(f);
}

size_t vm_hwm_bytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return static_cast<size_t>(std::stoll(line.substr(6))) * 1024;
  return 0;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

StepBenchResult run_step_bench(const Model& model, const StepBenchOptions& opt,
                               const std::function<void(const std::string&)>& progress) {
  if (opt.seq < 2) fail("--seq " + std::to_string(opt.seq), "needs at least 2 tokens");
  if (opt.steps < 1) fail("--steps " + std::to_string(opt.steps), "must be at least 1");
  if (opt.host_threads < 1) fail("--host-threads " + std::to_string(opt.host_threads), "must be at least 1");
  LoraConfig lc;
  lc.rank = opt.rank;
  lc.alpha = 2.0f * static_cast<float>(opt.rank);
  lc.targets = LoraConfig::parse_targets(opt.targets);
  const bool auto_precision = opt.precision == "auto";
  const Precision mode = auto_precision ? Precision::F32 : parse_precision(opt.precision);
  LoraAdapter adapter = LoraAdapter::init(model.config, lc);

  StepBenchResult r;
  MemoryRequest mr;
  mr.max_tokens = opt.seq;
  mr.rank = opt.rank;
  mr.n_adapter_params = adapter.n_params();
  mr.max_memory = opt.max_memory;
  mr.budget_rule = opt.max_memory_rule;
  mr.keep_blocks = opt.keep_blocks;
  // As train's plan: the process measured now (less the adapter, which the plan counts), the
  // int8 staging and the calibration (auto) this run will have. No rollback point nor saves.
  const size_t resident = process_resident_bytes(), adapter_now = static_cast<size_t>(adapter.n_params()) * sizeof(float);
  mr.resident_bytes = resident > adapter_now ? resident - adapter_now : 0;
  mr.int8_products = opt.precision != "f32" && opt.precision != "f16";
  if (auto_precision) {
    mr.calibration_tokens = std::min(opt.seq, opt.precision_calib_tokens);
    mr.calibration_replay_bytes = kGroupSearchReplayBytes;  // as the calibration below
  }
  r.plan = plan_step_memory(model, mr);  // refuses before the engine is built

  const auto t_load = std::chrono::steady_clock::now();
  EngineOptions eo;
  eo.threads = opt.threads;
  eo.backend = opt.engine;
  const auto engine = make_engine(model, eo);
  r.load_s = seconds_since(t_load);
  r.engine_threads = engine->threads();
  r.engine_isa = engine->isa();

  r.precision = PrecisionPlan::uniform(model.config.n_layer, mode);
  if (auto_precision) {  // as train does by default, on this run's random tokens
    const auto t_calib = std::chrono::steady_clock::now();
    CalibrationOptions co;
    co.tol = opt.precision_tol;
    co.max_passes = opt.precision_calib_passes;
    co.threads = opt.threads;
    // train's group search records this much of the reference pass, not CalibrationOptions'
    // 512 MiB: with that, bench-step calibrated unlike train, and its plan counted half of a
    // 476 MiB recording as left held in the training phase, which the allocator had in fact
    // handed back (qwen2.5-0.5b Q4_0, seq 256: estimate 1187 MiB, peak 998 MiB; now 965 and 996).
    co.replay_bytes = kGroupSearchReplayBytes;
    const Batch calib = random_batch(std::min(opt.seq, opt.precision_calib_tokens), model.config.vocab,
                                     opt.completion_only, 4321);
    CalibrationResult cr = calibrate_precision(model, *engine, calib, adapter, co);
#ifdef __GLIBC__
    malloc_trim(0);  // as the trainer does after calibrating: the step's peak then does not
                     // stack on the freed calibration pages glibc keeps (up to 130 MiB here)
#endif
    r.precision = std::move(cr.plan);
    r.calib_passes = cr.passes;
    r.calib_s = seconds_since(t_calib);
    if (progress) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "precision auto: calibrated in %.2f s (%lld passes): %lld int8, %lld f16, %lld f32 products",
                    r.calib_s, static_cast<long long>(cr.passes), static_cast<long long>(r.precision.count(Precision::Int8)),
                    static_cast<long long>(r.precision.count(Precision::F16)),
                    static_cast<long long>(r.precision.count(Precision::F32)));
      progress(buf);
    }
  }
  StepOptions so;
  so.threads = opt.threads;
  so.host_threads = opt.host_threads;
  so.memory = &r.plan;
  so.precision = r.precision.all(Precision::F32) ? nullptr : &r.precision;
  TrainStep step(model, *engine, so);
  r.host_threads = opt.host_threads;
  r.arena_bytes = step.arena_bytes();
  LoraAdapter grads = adapter.zeros_like();
  AdamW optimizer(adapter, AdamWOptions{});
  const Batch batch = random_batch(opt.seq, model.config.vocab, opt.completion_only, 1234);
  r.tokens = batch.n_tokens();
  r.supervised = batch.n_supervised();

  // Resetting VmHWM also resets ru_maxrss, so the loading peak is read first.
  const size_t load_rss = peak_rss_bytes();
  const bool hwm_reset = reset_peak_rss();
  double timed_s = 0, timed_cpu_s = 0;
  for (int64_t i = 0; i <= opt.steps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const double cpu0 = process_cpu_seconds();
    for (LoraPair& p : grads.pairs) {
      std::fill(p.A.begin(), p.A.end(), 0.0f);
      std::fill(p.B.begin(), p.B.end(), 0.0f);
    }
    const StepResult res = step.forward_backward(batch, adapter, grads, 1.0f / static_cast<float>(r.supervised),
                                                 static_cast<uint64_t>(i));
    const auto t_opt = std::chrono::steady_clock::now();
    clip_grad_norm(grads, 1.0);
    optimizer.step(adapter, grads, 1e-4);
    StepTiming t = step.last_timing();
    t.optimizer_s = seconds_since(t_opt);
    t.wall_s = seconds_since(t0);
    t.other_s += std::max(0.0, t.wall_s - t.host_sum_s());  // zeroing the gradients
    r.last_loss = res.loss_sum / static_cast<double>(std::max<int64_t>(res.n_supervised, 1));
    if (progress) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "step %lld: %.2f s, mean loss %.4f%s", static_cast<long long>(i), t.wall_s,
                    r.last_loss, i == 0 ? " (warm-up, not timed)" : "");
      progress(buf);
    }
    if (i == 0) continue;
    timed_s += t.wall_s;
    timed_cpu_s += process_cpu_seconds() - cpu0;
    r.steps.push_back(t);
    r.mean += t;
  }
  const double n = static_cast<double>(r.steps.size());
  r.mean *= 1.0 / n;
  r.cpu_s = timed_cpu_s / n;
  r.tokens_per_s = timed_s > 0 ? static_cast<double>(r.tokens) * n / timed_s : 0.0;
  r.train_peak_rss_bytes = hwm_reset ? vm_hwm_bytes() : 0;
  r.peak_rss_bytes = std::max(load_rss, peak_rss_bytes());
  return r;
}

std::string format_step_breakdown(const StepBenchResult& r) {
  const StepTiming& m = r.mean;
  std::string out;
  char buf[256];
  auto row = [&](const char* name, double s, double of) {
    std::snprintf(buf, sizeof buf, "  %-38s %9.3f s %6.1f %%\n", name, s, of > 0 ? 100.0 * s / of : 0.0);
    out += buf;
  };
  std::snprintf(buf, sizeof buf, "step time breakdown (mean of %zu timed steps, %lld tokens, %lld supervised):\n",
                r.steps.size(), static_cast<long long>(r.tokens), static_cast<long long>(r.supervised));
  out += buf;
  out += "  host thread (sums to the step)             seconds   share\n";
  row("adapter (LoRA) products", m.adapter_s, m.wall_s);
  row("attention", m.attention_s, m.wall_s);
  row("other host ops", m.other_s, m.wall_s);
  row("optimizer (clip + AdamW)", m.optimizer_s, m.wall_s);
  row("waiting for the engine", m.wait_s, m.wall_s);
  row("step (wall)", m.wall_s, m.wall_s);
  std::snprintf(buf, sizeof buf, "  %-38s    seconds   share\n",
                ("frozen engine, busy (" + std::to_string(m.products) + " products)").c_str());
  out += buf;
  row("frozen forward", m.frozen_forward_s, m.wall_s);
  row("frozen recompute", m.frozen_recompute_s, m.wall_s);
  row("frozen input gradient", m.frozen_input_grad_s, m.wall_s);
  row("frozen products, total", m.frozen_s(), m.wall_s);
  row("overlap (engine busy, host computing)", m.overlap_s(), m.wall_s);
  row("outside the three frozen products", m.outside_frozen_s(), m.wall_s);
  std::snprintf(buf, sizeof buf, "  %-38s %9.3f s (%.2f cores busy on average)\n", "process CPU time (all threads)", r.cpu_s,
                m.wall_s > 0 ? r.cpu_s / m.wall_s : 0.0);
  out += buf;
  const double mib = 1024.0 * 1024.0;
  std::snprintf(buf, sizeof buf,
                "tokens/s %.1f; peak RSS %.0f MiB (while training %.0f MiB); arena %.1f MiB; engine %s, %d threads; "
                "host threads while the engine runs: %d\n",
                r.tokens_per_s, static_cast<double>(r.peak_rss_bytes) / mib,
                static_cast<double>(r.train_peak_rss_bytes) / mib, static_cast<double>(r.arena_bytes) / mib,
                r.engine_isa.c_str(), r.engine_threads, r.host_threads);
  out += buf;
  return out;
}

std::string format_roofline(const StepBenchResult& r, const PeakRates& peak) {
  if (!(peak.int8_ops_per_s > 0) || !(peak.f32_flops_per_s > 0)) return "";
  const StepTiming& m = r.mean;
  const double at_peak_s = m.frozen_ops_int8 / peak.int8_ops_per_s + m.frozen_ops_float / peak.f32_flops_per_s;
  // The same in CPU time: the peaks' operations per CPU second of their threads against the
  // step's CPU time (all threads). On a machine shared with other jobs the wall times
  // stretch with the load, the CPU times less (though a VM's vCPU still runs slower, and
  // is charged more, while another job shares its physical core: compare side by side).
  // Without the peaks' CPU times: the wall peak keeping every engine thread busy.
  const double at_peak_cpu_s = peak.int8_ops_per_cpu_s > 0 && peak.f32_flops_per_cpu_s > 0
                                   ? m.frozen_ops_int8 / peak.int8_ops_per_cpu_s + m.frozen_ops_float / peak.f32_flops_per_cpu_s
                                   : at_peak_s * r.engine_threads;
  char buf[1024];
  std::snprintf(buf, sizeof buf,
                "roofline: frozen products %.1f G int8 ops + %.1f GFLOP f32 per step; peaks measured now on %d threads: "
                "int8 %.0f GOP/s (%s), f32 %.0f GFLOP/s (%s)\n"
                "  at those peaks the products would take %.3f s: %.1f %% of the step (%.3f s), %.1f %% of the engine's "
                "busy time (%.3f s); achieved %.0f G ops/s over the step\n"
                "  in CPU time: at the peaks per CPU second the products would take %.3f CPU-s, %.1f %% of the step's %.3f "
                "CPU-s (all threads)\n",
                m.frozen_ops_int8 / 1e9, m.frozen_ops_float / 1e9, r.engine_threads, peak.int8_ops_per_s / 1e9,
                peak.int8_isa.c_str(), peak.f32_flops_per_s / 1e9, peak.f32_isa.c_str(), at_peak_s,
                m.wall_s > 0 ? 100.0 * at_peak_s / m.wall_s : 0.0, m.wall_s, m.frozen_s() > 0 ? 100.0 * at_peak_s / m.frozen_s() : 0.0,
                m.frozen_s(), m.wall_s > 0 ? (m.frozen_ops_int8 + m.frozen_ops_float) / m.wall_s / 1e9 : 0.0,
                at_peak_cpu_s, r.cpu_s > 0 ? 100.0 * at_peak_cpu_s / r.cpu_s : 0.0, r.cpu_s);
  return buf;
}

std::string step_bench_json(const StepBenchResult& r, const StepBenchOptions& opt, const std::string& model_path) {
  const StepTiming& m = r.mean;
  const double mib = 1024.0 * 1024.0;
  nlohmann::json j = {{"trainer", "nightlora"},
                      {"model", model_path},
                      {"seq", opt.seq},
                      {"rank", opt.rank},
                      {"targets", opt.targets},
                      {"loss", opt.completion_only ? "completion" : "all"},
                      {"threads", r.engine_threads},
                      {"engine_isa", r.engine_isa},
                      {"host_threads", r.host_threads},
                      {"precision", opt.precision},
                      {"precision_counts", {{"int8", r.precision.count(Precision::Int8)},
                                            {"f16", r.precision.count(Precision::F16)},
                                            {"f32", r.precision.count(Precision::F32)}}},
                      {"calib_s", r.calib_s},
                      {"frozen_ops_int8", m.frozen_ops_int8},
                      {"frozen_ops_f32", m.frozen_ops_float},
                      {"steps", static_cast<int64_t>(r.steps.size())},
                      {"step_s", m.wall_s},
                      {"tokens_per_s", r.tokens_per_s},
                      {"cpu_s", r.cpu_s},
                      {"peak_rss_mib", static_cast<double>(r.peak_rss_bytes) / mib},
                      {"train_peak_rss_mib", r.train_peak_rss_bytes ? static_cast<double>(r.train_peak_rss_bytes) / mib : -1.0},
                      {"arena_mib", static_cast<double>(r.arena_bytes) / mib},
                      {"estimated_peak_mib", static_cast<double>(r.plan.estimated_peak_bytes()) / mib},
                      {"kept_blocks", r.plan.kept_blocks},
                      {"n_layer", r.plan.n_layer},
                      {"adapter_s", m.adapter_s},
                      {"attention_s", m.attention_s},
                      {"other_s", m.other_s},
                      {"optimizer_s", m.optimizer_s},
                      {"wait_s", m.wait_s},
                      {"frozen_forward_s", m.frozen_forward_s},
                      {"frozen_recompute_s", m.frozen_recompute_s},
                      {"frozen_input_grad_s", m.frozen_input_grad_s},
                      {"overlap_s", m.overlap_s()},
                      {"outside_frozen_share", m.wall_s > 0 ? m.outside_frozen_s() / m.wall_s : 0.0},
                      {"last_loss", r.last_loss}};
  return j.dump();
}

}  // namespace nl
