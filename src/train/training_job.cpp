// The training job (training_job.h): the Trainer's loop wrapped in what makes it a job: the
// run folder, checkpoints and resume, the background gate, thermal pacing, the simulated
// device, the log and the run record.
#include "nightlora/train/training_job.h"

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>

#include "nightlora/data/dataset.h"
#include "nightlora/host/adapter_io.h"
#include "nightlora/host/checkpoint.h"
#include "nightlora/host/lora.h"
#include "nightlora/host/memory_plan.h"
#include "nightlora/host/step_timing.h"
#include "nightlora/host/trainer.h"
#include "nightlora/job/atomic_file.h"
#include "nightlora/job/background_gate.h"
#include "nightlora/job/checkpoint_store.h"
#include "nightlora/job/energy.h"
#include "nightlora/job/live_thermal_sim.h"
#include "nightlora/job/pacer.h"
#include "nightlora/job/priority.h"
#include "nightlora/job/stop_signals.h"
#include "nightlora/modelio/model.h"
#include "nightlora/tokenizer/tokenizer.h"
#include "nightlora/util/error.h"
#include "nightlora/util/strformat.h"
#include "precision_setup.h"
#include "run_record.h"

namespace nl {

namespace {

namespace fs = std::filesystem;

// fake_clock "HH:MM[:SS],S" -> (start second of the day, seconds per step).
std::pair<double, double> parse_fake_clock(const std::string& text) {
  int h = 0, m = 0, sec = 0, used = 0;
  double step = 0;
  const char* c = text.c_str();
  const bool ok = (std::sscanf(c, "%d:%d:%d,%lf%n", &h, &m, &sec, &step, &used) == 4 ||
                   (sec = 0, std::sscanf(c, "%d:%d,%lf%n", &h, &m, &step, &used) == 3)) &&
                  used == static_cast<int>(text.size()) && h >= 0 && h < 24 && m >= 0 && m < 60 && sec >= 0 && sec < 60 &&
                  step >= 0;
  if (!ok) fail("--fake-clock " + text, "expected HH:MM[:SS],SECONDS_PER_STEP", "e.g. 06:59,60");
  return {h * 3600.0 + m * 60.0 + sec, step};
}

// What must match for a checkpoint to be resumed: everything that shapes the trajectory.
// Threads are left out (results do not depend on them), as are validation and logging options.
nlohmann::json run_identity(const TrainingJobOptions& a) {
  nlohmann::json cfg = {{"lr", a.lr},           {"schedule", a.schedule},         {"warmup", a.warmup},
                        {"epochs", a.epochs},   {"iters", a.iters},               {"batch", a.batch},
                        {"grad-accum", a.grad_accum}, {"clip", a.clip},           {"seed", a.seed},
                        {"weight-decay", a.weight_decay}, {"rank", a.rank},       {"alpha", a.alpha},
                        {"dropout", a.dropout}, {"targets", a.targets},           {"lora-seed", a.lora_seed},
                        {"seq-len", a.seq_len}, {"train-on", a.train_on},         {"chat-format", a.chat_format},
                        {"adapter", a.adapter.empty() ? std::string() : fingerprint_path(a.adapter)}};
  // MeZO's direction stream is a pure function of (seed, step), both above; the method and its
  // perturbation size are added only for MeZO runs so first-order checkpoints keep their identity.
  if (a.method != "first-order") {
    cfg["method"] = a.method;
    cfg["mezo-eps"] = a.mezo_eps;
  }
  add_precision_identity(cfg, a);
  return {{"model", fingerprint_path(a.model)}, {"data", fingerprint_path(a.data)}, {"config", cfg}};
}

// On resume, the log keeps only what the checkpoint covers: steps logged after it (by a
// session killed before its next checkpoint) are run again and logged again. A line cut by
// the kill is dropped too.
void trim_log(const fs::path& log_path, int64_t step) {
  std::error_code ec;
  if (!fs::exists(log_path, ec)) return;
  std::istringstream in(read_file(log_path.string()));
  std::string line, kept;
  while (std::getline(in, line)) {
    nlohmann::json row = nlohmann::json::parse(line, nullptr, false);
    if (row.is_discarded() || !row.is_object()) continue;
    if (row.value("step", int64_t{0}) <= step) kept += line + "\n";
  }
  write_file_atomic(log_path.string(), kept);
}

std::string hms(double s) {
  const long t = static_cast<long>(s + 0.5);
  return t >= 3600 ? strformat("%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60) : strformat("%ld:%02ld", t / 60, t % 60);
}

Dataset load_data(const std::string& path, const Model& m, const DataOptions& opt, const char* what,
                  TrainingJobOutput& out) {
  Dataset ds = load_jsonl_dataset(path, *m.tokenizer, opt);
  if (ds.n_truncated > 0)
    out.warning(strformat("%s: %lld example(s) longer than --seq-len %lld were cut to their first %lld tokens (%lld "
                          "tokens dropped)",
                          path.c_str(), static_cast<long long>(ds.n_truncated), static_cast<long long>(opt.max_tokens),
                          static_cast<long long>(opt.max_tokens), static_cast<long long>(ds.n_dropped_tokens)));
  out.line(strformat("%s: %s, %zu examples (%s), %lld tokens, %lld supervised", what, path.c_str(), ds.examples.size(),
                     data_format_name(ds.format), static_cast<long long>(ds.n_tokens()),
                     static_cast<long long>(ds.n_supervised())));
  return ds;
}

bool is_temp_file_or_cmd(const std::string& s) { return s.rfind("file:", 0) == 0 || s.rfind("cmd:", 0) == 0; }

}  // namespace

TrainingJobResult run_training_job(const TrainingJobOptions& a, TrainingJobOutput& out) {
  // Options that need no file come first: a typo fails before any loading.
  TrainConfig tc;
  tc.schedule = parse_schedule(a.schedule);
  DataOptions dopt;
  dopt.train_on = parse_train_on(a.train_on);
  dopt.max_tokens = a.seq_len;
  if (!a.chat_format.empty()) dopt.chat_format = parse_chat_format(a.chat_format);
  LoraConfig lc;
  lc.rank = a.rank;
  lc.alpha = a.alpha;
  lc.dropout = a.dropout;
  lc.targets = LoraConfig::parse_targets(a.targets);
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
  if (!a.max_memory.empty()) tc.max_memory = parse_memory_size(a.max_memory);
  tc.val_every = a.val_every;
  tc.clip = a.clip;
  tc.adamw.weight_decay = a.weight_decay;
  tc.method = parse_train_method(a.method);
  tc.mezo_eps = a.mezo_eps;
  check_precision_options(a);
  std::optional<LiveSimSpec> sim_spec;
  if (is_sim_source(a.temp_source)) sim_spec = parse_sim_source(a.temp_source);
  else if (a.temp_source != "auto" && !is_temp_file_or_cmd(a.temp_source))
    fail("--temp-source " + a.temp_source, "unknown temperature source",
         "use auto, file:PATH, cmd:COMMAND or sim[:key=value,...]");
  if (!a.fake_clock.empty()) {
    if (!a.background) fail("--fake-clock", "only background mode has a clock to fake", "add --background");
    parse_fake_clock(a.fake_clock);
  }
  std::error_code ec;
  if (fs::exists(a.out, ec) && !fs::is_directory(a.out, ec))
    fail(a.out, "--out exists and is not a folder", "give a folder for the adapter and log");

  std::unique_ptr<Model> model = Model::load(a.model);
  if (!model->tokenizer) fail(a.model, "the model has no tokenizer", "training reads text, so the model needs one");
  const ModelConfig& mc = model->config;
  out.line(strformat("model: %s (%s, %lld layers, d_model %lld, vocab %lld)", a.model.c_str(), arch_name(mc.arch),
                     static_cast<long long>(mc.n_layer), static_cast<long long>(mc.d_model),
                     static_cast<long long>(mc.vocab)));
  Dataset train = load_data(a.data, *model, dopt, "train", out);
  std::unique_ptr<Dataset> valid;
  if (!a.valid.empty()) valid = std::make_unique<Dataset>(load_data(a.valid, *model, dopt, "valid", out));

  LoraAdapter adapter;
  if (!a.adapter.empty()) {
    adapter = load_adapter(a.adapter, *model);
    adapter.cfg.dropout = a.dropout;
    out.line("continuing from " + a.adapter + " (its rank, alpha and targets apply)");
  } else {
    adapter = LoraAdapter::init(mc, lc);
  }
  out.line(strformat("lora: rank %lld, alpha %g, dropout %g, targets %s, %lld trainable parameters",
                     static_cast<long long>(adapter.cfg.rank), adapter.cfg.alpha, adapter.cfg.dropout,
                     adapter.cfg.targets_string().c_str(), static_cast<long long>(adapter.n_params())));

  const std::optional<PrecisionPlan> plan_file = read_precision_file(a, mc.n_layer);
  const nlohmann::json identity = run_identity(a);
  Trainer trainer(*model, train, valid.get(), tc, std::move(adapter));
  out.line(strformat("training (%s): %lld steps (%lld per epoch), batch %lld x %lld accumulated, lr %g %s, warmup %lld",
                     train_method_name(tc.method), static_cast<long long>(trainer.total_steps()),
                     static_cast<long long>(trainer.steps_per_epoch()), static_cast<long long>(a.batch),
                     static_cast<long long>(a.grad_accum), a.lr, a.schedule.c_str(), static_cast<long long>(a.warmup)));
  out.line("memory plan: " + trainer.memory_plan().describe());

  // Inputs are valid: from here on the folder is written.
  fs::create_directories(a.out, ec);
  if (ec) fail(a.out, "cannot create the output folder: " + ec.message());
  const fs::path log_path = fs::path(a.out) / "log.jsonl";
  CheckpointStore store((fs::path(a.out) / "checkpoints").string(), a.keep);
  std::optional<LoadedCheckpoint> loaded = store.load_latest();
  int64_t tokens_before = 0;
  double elapsed_before = 0;
  std::optional<PrecisionPlan> stored_plan;
  if (loaded) {
    for (const std::string& s : loaded->skipped) out.warning("damaged checkpoint skipped: " + s);
    Checkpoint ck = decode_checkpoint(loaded->payload, loaded->path);
    check_identity(ck.meta.identity, identity, loaded->path);
    elapsed_before = ck.meta.progress.value("elapsed_s", 0.0);
    trainer.resume(ck.state, elapsed_before);
    stored_plan = ck.precision;
    tokens_before = ck.meta.progress.value("tokens", int64_t{0});
    out.line(strformat("resuming from %s: step %lld/%lld", loaded->path.c_str(), static_cast<long long>(ck.state.step),
                       static_cast<long long>(trainer.total_steps())));
    trim_log(log_path, ck.state.step);
  } else if (a.resume) {
    fail(store.dir(), "--resume was given but there is no checkpoint to resume from",
         "run without --resume to start a new run in this folder");
  }
  setup_precision(trainer, a, loaded ? stored_plan : plan_file, loaded.has_value(), mc.n_layer, out);
  std::ofstream log(log_path, loaded ? std::ios::app : std::ios::trunc);
  if (!log) fail(log_path.string(), "cannot write the training log");

  double last_step_s = 0;  // the last step's duration, for the pacer
  // Energy is logged whenever the machine tells it, background or not.
  EnergyMeter energy = EnergyMeter::open(a.sysfs_root);
  // Progress figures that go into each checkpoint (not part of the trajectory).
  double elapsed_s = elapsed_before;
  int64_t tokens_total = tokens_before;
  int64_t last_saved = trainer.steps_done();
  auto save = [&](const TrainState& st) {
    Checkpoint ck;
    ck.meta.identity = identity;
    ck.meta.progress = {{"elapsed_s", elapsed_s}, {"tokens", tokens_total}};
    ck.state = st;
    ck.precision = trainer.precision();
    store.save(st.step, encode_checkpoint(ck));
    last_saved = st.step;
  };

  // temp_source sim: every step also runs on a simulated device that stands in for this
  // machine's thermal body (see live_thermal_sim.h). Its throttling really slows the job: the
  // extra time is slept, and the step's logged duration and tokens/s include it.
  std::unique_ptr<LiveThermalSim> sim;
  if (sim_spec) {
    sim = std::make_unique<LiveThermalSim>(*sim_spec);
    out.line("thermal: " + sim->describe());
  }

  auto on_step = [&](const StepReport& r) {
    const double real_s = r.tokens_per_s > 0 ? static_cast<double>(r.tokens) / r.tokens_per_s : 0.0;
    std::optional<LiveSimStep> dev;
    if (sim) dev = sim->step_finished(real_s);
    const double extra_s = dev ? dev->extra_s : 0.0;
    const double step_s = real_s + extra_s;
    const double tokens_per_s = step_s > 0 ? static_cast<double>(r.tokens) / step_s : r.tokens_per_s;
    elapsed_s = r.elapsed_s + extra_s;
    tokens_total += r.tokens;
    last_step_s = step_s;
    // Energy where the machine tells it; otherwise said to be unavailable, never estimated.
    nlohmann::json row = nlohmann::json::parse(step_json(r));
    row["tokens_per_s"] = tokens_per_s;
    row["elapsed_s"] = elapsed_s;
    if (auto j = energy.joules()) row["energy_j"] = *j;
    else row["energy_j"] = "unavailable";
    // The process's peak resident memory so far, for the report, unless the step's own
    // measurements already hold a resident-memory figure.
    bool has_rss = false;
    for (auto it = row.begin(); it != row.end(); ++it) has_rss |= it.key().find("rss") != std::string::npos;
    if (!has_rss)
      if (const size_t peak = peak_rss_bytes()) row["process_peak_rss_bytes"] = peak;
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
    out.step_status(strformat("step %lld/%lld  loss %.4f  lr %.2e  grad_norm %.3f  %.0f tok/s  elapsed %s  ETA %s",
                              static_cast<long long>(r.step), static_cast<long long>(r.total), r.loss, r.lr,
                              r.grad_norm, tokens_per_s, hms(elapsed_s).c_str(), hms(r.eta_s).c_str()));
  };
  auto on_val = [&](const ValReport& r) {
    log << val_json(r) << "\n";
    log.flush();
    out.line(strformat("val step %lld: loss %.4f (%lld tokens)", static_cast<long long>(r.step), r.loss,
                       static_cast<long long>(r.supervised)));
  };
  StopSignals stop;
  // Background mode: idle priority, and a gate asked before every step.
  std::unique_ptr<Clock> gate_clock;
  ManualClock* fake_clock = nullptr;  // fake_clock: moved by the steps, see parse_fake_clock
  double fake_step_s = 0;
  std::unique_ptr<PauseControl> pause;
  std::unique_ptr<BackgroundGate> gate;
  if (a.background) {
    if (a.normal_priority) {
      out.line("background: normal cpu and io priority (--normal-priority)");
    } else {
      const PriorityResult cpu = set_idle_cpu_priority(), io = set_idle_io_priority();
      out.line("background: cpu " + cpu.detail + ", io " + io.detail);
    }
    BackgroundConditions bc;
    bc.require_external_power = a.require_power;
    if (a.min_battery >= 0) bc.min_battery_percent = a.min_battery;
    if (!a.window.empty()) bc.window = TimeWindow::parse(a.window);
    if (a.max_wall > 0) bc.budgets.wall_s = a.max_wall;
    if (a.max_energy > 0) bc.budgets.energy_j = a.max_energy;
    check_budgets_enforceable(bc.budgets, energy.available(), energy.why_unavailable());
    bc.sysfs_root = a.sysfs_root;
    bc.recheck_s = a.recheck_sec;
    bc.pause_poll_s = std::min(2.0, a.recheck_sec);
    if (!a.fake_clock.empty()) {
      auto [start_s, step_s] = parse_fake_clock(a.fake_clock);
      auto manual = std::make_unique<ManualClock>(start_s);
      fake_clock = manual.get();
      fake_step_s = step_s;
      gate_clock = std::move(manual);
    } else {
      gate_clock = std::make_unique<SystemClock>();
    }
    pause = std::make_unique<PauseControl>((fs::path(a.out) / "control").string(), true);
    gate = std::make_unique<BackgroundGate>(bc, *gate_clock, pause.get());
  }
  double session_start = 0;  // set just before the first gate check (below)
  // Asks the gate; waits (with a checkpoint when the wait begins) until it says run. False: stop.
  auto gate_allows = [&](const std::function<TrainState()>& snapshot, std::string& reason) {
    if (!gate) return true;
    auto use = [&] {
      BudgetUse u;
      u.wall_s = SystemClock().now_s() - session_start;
      u.steps = trainer.steps_done();
      u.energy_j = energy.joules();
      return u;
    };
    auto on_wait = [&](const GateDecision& d) {
      save(snapshot());
      out.line(strformat("waiting (checkpoint saved at step %lld): %s", static_cast<long long>(trainer.steps_done()),
                         d.reason.c_str()));
      log << nlohmann::json({{"type", "wait"}, {"step", trainer.steps_done()}, {"reason", d.reason}}).dump() << "\n";
      log.flush();
    };
    GateDecision d = gate->wait_until_runnable(use, on_wait, [&] { return stop.requested(); });
    if (d.verdict == GateVerdict::Run) return true;
    reason = d.reason.empty() ? "stopped" : d.reason;
    return false;
  };
  // Thermal pacing: idle time between steps to hold a temperature ceiling or a duty cycle.
  // The decision of every step goes to the log as a "pace" row.
  std::unique_ptr<TemperatureSource> temp_source;
  std::unique_ptr<Pacer> pacer;
  if (a.temp_ceiling > 0 || a.duty > 0) {
    PacingConfig pc;
    if (a.temp_ceiling > 0) pc.ceiling_c = a.temp_ceiling;
    if (a.duty > 0) pc.duty = a.duty;
    pc.poll_s = a.pace_poll_sec;
    pc.validate();
    TempSourceOptions to;
    to.sysfs_root = a.sysfs_root;
    if (a.temp_source.rfind("file:", 0) == 0) to.temp_file = a.temp_source.substr(5);
    else if (a.temp_source.rfind("cmd:", 0) == 0) to.temp_cmd = a.temp_source.substr(4);
    std::string why_none;
    if (!sim) temp_source = find_temperature_source(to, &why_none);
    TemperatureSource* sensor = sim ? sim.get() : temp_source.get();
    out.line("pacing: " + (sensor ? sensor->describe() : "no temperature sensor (" + why_none + "); pacing on throughput"));
    pacer = std::make_unique<Pacer>(pc, sensor, sleep_seconds, [&] { return stop.requested() || (pause && pause->paused()); });
    pacer->before_step();
  }
  auto pace = [&](int64_t done) {
    if (!pacer) return;
    PacingDecision d = pacer->after_step(last_step_s);
    nlohmann::json row = {{"type", "pace"}, {"step", done}, {"step_s", d.step_s}, {"idle_s", d.idle_s},
                          {"throttled", d.throttling_suspected}, {"slowdown", d.slowdown}, {"reason", d.reason}};
    row["temp_c"] = d.temp_end_c ? nlohmann::json(*d.temp_end_c) : nlohmann::json("unavailable");
    log << row.dump() << "\n";
    log.flush();
    pacer->before_step();
  };
  auto signal_name = [&] { return stop.signal() == SIGINT ? "SIGINT" : "SIGTERM"; };
  using clock = std::chrono::steady_clock;
  auto last_save_time = clock::now();
  const int64_t session_first = trainer.steps_done();
  std::string stop_reason;
  auto at_boundary = [&](int64_t done, const std::function<TrainState()>& snapshot) {
    if (done < trainer.total_steps()) pace(done);
    if (fake_clock) fake_clock->advance(fake_step_s);
    if (stop.requested()) stop_reason = signal_name();
    else if (a.max_steps > 0 && done - session_first >= a.max_steps) stop_reason = "--max-steps reached";
    else if (done < trainer.total_steps() && !gate_allows(snapshot, stop_reason) && stop.requested())
      stop_reason = signal_name();
    const bool by_steps = a.save_every > 0 && done % a.save_every == 0;
    const bool by_time = a.save_every_sec > 0 &&
                         std::chrono::duration<double>(clock::now() - last_save_time).count() >= a.save_every_sec;
    if ((by_steps || by_time || !stop_reason.empty()) && done < trainer.total_steps()) {
      save(snapshot());
      last_save_time = clock::now();
    }
    return stop_reason.empty();
  };

  RunRecord record((fs::path(a.out) / "run.json").string(), loaded.has_value());
  nlohmann::json& rec = record.json();
  rec["model"] = a.model;
  rec["arch"] = arch_name(mc.arch);
  rec["data"] = a.data;
  if (!a.valid.empty()) rec["valid"] = a.valid;
  rec["out"] = a.out;
  rec["config"] = identity["config"];
  rec["total_steps"] = trainer.total_steps();
  rec["threads"] = a.threads;
  nlohmann::json thermal;
  if (sim) thermal["source"] = sim->describe(), thermal["throttle_at_c"] = sim_spec->device.throttle_at_c;
  else if (pacer) thermal["source"] = temp_source ? temp_source->describe() : "no sensor: pacing on throughput";
  else thermal["source"] = "none (no pacing)";
  if (a.temp_ceiling > 0) thermal["ceiling_c"] = a.temp_ceiling;
  if (a.duty > 0) thermal["duty"] = a.duty;
  rec["thermal"] = thermal;
  rec["energy"] = energy.available() ? nlohmann::json{{"source", energy.source()}}
                                     : nlohmann::json{{"unavailable", energy.why_unavailable()}};
  if (a.background) {
    nlohmann::json bg = nlohmann::json::object();
    if (a.require_power) bg["require_power"] = true;
    if (a.min_battery >= 0) bg["min_battery"] = a.min_battery;
    if (!a.window.empty()) bg["window"] = a.window;
    if (a.max_wall > 0) bg["max_wall_s"] = a.max_wall;
    if (a.max_energy > 0) bg["max_energy_j"] = a.max_energy;
    rec["background"] = bg;
  }
  record.start_session(trainer.steps_done());

  TrainingJobResult result;
  result.total_steps = trainer.total_steps();
  // The gate is asked before the first step too (a job started off-charger waits at once).
  const std::function<TrainState()> initial = [&] { return trainer.state(); };
  LoraAdapter trained;
  // The wall-time budget counts from here: loading and setting up (the model, the pacer, the
  // run record's writes) are not charged. (Charged from before the setup, a 0.35 s budget
  // was once used up before the first step, in a test under the load of the whole suite.)
  session_start = SystemClock().now_s();
  if (trainer.finished() || gate_allows(initial, stop_reason)) {
    trained = trainer.run(on_step, on_val, at_boundary);
  } else if (trainer.steps_done() != last_saved || store.list().empty()) {
    save(trainer.state());
  }
  result.step = trainer.steps_done();
  if (!trainer.finished()) {
    out.line(strformat("stopped at step %lld/%lld (%s); checkpoint saved in %s: run the same command again to continue",
                       static_cast<long long>(trainer.steps_done()), static_cast<long long>(trainer.total_steps()),
                       stop_reason.c_str(), store.dir().c_str()));
    record.end_session("stopped: " + stop_reason, trainer.steps_done());
    result.stop_reason = stop_reason;
    result.signal = stop.signal();
    return result;
  }
  // The final state is a checkpoint too: it holds the optimizer state, and a re-run of a
  // finished job finds it and only rewrites the adapter files.
  if (last_saved != trainer.steps_done()) save(trainer.state());

  save_adapter_peft(trained, *model, a.out);
  const fs::path gguf_path = fs::path(a.out) / "adapter.gguf";
  save_adapter_gguf(trained, *model, gguf_path.string());
  out.line("saved: " + a.out + " (PEFT: adapter_model.safetensors + adapter_config.json) and " + gguf_path.string());
  rec["adapter"] = {{"peft", a.out}, {"gguf", gguf_path.string()}};
  record.end_session("finished", trainer.steps_done());
  result.finished = true;
  return result;
}

}  // namespace nl
