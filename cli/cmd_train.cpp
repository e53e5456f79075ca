// `nightlora train --model M --data train.jsonl [--valid v.jsonl] --out DIR ...`: LoRA
// fine-tuning. Everything the run needs (model, data, adapter settings) is loaded and
// checked before DIR is touched, so a bad input leaves nothing behind. DIR then receives
// log.jsonl (one JSON object per step and per validation, written as training goes) and,
// at the end, the adapter in both formats: adapter_model.safetensors + adapter_config.json
// (PEFT) and adapter.gguf (llama.cpp LoRA).
//
// The run is resumable: DIR/checkpoints/ receives checkpoints (every --save-every steps, every
// --save-every-sec seconds, on SIGINT/SIGTERM, at the end; the newest --keep kept). Running the
// same command again in the same DIR (or with --resume) continues from the newest good one,
// and ends with the same bytes as a run that was never interrupted.
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <ctime>
#include <sstream>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include "command.h"
#include "train_precision.h"
#include "nightlora/data/dataset.h"
#include "nightlora/host/adapter_io.h"
#include "nightlora/host/checkpoint.h"
#include "nightlora/host/lora.h"
#include "nightlora/host/memory_plan.h"
#include "nightlora/host/trainer.h"
#include "nightlora/job/atomic_file.h"
#include "nightlora/job/background_gate.h"
#include "nightlora/job/energy.h"
#include "nightlora/job/live_thermal_sim.h"
#include "nightlora/job/pacer.h"
#include "nightlora/job/priority.h"
#include "nightlora/job/checkpoint_store.h"
#include "nightlora/job/stop_signals.h"
#include "nightlora/modelio/model.h"
#include "nightlora/tokenizer/tokenizer.h"
#include "nightlora/util/error.h"

namespace {

namespace fs = std::filesystem;

struct TrainArgs {
  std::string model, data, valid, out, adapter;
  int64_t rank = 8;
  float alpha = 16.0f;
  float dropout = 0.0f;
  std::string targets = "q,k,v,o,gate,up,down";
  uint64_t lora_seed = 0;
  double lr = 1e-4;
  std::string schedule = "cosine";
  int64_t warmup = 0;
  int64_t epochs = 1;
  int64_t iters = 0;
  int64_t batch = 4;
  int64_t grad_accum = 1;
  int64_t seq_len = 512;
  uint64_t seed = 0;
  int threads = 0;
  std::string engine = "cpu";  // frozen-engine backend
  int host_threads = 1;     // host threads while engine products run (core sharing)
  std::string max_memory;   // memory budget of the step's plan ("" = keep only the last block)
  std::string train_on = "completion";
  std::string chat_format;
  int64_t val_every = 0;
  double weight_decay = 0.0;
  double clip = 1.0;
  std::string method = "first-order";  // or "mezo" (forward-only)
  double mezo_eps = 1e-3;
  // Checkpoints and resume.
  int64_t save_every = 50;
  double save_every_sec = 300;
  int keep = 3;
  bool resume = false;
  int64_t max_steps = 0;  // stop (with a checkpoint) after this many steps in this session
  // Background mode.
  bool background = false;
  bool normal_priority = false;  // background mode without idle priority (benchmarks on a shared machine)
  bool require_power = false;
  double min_battery = -1;
  std::string window;
  double max_wall = 0;
  double max_energy = 0;
  std::string sysfs_root = "/sys";
  double recheck_sec = 60;
  // Thermal pacing.
  double temp_ceiling = 0;
  double duty = 0;
  std::string temp_source = "auto";
  nlcli::PrecisionArgs precision;  // --precision, --precision-tol, --precision-calib-tokens
  double pace_poll_sec = 1.0;
  std::string fake_clock;  // hidden, for tests: "HH:MM[:SS],S" (see parse_fake_clock)
};

// --fake-clock "HH:MM[:SS],S" (hidden, for tests of time windows): background mode's clock
// starts at that local time of day, moves S seconds per training step and jumps through
// waits instead of sleeping, so a night's schedule plays out in a second.
std::pair<double, double> parse_fake_clock(const std::string& text) {
  int h = 0, m = 0, sec = 0, used = 0;
  double step = 0;
  const char* c = text.c_str();
  const bool ok = (std::sscanf(c, "%d:%d:%d,%lf%n", &h, &m, &sec, &step, &used) == 4 ||
                   (sec = 0, std::sscanf(c, "%d:%d,%lf%n", &h, &m, &step, &used) == 3)) &&
                  used == static_cast<int>(text.size()) && h >= 0 && h < 24 && m >= 0 && m < 60 && sec >= 0 && sec < 60 &&
                  step >= 0;
  if (!ok) nl::fail("--fake-clock " + text, "expected HH:MM[:SS],SECONDS_PER_STEP", "e.g. 06:59,60");
  return {h * 3600.0 + m * 60.0 + sec, step};
}

// What must match for a checkpoint to be resumed: everything that shapes the trajectory.
// Threads are left out (results do not depend on them), as are validation and logging options.
nlohmann::json run_identity(const TrainArgs& a) {
  nlohmann::json cfg = {{"lr", a.lr},           {"schedule", a.schedule},         {"warmup", a.warmup},
                        {"epochs", a.epochs},   {"iters", a.iters},               {"batch", a.batch},
                        {"grad-accum", a.grad_accum}, {"clip", a.clip},           {"seed", a.seed},
                        {"weight-decay", a.weight_decay}, {"rank", a.rank},       {"alpha", a.alpha},
                        {"dropout", a.dropout}, {"targets", a.targets},           {"lora-seed", a.lora_seed},
                        {"seq-len", a.seq_len}, {"train-on", a.train_on},         {"chat-format", a.chat_format},
                        {"adapter", a.adapter.empty() ? std::string() : nl::fingerprint_path(a.adapter)}};
  // MeZO's direction stream is a pure function of (seed, step), both above; the method and its
  // perturbation size are added only for MeZO runs so first-order checkpoints keep their identity.
  if (a.method != "first-order") {
    cfg["method"] = a.method;
    cfg["mezo-eps"] = a.mezo_eps;
  }
  nlcli::add_precision_identity(cfg, a.precision);
  return {{"model", nl::fingerprint_path(a.model)}, {"data", nl::fingerprint_path(a.data)}, {"config", cfg}};
}

// On resume, the log keeps only what the checkpoint covers: steps logged after it (by a
// session killed before its next checkpoint) are run again and logged again. A line cut by
// the kill is dropped too.
void trim_log(const fs::path& log_path, int64_t step) {
  std::error_code ec;
  if (!fs::exists(log_path, ec)) return;
  std::istringstream in(nl::read_file(log_path.string()));
  std::string line, kept;
  while (std::getline(in, line)) {
    nlohmann::json row = nlohmann::json::parse(line, nullptr, false);
    if (row.is_discarded() || !row.is_object()) continue;
    if (row.value("step", int64_t{0}) <= step) kept += line + "\n";
  }
  nl::write_file_atomic(log_path.string(), kept);
}

// VmHWM from /proc/self/status (Linux): the peak resident set size of this process.
std::optional<int64_t> process_peak_rss_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;  // "VmHWM:   123456 kB"
  return std::nullopt;
}

std::string hms(double s) {
  long t = static_cast<long>(s + 0.5);
  char buf[32];
  if (t >= 3600) std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
  else std::snprintf(buf, sizeof buf, "%ld:%02ld", t / 60, t % 60);
  return buf;
}

nl::Dataset load_data(const std::string& path, const nl::Model& m, const nl::DataOptions& opt, const char* what) {
  nl::Dataset ds = nl::load_jsonl_dataset(path, *m.tokenizer, opt);
  if (ds.n_truncated > 0)
    std::cerr << "nightlora: warning: " << path << ": " << ds.n_truncated << " example(s) longer than --seq-len "
              << opt.max_tokens << " were cut to their first " << opt.max_tokens << " tokens (" << ds.n_dropped_tokens
              << " tokens dropped)\n";
  std::printf("%s: %s, %zu examples (%s), %lld tokens, %lld supervised\n", what, path.c_str(), ds.examples.size(),
              nl::data_format_name(ds.format), static_cast<long long>(ds.n_tokens()),
              static_cast<long long>(ds.n_supervised()));
  return ds;
}

int run_train(const TrainArgs& a) {
  // Options that need no file come first: a typo fails before any loading.
  nl::TrainConfig tc;
  tc.schedule = nl::parse_schedule(a.schedule);
  nl::DataOptions dopt;
  dopt.train_on = nl::parse_train_on(a.train_on);
  dopt.max_tokens = a.seq_len;
  if (!a.chat_format.empty()) dopt.chat_format = nl::parse_chat_format(a.chat_format);
  nl::LoraConfig lc;
  lc.rank = a.rank;
  lc.alpha = a.alpha;
  lc.dropout = a.dropout;
  lc.targets = nl::LoraConfig::parse_targets(a.targets);
  lc.seed = a.lora_seed;
  tc.lr = a.lr;
  tc.warmup = a.warmup;
  tc.epochs = a.epochs;
  tc.iters = a.iters;
  tc.batch = a.batch;
  tc.grad_accum = a.grad_accum;
  tc.seed = a.seed;
  tc.threads = a.threads;
  tc.engine = a.engine;
  tc.host_threads = a.host_threads;
  if (!a.max_memory.empty()) tc.max_memory = nl::parse_memory_size(a.max_memory);
  tc.val_every = a.val_every;
  tc.clip = a.clip;
  tc.adamw.weight_decay = a.weight_decay;
  tc.method = nl::parse_train_method(a.method);
  tc.mezo_eps = a.mezo_eps;
  nlcli::check_precision_args(a.precision);
  std::optional<nl::LiveSimSpec> sim_spec;
  if (nl::is_sim_source(a.temp_source)) sim_spec = nl::parse_sim_source(a.temp_source);
  else if (a.temp_source != "auto" && a.temp_source.rfind("file:", 0) != 0 && a.temp_source.rfind("cmd:", 0) != 0)
    nl::fail("--temp-source " + a.temp_source, "unknown temperature source",
             "use auto, file:PATH, cmd:COMMAND or sim[:key=value,...]");
  if (!a.fake_clock.empty()) {
    if (!a.background) nl::fail("--fake-clock", "only background mode has a clock to fake", "add --background");
    parse_fake_clock(a.fake_clock);
  }
  std::error_code ec;
  if (fs::exists(a.out, ec) && !fs::is_directory(a.out, ec))
    nl::fail(a.out, "--out exists and is not a folder", "give a folder for the adapter and log");

  std::unique_ptr<nl::Model> model = nl::Model::load(a.model);
  if (!model->tokenizer) nl::fail(a.model, "the model has no tokenizer", "training reads text, so the model needs one");
  const nl::ModelConfig& mc = model->config;
  std::printf("model: %s (%s, %lld layers, d_model %lld, vocab %lld)\n", a.model.c_str(), nl::arch_name(mc.arch),
              static_cast<long long>(mc.n_layer), static_cast<long long>(mc.d_model), static_cast<long long>(mc.vocab));
  nl::Dataset train = load_data(a.data, *model, dopt, "train");
  std::unique_ptr<nl::Dataset> valid;
  if (!a.valid.empty()) valid = std::make_unique<nl::Dataset>(load_data(a.valid, *model, dopt, "valid"));

  nl::LoraAdapter adapter;
  if (!a.adapter.empty()) {
    adapter = nl::load_adapter(a.adapter, *model);
    adapter.cfg.dropout = a.dropout;
    std::printf("continuing from %s (its rank, alpha and targets apply)\n", a.adapter.c_str());
  } else {
    adapter = nl::LoraAdapter::init(mc, lc);
  }
  std::printf("lora: rank %lld, alpha %g, dropout %g, targets %s, %lld trainable parameters\n",
              static_cast<long long>(adapter.cfg.rank), adapter.cfg.alpha, adapter.cfg.dropout,
              adapter.cfg.targets_string().c_str(), static_cast<long long>(adapter.n_params()));

  const std::optional<nl::PrecisionPlan> plan_file = nlcli::read_precision_file(a.precision, mc.n_layer);
  const nlohmann::json identity = run_identity(a);
  nl::Trainer trainer(*model, train, valid.get(), tc, std::move(adapter));
  std::printf("training (%s): %lld steps (%lld per epoch), batch %lld x %lld accumulated, lr %g %s, warmup %lld\n",
              nl::train_method_name(tc.method), static_cast<long long>(trainer.total_steps()),
              static_cast<long long>(trainer.steps_per_epoch()), static_cast<long long>(a.batch),
              static_cast<long long>(a.grad_accum), a.lr, a.schedule.c_str(), static_cast<long long>(a.warmup));
  std::printf("memory plan: %s\n", trainer.memory_plan().describe().c_str());
  std::fflush(stdout);

  // Inputs are valid: from here on DIR is written.
  fs::create_directories(a.out, ec);
  if (ec) nl::fail(a.out, "cannot create the output folder: " + ec.message());
  const fs::path log_path = fs::path(a.out) / "log.jsonl";
  nl::CheckpointStore store((fs::path(a.out) / "checkpoints").string(), a.keep);
  std::optional<nl::LoadedCheckpoint> loaded = store.load_latest();
  int64_t tokens_before = 0;
  double elapsed_before = 0;
  std::optional<nl::PrecisionPlan> stored_plan;
  if (loaded) {
    for (const std::string& s : loaded->skipped)
      std::cerr << "nightlora: warning: damaged checkpoint skipped: " << s << "\n";
    nl::Checkpoint ck = nl::decode_checkpoint(loaded->payload, loaded->path);
    nl::check_identity(ck.meta.identity, identity, loaded->path);
    elapsed_before = ck.meta.progress.value("elapsed_s", 0.0);
    trainer.resume(ck.state, elapsed_before);
    stored_plan = ck.precision;
    tokens_before = ck.meta.progress.value("tokens", int64_t{0});
    std::printf("resuming from %s: step %lld/%lld\n", loaded->path.c_str(), static_cast<long long>(ck.state.step),
                static_cast<long long>(trainer.total_steps()));
    trim_log(log_path, ck.state.step);
  } else if (a.resume) {
    nl::fail(store.dir(), "--resume was given but there is no checkpoint to resume from",
             "run without --resume to start a new run in this folder");
  }
  nlcli::setup_precision(trainer, a.precision, loaded ? stored_plan : plan_file, loaded.has_value(), a.out,
                         mc.n_layer);
  std::ofstream log(log_path, loaded ? std::ios::app : std::ios::trunc);
  if (!log) nl::fail(log_path.string(), "cannot write the training log");

  double last_step_s = 0;  // the last step's duration, for the pacer
  // Energy is logged whenever the machine tells it, background or not.
  nl::EnergyMeter energy = nl::EnergyMeter::open(a.sysfs_root);
  // Progress figures that go into each checkpoint (not part of the trajectory).
  double elapsed_s = elapsed_before;
  int64_t tokens_total = tokens_before;
  int64_t last_saved = trainer.steps_done();
  auto save = [&](const nl::TrainState& st) {
    nl::Checkpoint ck;
    ck.meta.identity = identity;
    ck.meta.progress = {{"elapsed_s", elapsed_s}, {"tokens", tokens_total}};
    ck.state = st;
    ck.precision = trainer.precision();
    store.save(st.step, nl::encode_checkpoint(ck));
    last_saved = st.step;
  };

  // --temp-source sim: every step also runs on a simulated device that stands in for this
  // machine's thermal body (see live_thermal_sim.h). Its throttling really slows the job: the
  // extra time is slept, and the step's logged duration and tokens/s include it.
  std::unique_ptr<nl::LiveThermalSim> sim;
  if (sim_spec) {
    sim = std::make_unique<nl::LiveThermalSim>(*sim_spec);
    std::printf("thermal: %s\n", sim->describe().c_str());
  }

  const bool live = isatty(fileno(stdout));
  bool line_open = false;
  auto on_step = [&](const nl::StepReport& r) {
    const double real_s = r.tokens_per_s > 0 ? static_cast<double>(r.tokens) / r.tokens_per_s : 0.0;
    std::optional<nl::LiveSimStep> dev;
    if (sim) dev = sim->step_finished(real_s);
    const double extra_s = dev ? dev->extra_s : 0.0;
    const double step_s = real_s + extra_s;
    const double tokens_per_s = step_s > 0 ? static_cast<double>(r.tokens) / step_s : r.tokens_per_s;
    elapsed_s = r.elapsed_s + extra_s;
    tokens_total += r.tokens;
    last_step_s = step_s;
    // Energy where the machine tells it; otherwise said to be unavailable, never estimated.
    nlohmann::json row = nlohmann::json::parse(nl::step_json(r));
    row["tokens_per_s"] = tokens_per_s;
    row["elapsed_s"] = elapsed_s;
    if (auto j = energy.joules()) row["energy_j"] = *j;
    else row["energy_j"] = "unavailable";
    // The process's peak resident memory so far, for the report, unless the step's own
    // measurements already hold a resident-memory figure.
    bool has_rss = false;
    for (auto it = row.begin(); it != row.end(); ++it) has_rss |= it.key().find("rss") != std::string::npos;
    if (!has_rss)
      if (auto hwm = process_peak_rss_bytes()) row["process_peak_rss_bytes"] = *hwm;
    log << row.dump() << "\n";
    if (dev) {
      // The simulated device's view of the step; its energy is simulated, so it is kept apart
      // from the measured energy_j above.
      log << nlohmann::json({{"type", "sim"}, {"step", r.step}, {"temp_c", dev->temp_end_c},
                             {"work_s", dev->work_s}, {"device_s", dev->device_s}, {"extra_s", dev->extra_s},
                             {"throttled_s", dev->throttled_s}, {"sim_energy_j", dev->energy_j}})
                 .dump()
          << "\n";
    }
    log.flush();
    char buf[256];
    std::snprintf(buf, sizeof buf, "step %lld/%lld  loss %.4f  lr %.2e  grad_norm %.3f  %.0f tok/s  elapsed %s  ETA %s",
                  static_cast<long long>(r.step), static_cast<long long>(r.total), r.loss, r.lr, r.grad_norm,
                  tokens_per_s, hms(elapsed_s).c_str(), hms(r.eta_s).c_str());
    if (live) {
      std::printf("\r\033[K%s", buf);
      line_open = true;
    } else {
      std::printf("%s\n", buf);
    }
    std::fflush(stdout);
  };
  auto on_val = [&](const nl::ValReport& r) {
    log << nl::val_json(r) << "\n";
    log.flush();
    if (line_open) std::printf("\n");
    line_open = false;
    std::printf("val step %lld: loss %.4f (%lld tokens)\n", static_cast<long long>(r.step), r.loss,
                static_cast<long long>(r.supervised));
    std::fflush(stdout);
  };
  nl::StopSignals stop;
  // Background mode: idle priority, and a gate asked before every step.
  std::unique_ptr<nl::Clock> gate_clock;
  nl::ManualClock* fake_clock = nullptr;  // --fake-clock: moved by the steps, see parse_fake_clock
  double fake_step_s = 0;
  std::unique_ptr<nl::PauseControl> pause;
  std::unique_ptr<nl::BackgroundGate> gate;
  if (a.background) {
    if (a.normal_priority) {
      std::printf("background: normal cpu and io priority (--normal-priority)\n");
    } else {
      const nl::PriorityResult cpu = nl::set_idle_cpu_priority(), io = nl::set_idle_io_priority();
      std::printf("background: cpu %s, io %s\n", cpu.detail.c_str(), io.detail.c_str());
    }
    nl::BackgroundConditions bc;
    bc.require_external_power = a.require_power;
    if (a.min_battery >= 0) bc.min_battery_percent = a.min_battery;
    if (!a.window.empty()) bc.window = nl::TimeWindow::parse(a.window);
    if (a.max_wall > 0) bc.budgets.wall_s = a.max_wall;
    if (a.max_energy > 0) bc.budgets.energy_j = a.max_energy;
    nl::check_budgets_enforceable(bc.budgets, energy.available(), energy.why_unavailable());
    bc.sysfs_root = a.sysfs_root;
    bc.recheck_s = a.recheck_sec;
    bc.pause_poll_s = std::min(2.0, a.recheck_sec);
    if (!a.fake_clock.empty()) {
      auto [start_s, step_s] = parse_fake_clock(a.fake_clock);
      auto manual = std::make_unique<nl::ManualClock>(start_s);
      fake_clock = manual.get();
      fake_step_s = step_s;
      gate_clock = std::move(manual);
    } else {
      gate_clock = std::make_unique<nl::SystemClock>();
    }
    pause = std::make_unique<nl::PauseControl>((fs::path(a.out) / "control").string(), true);
    gate = std::make_unique<nl::BackgroundGate>(bc, *gate_clock, pause.get());
  }
  const double session_start = nl::SystemClock().now_s();
  // Asks the gate; waits (with a checkpoint when the wait begins) until it says run. False: stop.
  auto gate_allows = [&](const std::function<nl::TrainState()>& snapshot, std::string& reason) {
    if (!gate) return true;
    auto use = [&] {
      nl::BudgetUse u;
      u.wall_s = nl::SystemClock().now_s() - session_start;
      u.steps = trainer.steps_done();
      u.energy_j = energy.joules();
      return u;
    };
    auto on_wait = [&](const nl::GateDecision& d) {
      save(snapshot());
      std::printf("waiting (checkpoint saved at step %lld): %s\n", static_cast<long long>(trainer.steps_done()),
                  d.reason.c_str());
      std::fflush(stdout);
      log << nlohmann::json({{"type", "wait"}, {"step", trainer.steps_done()}, {"reason", d.reason}}).dump() << "\n";
      log.flush();
    };
    nl::GateDecision d = gate->wait_until_runnable(use, on_wait, [&] { return stop.requested(); });
    if (d.verdict == nl::GateVerdict::Run) return true;
    reason = d.reason.empty() ? "stopped" : d.reason;
    return false;
  };
  // Thermal pacing: idle time between steps to hold a temperature ceiling or a duty cycle.
  // The decision of every step goes to the log as a "pace" row.
  std::unique_ptr<nl::TemperatureSource> temp_source;
  std::unique_ptr<nl::Pacer> pacer;
  if (a.temp_ceiling > 0 || a.duty > 0) {
    nl::PacingConfig pc;
    if (a.temp_ceiling > 0) pc.ceiling_c = a.temp_ceiling;
    if (a.duty > 0) pc.duty = a.duty;
    pc.poll_s = a.pace_poll_sec;
    pc.validate();
    nl::TempSourceOptions to;
    to.sysfs_root = a.sysfs_root;
    if (a.temp_source.rfind("file:", 0) == 0) to.temp_file = a.temp_source.substr(5);
    else if (a.temp_source.rfind("cmd:", 0) == 0) to.temp_cmd = a.temp_source.substr(4);
    else if (a.temp_source != "auto" && !sim)
      nl::fail("--temp-source " + a.temp_source, "unknown temperature source",
               "use auto, file:PATH, cmd:COMMAND or sim[:key=value,...]");
    std::string why_none;
    if (!sim) temp_source = nl::find_temperature_source(to, &why_none);
    nl::TemperatureSource* sensor = sim ? sim.get() : temp_source.get();
    std::printf("pacing: %s\n", sensor ? sensor->describe().c_str()
                                        : ("no temperature sensor (" + why_none + "); pacing on throughput").c_str());
    pacer = std::make_unique<nl::Pacer>(pc, sensor, nl::sleep_seconds,
                                        [&] { return stop.requested() || (pause && pause->paused()); });
    pacer->before_step();
  }
  auto pace = [&](int64_t done) {
    if (!pacer) return;
    nl::PacingDecision d = pacer->after_step(last_step_s);
    nlohmann::json row = {{"type", "pace"}, {"step", done}, {"step_s", d.step_s}, {"idle_s", d.idle_s},
                          {"throttled", d.throttling_suspected}, {"slowdown", d.slowdown}, {"reason", d.reason}};
    row["temp_c"] = d.temp_end_c ? nlohmann::json(*d.temp_end_c) : nlohmann::json("unavailable");
    log << row.dump() << "\n";
    log.flush();
    pacer->before_step();
  };
  using clock = std::chrono::steady_clock;
  auto last_save_time = clock::now();
  const int64_t session_first = trainer.steps_done();
  std::string stop_reason;
  auto at_boundary = [&](int64_t done, const std::function<nl::TrainState()>& snapshot) {
    if (done < trainer.total_steps()) pace(done);
    if (fake_clock) fake_clock->advance(fake_step_s);
    if (stop.requested()) stop_reason = stop.signal() == SIGINT ? "SIGINT" : "SIGTERM";
    else if (a.max_steps > 0 && done - session_first >= a.max_steps) stop_reason = "--max-steps reached";
    else if (done < trainer.total_steps() && !gate_allows(snapshot, stop_reason) && stop.requested())
      stop_reason = stop.signal() == SIGINT ? "SIGINT" : "SIGTERM";
    const bool by_steps = a.save_every > 0 && done % a.save_every == 0;
    const bool by_time = a.save_every_sec > 0 &&
                         std::chrono::duration<double>(clock::now() - last_save_time).count() >= a.save_every_sec;
    if ((by_steps || by_time || !stop_reason.empty()) && done < trainer.total_steps()) {
      save(snapshot());
      last_save_time = clock::now();
    }
    return stop_reason.empty();
  };
  // The gate is asked before the first step too (a job started off-charger waits at once).
  const std::function<nl::TrainState()> initial = [&] { return trainer.state(); };
  // DIR/run.json: what this run is (model, data, configuration, sensors) and one entry per
  // session (started, from which step, how it ended), for `nightlora report`. The log holds
  // the per-step figures; this file holds what is said once.
  const fs::path record_path = fs::path(a.out) / "run.json";
  nlohmann::json record;
  if (loaded && fs::exists(record_path, ec)) {
    record = nlohmann::json::parse(nl::read_file(record_path.string()), nullptr, false);
    if (!record.is_object()) record = nlohmann::json::object();  // damaged: start it again
  }
  record["model"] = a.model;
  record["arch"] = nl::arch_name(mc.arch);
  record["data"] = a.data;
  if (!a.valid.empty()) record["valid"] = a.valid;
  record["out"] = a.out;
  record["config"] = identity["config"];
  record["total_steps"] = trainer.total_steps();
  record["threads"] = a.threads;
  {
    nlohmann::json thermal;
    if (sim) thermal["source"] = sim->describe(), thermal["throttle_at_c"] = sim_spec->device.throttle_at_c;
    else if (pacer) thermal["source"] = temp_source ? temp_source->describe() : "no sensor: pacing on throughput";
    else thermal["source"] = "none (no pacing)";
    if (a.temp_ceiling > 0) thermal["ceiling_c"] = a.temp_ceiling;
    if (a.duty > 0) thermal["duty"] = a.duty;
    record["thermal"] = thermal;
  }
  record["energy"] = energy.available() ? nlohmann::json{{"source", energy.source()}}
                                        : nlohmann::json{{"unavailable", energy.why_unavailable()}};
  if (a.background) {
    nlohmann::json bg = nlohmann::json::object();
    if (a.require_power) bg["require_power"] = true;
    if (a.min_battery >= 0) bg["min_battery"] = a.min_battery;
    if (!a.window.empty()) bg["window"] = a.window;
    if (a.max_wall > 0) bg["max_wall_s"] = a.max_wall;
    if (a.max_energy > 0) bg["max_energy_j"] = a.max_energy;
    record["background"] = bg;
  }
  auto utc_now = [] {
    std::time_t t = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return std::string(buf);
  };
  if (!record["sessions"].is_array()) record["sessions"] = nlohmann::json::array();
  record["sessions"].push_back({{"started", utc_now()}, {"from_step", trainer.steps_done()}});
  nl::write_file_atomic(record_path.string(), record.dump(2) + "\n");
  auto end_session = [&](const std::string& outcome) {
    nlohmann::json& sess = record["sessions"].back();
    sess["ended"] = utc_now();
    sess["to_step"] = trainer.steps_done();
    sess["outcome"] = outcome;
    nl::write_file_atomic(record_path.string(), record.dump(2) + "\n");
  };
  nl::LoraAdapter trained;
  if (trainer.finished() || gate_allows(initial, stop_reason)) {
    trained = trainer.run(on_step, on_val, at_boundary);
  } else if (trainer.steps_done() != last_saved || store.list().empty()) {
    save(trainer.state());
  }
  if (line_open) std::printf("\n");
  if (!trainer.finished()) {
    std::printf("stopped at step %lld/%lld (%s); checkpoint saved in %s: run the same command again to continue\n",
                static_cast<long long>(trainer.steps_done()), static_cast<long long>(trainer.total_steps()),
                stop_reason.c_str(), store.dir().c_str());
    std::fflush(stdout);
    end_session("stopped: " + stop_reason);
    if (stop.signal() == SIGINT) return 130;
    if (stop.signal() == SIGTERM) return 143;
    return 0;
  }
  // The final state is a checkpoint too: it holds the optimizer state, and a re-run of a
  // finished command finds it and only rewrites the adapter files.
  if (last_saved != trainer.steps_done()) save(trainer.state());

  nl::save_adapter_peft(trained, *model, a.out);
  const fs::path gguf_path = fs::path(a.out) / "adapter.gguf";
  nl::save_adapter_gguf(trained, *model, gguf_path.string());
  std::printf("saved: %s (PEFT: adapter_model.safetensors + adapter_config.json) and %s\n", a.out.c_str(),
              gguf_path.string().c_str());
  record["adapter"] = {{"peft", a.out}, {"gguf", gguf_path.string()}};
  end_session("finished");
  return 0;
}

nlcli::Register reg_train(
    "train", "Fine-tune a LoRA adapter on JSONL data; writes the adapter (PEFT and GGUF) and log.jsonl to --out",
    [](CLI::App& sub) -> nlcli::Run {
      auto a = std::make_shared<TrainArgs>();
      sub.add_option("-m,--model", a->model, "GGUF file or Hugging Face folder")->required();
      sub.add_option("--data", a->data, "training data (JSONL: text, prompt/completion or messages)")->required();
      sub.add_option("--valid", a->valid, "validation data (same format)");
      sub.add_option("-o,--out", a->out, "output folder for the adapter and log.jsonl")->required();
      sub.add_option("--adapter", a->adapter, "continue training this adapter (PEFT folder or LoRA GGUF)");
      sub.add_option("--rank", a->rank, "LoRA rank")->capture_default_str();
      sub.add_option("--alpha", a->alpha, "LoRA alpha (scale = alpha / rank)")->capture_default_str();
      sub.add_option("--dropout", a->dropout, "LoRA dropout on the adapter input")->capture_default_str();
      sub.add_option("--targets", a->targets, "projections to adapt: subset of q,k,v,o,gate,up,down, or all")
          ->capture_default_str();
      sub.add_option("--lora-seed", a->lora_seed, "seed of the adapter initialisation")->capture_default_str();
      sub.add_option("--lr", a->lr, "peak learning rate")->capture_default_str();
      sub.add_option("--schedule", a->schedule, "cosine, linear or constant (after warmup)")->capture_default_str();
      sub.add_option("--warmup", a->warmup, "linear warmup steps")->capture_default_str();
      sub.add_option("--epochs", a->epochs, "passes over the data (when --iters is 0)")->capture_default_str();
      sub.add_option("--iters", a->iters, "optimizer steps (0: use --epochs)")->capture_default_str();
      sub.add_option("--batch", a->batch, "sequences per micro-batch (packed without padding)")->capture_default_str();
      sub.add_option("--grad-accum", a->grad_accum, "micro-batches per optimizer step")->capture_default_str();
      sub.add_option("--seq-len", a->seq_len, "maximum tokens per example; longer ones keep their start")
          ->capture_default_str();
      sub.add_option("--seed", a->seed, "seed of the data order and dropout")->capture_default_str();
      sub.add_option("-t,--threads", a->threads, "threads (0 = all cores)")->check(CLI::NonNegativeNumber);
      sub.add_option("--engine", a->engine,
                     "frozen-engine backend: cpu, vulkan (a Vulkan GPU; NL_VULKAN_DEVICE=index picks one) or auto "
                     "(vulkan when a GPU is present, else cpu)")
          ->capture_default_str()
          ->check(CLI::IsMember({"auto", "cpu", "vulkan"}));
      sub.add_option("--host-threads", a->host_threads,
                     "threads of the host work that overlaps engine products (LoRA branch); the rest uses --threads")
          ->capture_default_str()->check(CLI::PositiveNumber);
      sub.add_option("--max-memory", a->max_memory,
                     "memory budget (bytes, or with KiB/MiB/GiB): keep as many blocks' activations as fit (less "
                     "recompute); refuse before training when even full recompute does not fit");
      sub.add_option("--train-on", a->train_on, "completion (loss on completions / assistant turns) or all")
          ->capture_default_str();
      sub.add_option("--chat-format", a->chat_format, "chat template for messages data instead of detecting it");
      sub.add_option("--val-every", a->val_every, "validate every N steps (always before and after)")
          ->capture_default_str();
      sub.add_option("--weight-decay", a->weight_decay, "AdamW decoupled weight decay")->capture_default_str();
      sub.add_option("--clip", a->clip, "global gradient-norm clipping (0: off)")->capture_default_str();
      sub.add_option("--method", a->method,
                     "first-order (backpropagation + AdamW) or mezo (forward-only MeZO: two forward passes per "
                     "step, SGD at --lr; no clipping, needs --dropout 0)")
          ->capture_default_str();
      sub.add_option("--mezo-eps", a->mezo_eps, "MeZO: perturbation size epsilon")->capture_default_str();
      sub.add_option("--save-every", a->save_every, "checkpoint every N steps (0: off)")->capture_default_str()
          ->check(CLI::NonNegativeNumber);
      sub.add_option("--save-every-sec", a->save_every_sec, "checkpoint every S seconds (0: off)")
          ->capture_default_str()->check(CLI::NonNegativeNumber);
      sub.add_option("--keep", a->keep, "checkpoints kept (the newest)")->capture_default_str()->check(CLI::Range(1, 1000));
      sub.add_flag("--resume", a->resume,
                   "continue from the newest checkpoint in --out (also done without it when one exists); "
                   "fails when there is none");
      sub.add_flag("--background", a->background,
                   "idle CPU/IO priority; run only while the conditions below hold, else checkpoint and wait; "
                   "SIGUSR1/SIGUSR2 or OUT/control ('pause'/'resume') pause and resume at a step boundary");
      sub.add_flag("--normal-priority", a->normal_priority,
                   "background: keep the normal CPU/IO priority (for timed comparisons on a busy machine)");
      sub.add_flag("--require-power", a->require_power, "background: only on external power");
      sub.add_option("--min-battery", a->min_battery, "background: only with the battery at least at X percent");
      sub.add_option("--window", a->window, "background: only inside this daily local time window, e.g. 23:00-07:00");
      sub.add_option("--max-wall", a->max_wall, "background: stop (with a checkpoint) after S seconds of this session");
      sub.add_option("--max-energy", a->max_energy, "background: stop after J joules (needs a readable energy counter)");
      sub.add_option("--sysfs-root", a->sysfs_root, "root of /sys (power supplies, energy), for tests")
          ->group("");
      sub.add_option("--recheck-sec", a->recheck_sec, "background: longest wait before conditions are re-checked")
          ->group("")->check(CLI::PositiveNumber);
      sub.add_option("--temp-ceiling", a->temp_ceiling, "pacing: idle between steps to stay below C degrees");
      sub.add_option("--duty", a->duty, "pacing: share of wall time spent in steps, in (0, 1]");
      sub.add_option("--temp-source", a->temp_source,
                     "pacing sensor: auto (thermal zones, hwmon), file:PATH, cmd:COMMAND, or sim[:key=value,...] "
                     "(a simulated device that heats and throttles: keys ambient, r, c, step-power, idle-power, "
                     "throttle-at, throttle-release, throttle-speed, throttle-power, start, step)")
          ->capture_default_str();
      sub.add_option("--fake-clock", a->fake_clock,
                     "background, for tests: HH:MM[:SS],S: the clock starts then and moves S seconds per step")
          ->group("");
      sub.add_option("--pace-poll-sec", a->pace_poll_sec, "pacing: how often the sensor is re-read while cooling")
          ->group("")->check(CLI::PositiveNumber);
      nlcli::add_precision_options(sub, a->precision);
      sub.add_option("--max-steps", a->max_steps, "stop after N steps in this session, with a checkpoint (0: no limit)")
          ->capture_default_str()->check(CLI::NonNegativeNumber);
      return [a]() { return run_train(*a); };
    });

}  // namespace
