// The training job (training_job.h): the Trainer's loop wrapped in what makes it a job: the
// run folder, checkpoints and resume, the background gate, thermal pacing, the simulated
// device, the log and the run record.
#include "nightlora/train/training_job.h"

#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>

#include "nightlora/data/data_fingerprint.h"
#include "nightlora/data/dataset.h"
#include "nightlora/host/adapter_io.h"
#include "nightlora/host/checkpoint.h"
#include "nightlora/host/lora.h"
#include "nightlora/host/memory_budget.h"
#include "nightlora/host/memory_plan.h"
#include "nightlora/host/step_timing.h"
#include "nightlora/host/trainer.h"
#include "nightlora/job/atomic_file.h"
#include "nightlora/job/file_ops.h"
#include "nightlora/job/background_gate.h"
#include "nightlora/job/checkpoint_store.h"
#include "nightlora/job/energy.h"
#include "nightlora/job/exit_codes.h"
#include "nightlora/job/folder_lock.h"
#include "nightlora/job/live_thermal_sim.h"
#include "nightlora/job/pacer.h"
#include "nightlora/job/priority.h"
#include "nightlora/job/stop_signals.h"
#include "nightlora/modelio/model.h"
#include "nightlora/train/resident_model.h"
#include "nightlora/tokenizer/tokenizer.h"
#include "nightlora/util/error.h"
#include "nightlora/util/strformat.h"
#include "best_adapter.h"
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

// What must match for a checkpoint to be resumed: everything that shapes the trajectory, with
// the LoRA settings really used (an adapter continued brings its own). Threads are left out
// (results do not depend on them), as are logging options. The data files count to the byte.
nlohmann::json run_identity(const TrainingJobOptions& a, const LoraConfig& lora) {
  nlohmann::json cfg = {{"lr", a.lr},           {"schedule", a.schedule},         {"warmup", a.warmup},
                        {"epochs", a.epochs},   {"iters", a.iters},               {"batch", a.batch},
                        {"grad-accum", a.grad_accum}, {"clip", a.clip},           {"seed", a.seed},
                        {"weight-decay", a.weight_decay}, {"rank", lora.rank},    {"alpha", lora.alpha},
                        {"dropout", a.dropout}, {"targets", lora.targets_string()}, {"lora-seed", a.lora_seed},
                        {"seq-len", a.seq_len}, {"train-on", a.train_on},         {"chat-format", a.chat_format},
                        {"long-examples", a.long_examples}, {"bad-lines", a.bad_lines},
                        {"max-bad-steps", a.max_bad_steps}, {"spike-factor", a.spike_factor},
                        {"max-rollbacks", a.max_rollbacks}, {"early-stop", a.early_stop},
                        {"adapter", a.adapter.empty() ? std::string() : fingerprint_path(a.adapter)}};
  // MeZO's direction stream is a pure function of (seed, step), both above; the method and its
  // perturbation size are added only for MeZO runs so first-order checkpoints keep their identity.
  if (a.method != "first-order") {
    cfg["method"] = a.method;
    cfg["mezo-eps"] = a.mezo_eps;
  }
  add_precision_identity(cfg, a);
  nlohmann::json id = {{"model", fingerprint_path(a.model)}, {"data", fingerprint_data_file(a.data)}, {"config", cfg}};
  // Validation picks the adapter kept and when early stopping ends the run.
  if (!a.valid.empty()) id["valid"] = fingerprint_data_file(a.valid);
  return id;
}

// Options checked before any file is read: refused when they cannot mean what they say,
// warned about when they are legal but almost certainly not what the user wants.
void check_options(const TrainingJobOptions& a, TrainingJobOutput& out) {
  if (!std::isfinite(a.alpha) || a.alpha <= 0)
    fail("--alpha " + strformat("%g", a.alpha), "the LoRA scale alpha / rank must be positive",
         "the usual choice is alpha = 2 x rank (16 for rank 8)");
  if (a.rank < 1) fail("--rank " + std::to_string(a.rank), "must be at least 1");
  if (!std::isfinite(a.clip) || a.clip < 0)
    fail("--clip " + strformat("%g", a.clip), "must be 0 (no clipping) or positive", "the default is 1.0");
  if (!(a.dropout >= 0 && a.dropout < 1)) fail("--dropout " + strformat("%g", a.dropout), "must be in [0, 1)");
  if (!std::isfinite(a.lr) || a.lr <= 0) fail("--lr " + strformat("%g", a.lr), "the learning rate must be positive");
  if (!std::isfinite(a.weight_decay) || a.weight_decay < 0)
    fail("--weight-decay " + strformat("%g", a.weight_decay), "must be 0 or positive");
  if (a.early_stop < 0) fail("--early-stop " + std::to_string(a.early_stop), "must be 0 (off) or positive");
  if (a.early_stop > 0 && a.valid.empty())
    fail("--early-stop", "stops on validation loss, so it needs --valid", "give --valid FILE, or drop --early-stop");
  if (a.early_stop > 0 && a.val_every <= 0)
    fail("--early-stop", "counts validations, but without --val-every the run validates only before and after",
         "add --val-every N");
  if (a.max_bad_steps < 1) fail("--max-bad-steps " + std::to_string(a.max_bad_steps), "must be at least 1");
  if (a.max_rollbacks < 0) fail("--max-rollbacks " + std::to_string(a.max_rollbacks), "must be 0 or positive");
  if (!std::isfinite(a.spike_factor) || (a.spike_factor != 0 && a.spike_factor <= 1))
    fail("--spike-factor " + strformat("%g", a.spike_factor), "must be 0 (off) or above 1");
  if (a.lr > 0.1)
    out.warning(strformat("--lr %g is far above the usual LoRA range (1e-5 to 1e-2); the divergence guard will "
                          "roll back and halve it if training blows up",
                          a.lr));
  else if (a.lr < 1e-7)
    out.warning(strformat("--lr %g is so small that the adapter will hardly change", a.lr));
  if (a.clip == 0 && a.method == "first-order")
    out.warning("--clip 0: no gradient clipping; one bad batch can throw the adapter far off");
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
  if (ds.byte_order_mark) out.line(strformat("%s: starts with a UTF-8 byte-order mark (ignored)", path.c_str()));
  if (!ds.ignored_keys.empty())
    out.line(strformat("%s: ignored key(s) that are not part of the data format: %s", path.c_str(),
                       ds.describe_ignored_keys().c_str()));
  if (ds.n_skipped() > 0)
    out.warning(strformat("%s: %lld left out: %s", path.c_str(), static_cast<long long>(ds.n_skipped()),
                          ds.describe_skipped().c_str()));
  if (ds.n_truncated > 0)
    out.warning(strformat("%s: %lld example(s) longer than --seq-len %lld were cut to their first %lld tokens "
                          "(--long-examples skip leaves them out)",
                          path.c_str(), static_cast<long long>(ds.n_truncated), static_cast<long long>(opt.max_tokens),
                          static_cast<long long>(opt.max_tokens)));
  out.line(strformat("%s: %s, %zu examples (%s%s), %lld tokens, %lld supervised", what, path.c_str(),
                     ds.examples.size(), ds.mixed_formats ? "mixed formats, first " : "", data_format_name(ds.format),
                     static_cast<long long>(ds.n_tokens()), static_cast<long long>(ds.n_supervised())));
  return ds;
}

// The data's counts for run.json: what was trained on and what was left out, and why.
nlohmann::json data_record(const Dataset& ds) {
  nlohmann::json skipped = nlohmann::json::array();
  for (const SkippedLines& s : ds.skipped)
    skipped.push_back({{"reason", s.reason}, {"count", s.count}, {"first_lines", s.first_lines}});
  nlohmann::json ignored = nlohmann::json::object();
  for (const auto& [k, n] : ds.ignored_keys) ignored[k] = n;
  return {{"examples", ds.examples.size()}, {"tokens", ds.n_tokens()},  {"supervised", ds.n_supervised()},
          {"truncated", ds.n_truncated},     {"skipped", skipped},        {"ignored_keys", ignored}};
}

// The divergence guard's state in a checkpoint's progress record, and back.
nlohmann::json guard_json(const GuardState& g) {
  return {{"lr_scale", g.lr_scale}, {"rollbacks", g.rollbacks}, {"bad_in_row", g.bad_in_row}, {"recent", g.recent}};
}
GuardState guard_from_json(const nlohmann::json& j, const std::string& where) {
  GuardState g;
  if (!j.is_object()) return g;  // a checkpoint from before the guard: a fresh guard
  try {
    g.lr_scale = j.at("lr_scale").get<double>();
    g.rollbacks = j.at("rollbacks").get<int>();
    g.bad_in_row = j.at("bad_in_row").get<int>();
    g.recent = j.at("recent").get<std::vector<double>>();
  } catch (const nlohmann::json::exception&) {
    fail(where, "its divergence-guard record is damaged", "start a new run in another --out");
  }
  return g;
}

bool is_temp_file_or_cmd(const std::string& s) { return s.rfind("file:", 0) == 0 || s.rfind("cmd:", 0) == 0; }

}  // namespace

namespace {

TrainingJobResult run_job(const TrainingJobOptions& a, TrainingJobOutput& out, ResidentModel* resident) {
  // Options that need no file come first: a typo fails before any loading.
  TrainConfig tc;
  if (resident) {
    tc.shared_engine = &resident->engine();
    tc.turns = &resident->turns();
  }
  tc.schedule = parse_schedule(a.schedule);
  DataOptions dopt;
  dopt.train_on = parse_train_on(a.train_on);
  dopt.max_tokens = a.seq_len;
  dopt.long_examples = parse_long_examples(a.long_examples);
  dopt.bad_lines = parse_bad_lines(a.bad_lines);
  if (!a.chat_format.empty()) dopt.chat_format = parse_chat_format(a.chat_format);
  check_options(a, out);
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
  if (!a.max_memory.empty() && a.keep_blocks > 0)
    fail("--keep-blocks", "cannot be combined with --max-memory", "give one of them");
  if (!a.max_memory.empty()) {
    tc.max_memory = parse_memory_size(a.max_memory);
  } else if (a.keep_blocks > 0) {
    tc.keep_blocks = a.keep_blocks;
  } else {
    const MemoryBudget budget = default_memory_budget(read_memory_state(), a.background);
    tc.max_memory = budget.bytes;
    tc.max_memory_rule = budget.rule;
  }
  // The estimate counts the run's checkpoint saves, and a calibration when auto may make one
  // (a cached plan or a resumed run's skips it: the estimate is then a little high).
  tc.saves_checkpoints = true;
  tc.int8_products = a.precision != "f32" && a.precision != "f16";  // int8, auto, or a plan file
  if (a.precision == "auto") {
    tc.calibration_tokens = a.precision_calib_tokens;
    tc.calibration_replay_bytes = calibration_replay_bytes(a);
  }
  tc.val_every = a.val_every;
  tc.clip = a.clip;
  tc.adamw.weight_decay = a.weight_decay;
  tc.method = parse_train_method(a.method);
  tc.mezo_eps = a.mezo_eps;
  tc.guard.max_bad_steps = a.max_bad_steps;
  tc.guard.spike_factor = a.spike_factor;
  tc.guard.max_rollbacks = a.max_rollbacks;
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
  // One trainer per folder. An existing folder is locked before anything is loaded, so a
  // second `train` on it refuses at once; a new one is created (and locked) only once the
  // inputs are known to be good, so a bad input leaves nothing behind.
  std::unique_ptr<FolderLock> lock;
  if (fs::is_directory(a.out, ec)) lock = std::make_unique<FolderLock>(a.out, "training run", a.wait_lock);

  std::unique_ptr<Model> own_model;
  const Model* model = resident ? &resident->model() : (own_model = Model::load(a.model)).get();
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
    // Explicit LoRA settings that differ from the adapter's would be silently ignored.
    std::string differ;
    if (a.rank_given && a.rank != adapter.cfg.rank)
      differ += strformat(" --rank %lld (the adapter's is %lld);", static_cast<long long>(a.rank),
                          static_cast<long long>(adapter.cfg.rank));
    if (a.alpha_given && a.alpha != adapter.cfg.alpha)
      differ += strformat(" --alpha %g (the adapter's is %g);", a.alpha, adapter.cfg.alpha);
    if (a.targets_given && lc.targets != adapter.cfg.targets)
      differ += " --targets " + lc.targets_string() + " (the adapter's are " + adapter.cfg.targets_string() + ");";
    if (!differ.empty()) {
      differ.pop_back();
      fail(a.adapter, "continuing this adapter keeps its own LoRA settings, but" + differ,
           "drop those options (or give the adapter's values), or train a new adapter without --adapter");
    }
    out.line("continuing from " + a.adapter + " (its rank, alpha and targets apply)");
  } else {
    adapter = LoraAdapter::init(mc, lc);
  }
  out.line(strformat("lora: rank %lld, alpha %g, dropout %g, targets %s, %lld trainable parameters",
                     static_cast<long long>(adapter.cfg.rank), adapter.cfg.alpha, adapter.cfg.dropout,
                     adapter.cfg.targets_string().c_str(), static_cast<long long>(adapter.n_params())));

  const std::optional<PrecisionPlan> plan_file = read_precision_file(a, mc.n_layer);
  const nlohmann::json identity = run_identity(a, adapter.cfg);
  Trainer trainer(*model, train, valid.get(), tc, std::move(adapter));
  if (a.warmup > trainer.total_steps())
    out.warning(strformat("--warmup %lld is longer than the run's %lld steps: the learning rate never reaches --lr",
                          static_cast<long long>(a.warmup), static_cast<long long>(trainer.total_steps())));
  out.line(strformat("training (%s): %lld steps (%lld per epoch), batch %lld x %lld accumulated, lr %g %s, warmup %lld",
                     train_method_name(tc.method), static_cast<long long>(trainer.total_steps()),
                     static_cast<long long>(trainer.steps_per_epoch()), static_cast<long long>(a.batch),
                     static_cast<long long>(a.grad_accum), a.lr, a.schedule.c_str(), static_cast<long long>(a.warmup)));
  out.line("memory plan: " + trainer.memory_plan().describe());

  // Inputs are valid: from here on the folder is written.
  make_dirs(a.out);
  if (!lock) lock = std::make_unique<FolderLock>(a.out, "training run", a.wait_lock);
  const fs::path log_path = fs::path(a.out) / "log.jsonl";
  CheckpointStore store((fs::path(a.out) / "checkpoints").string(), a.keep);
  std::optional<LoadedCheckpoint> loaded = store.load_latest();
  BestAdapter best(a.out);
  bool early_stopped = false;  // a run that stopped early is finished: a re-run only rewrites its files
  int64_t tokens_before = 0;
  double elapsed_before = 0;
  std::optional<PrecisionPlan> stored_plan;
  if (loaded) {
    for (const std::string& s : loaded->skipped) out.warning("damaged checkpoint skipped: " + s);
    // The header first; the state is decoded straight into the trainer's adapter and moments
    // (no decoded copy next to them), then the bytes are freed: the resume holds the
    // trainer's state and the file's bytes, never a third copy.
    const Checkpoint ck = decode_checkpoint_header(loaded->payload, loaded->path);
    check_identity(ck.meta.identity, identity, loaded->path);
    const nlohmann::json& progress = ck.meta.progress;
    auto number = [&](const char* key) {
      const auto it = progress.find(key);
      return it != progress.end() && it->is_number() ? it->get<double>() : 0.0;
    };
    elapsed_before = number("elapsed_s");
    trainer.resume_from(checkpoint_state_bytes(loaded->payload, loaded->path), loaded->path, elapsed_before);
    std::string().swap(loaded->payload);  // decoded: the bytes are not kept through the run
    trainer.restore_guard(guard_from_json(progress.value("guard", nlohmann::json()), loaded->path));
    best.restore(progress.value("best", nlohmann::json::object()), loaded->path);
    early_stopped = progress.value("early_stopped", nlohmann::json(false)) == true;
    stored_plan = ck.precision;
    tokens_before = static_cast<int64_t>(number("tokens"));
    out.line(strformat("resuming from %s: step %lld/%lld", loaded->path.c_str(),
                       static_cast<long long>(trainer.steps_done()), static_cast<long long>(trainer.total_steps())));
    trim_log(log_path, trainer.steps_done());
  } else if (a.resume) {
    fail(store.dir(), "--resume was given but there is no checkpoint to resume from",
         "run without --resume to start a new run in this folder");
  } else {
    best.restore(nlohmann::json::object(), a.out);  // a new run: no best from an abandoned start
  }
  setup_precision(trainer, a, loaded ? stored_plan : plan_file, loaded.has_value(), mc.n_layer, out);
  AppendFile log(log_path.string(), !loaded);

  double last_step_s = 0;  // the last step's duration, for the pacer
  // Energy is logged whenever the machine tells it, background or not.
  EnergyMeter energy = EnergyMeter::open(a.sysfs_root);
  // Progress figures that go into each checkpoint (not part of the trajectory).
  double elapsed_s = elapsed_before;
  int64_t tokens_total = tokens_before;
  int64_t last_saved = trainer.steps_done();
  // Structured progress (TrainingJobOutput::progress): the figures of the latest events, sent
  // again with each new one. Each event's numbers are those of its log.jsonl row.
  TrainingProgress now;
  now.step = trainer.steps_done();
  now.total_steps = trainer.total_steps();
  now.elapsed_s = elapsed_before;
  auto report = [&](TrainingProgress::Event event, const std::function<void(TrainingProgress&)>& detail) {
    TrainingProgress p = now;
    p.event = event;
    if (detail) detail(p);
    out.progress(p);
  };
  // Saves the trainer's state as it is now (at a step boundary, or before the first step),
  // streamed from its own buffers into the file: no copy of the state is made.
  auto save = [&] {
    const TrainStateView st = trainer.state_view();
    // The guard keeps the state finite; this makes sure no file ever says otherwise.
    if (!st.adapter.all_finite() || !st.adam_m.all_finite() || !st.adam_v.all_finite())
      fail(store.dir(), "refusing to write a checkpoint with non-finite values (a bug: please report it)");
    CheckpointMeta meta;
    meta.identity = identity;
    meta.progress = {{"elapsed_s", elapsed_s},  {"tokens", tokens_total}, {"guard", guard_json(trainer.guard_state())},
                     {"best", best.to_json()}, {"early_stopped", early_stopped}};
    const std::optional<PrecisionPlan> precision = trainer.precision();
    store.save(st.step, [&](const ByteSink& emit) { write_checkpoint(meta, st, precision, emit); });
    trainer.set_rollback_point_here();
    best.prune();
    last_saved = st.step;
    report(TrainingProgress::Event::Checkpoint, [&](TrainingProgress& p) { p.step = st.step; });
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
    const std::string status =
        strformat("step %lld/%lld  loss %.4f  lr %.2e  grad_norm %.3f  %.0f tok/s  elapsed %s  ETA %s",
                  static_cast<long long>(r.step), static_cast<long long>(r.total), r.loss, r.lr, r.grad_norm,
                  tokens_per_s, hms(elapsed_s).c_str(), hms(r.eta_s).c_str()) +
        (r.skipped ? "  NOT APPLIED: " + r.skip_reason : std::string());
    out.step_status(status);
    now.step = r.step;
    now.total_steps = r.total;
    now.epoch = r.epoch;
    now.loss = r.loss;
    now.lr = r.lr;
    now.grad_norm = r.grad_norm;
    now.tokens_per_s = tokens_per_s;
    now.skipped = r.skipped;
    now.elapsed_s = elapsed_s;
    report(TrainingProgress::Event::Step, [&](TrainingProgress& p) { p.status = status; });
  };
  auto on_val = [&](const ValReport& r) {
    log << val_json(r) << "\n";
    log.flush();
    const bool improved = best.consider(r.step, r.loss, trainer.state_view().adapter, *model);
    out.line(strformat("val step %lld: loss %.4f (%lld tokens)%s", static_cast<long long>(r.step), r.loss,
                       static_cast<long long>(r.supervised), improved ? ", best so far" : ""));
    now.val_loss = r.loss;
    report(TrainingProgress::Event::Validation, [&](TrainingProgress& p) { p.step = r.step; });
  };
  int64_t diverged_at = 0;  // the step that ended the run as diverged
  trainer.set_guard_listener([&](const GuardEvent& e) {
    nlohmann::json row;
    if (e.kind == GuardEvent::Kind::Rollback) {
      row = {{"type", "rollback"}, {"step", e.step}, {"to_step", e.to_step}, {"lr_scale", e.lr_scale}, {"reason", e.reason}};
      out.warning(strformat("step %lld: %s: rolled back to step %lld, learning rate now x%g", static_cast<long long>(e.step),
                            e.reason.c_str(), static_cast<long long>(e.to_step), e.lr_scale));
    } else {
      row = {{"type", "diverged"}, {"step", e.step}, {"reason", e.reason}};
      diverged_at = e.step;
    }
    log << row.dump() << "\n";
    log.flush();
  });
  // Signals stop a job the process runs for itself; a job on a caller's resident model (a
  // server, an app) leaves the process's signals alone and stops through stop_requested().
  std::optional<StopSignals> signals;
  if (!resident) signals.emplace();
  const auto signal_seen = [&] { return signals ? signals->signal() : 0; };
  int caller_stop = 0;  // stop_requested() said yes
  auto stop_asked = [&] {
    if (signals && signals->requested()) return true;
    if (!caller_stop && out.stop_requested()) caller_stop = 1;
    return caller_stop != 0;
  };
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
  auto gate_allows = [&](std::string& reason) {
    if (!gate) return true;
    auto use = [&] {
      BudgetUse u;
      u.wall_s = SystemClock().now_s() - session_start;
      u.steps = trainer.steps_done();
      u.energy_j = energy.joules();
      return u;
    };
    bool waited = false;
    auto on_wait = [&](const GateDecision& d) {
      save();
      out.line(strformat("waiting (checkpoint saved at step %lld): %s", static_cast<long long>(trainer.steps_done()),
                         d.reason.c_str()));
      log << nlohmann::json({{"type", "wait"}, {"step", trainer.steps_done()}, {"reason", d.reason}}).dump() << "\n";
      log.flush();
      waited = true;
      report(TrainingProgress::Event::Waiting, [&](TrainingProgress& p) {
        p.paused = true;
        p.reason = d.reason;
      });
    };
    GateDecision d = gate->wait_until_runnable(use, on_wait, [&] { return stop_asked(); });
    if (waited)  // the wait is over: training goes on, or the job stops (reason: why)
      report(TrainingProgress::Event::Waiting, [&](TrainingProgress& p) {
        if (d.verdict != GateVerdict::Run) p.reason = d.reason;
      });
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
    pacer = std::make_unique<Pacer>(pc, sensor, sleep_seconds, [&] { return stop_asked() || (pause && pause->paused()); });
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
    report(TrainingProgress::Event::Pacing, [&](TrainingProgress& p) {
      p.step = done;
      p.idle_s = d.idle_s;
      p.reason = d.reason;
    });
    pacer->before_step();
  };
  auto signal_name = [&]() -> std::string {
    const int sig = signal_seen();
    if (sig == 0) return "stopped by the caller";
    return sig == SIGINT ? "SIGINT" : sig == SIGHUP ? "SIGHUP" : "SIGTERM";
  };
  using clock = std::chrono::steady_clock;
  auto last_save_time = clock::now();
  const int64_t session_first = trainer.steps_done();
  std::string stop_reason;
  auto at_boundary = [&](int64_t done) {
    if (done < trainer.total_steps()) pace(done);
    if (fake_clock) fake_clock->advance(fake_step_s);
    if (stop_asked()) stop_reason = signal_name();
    else if (a.early_stop > 0 && best.evals_since() >= a.early_stop && done < trainer.total_steps()) {
      early_stopped = true;
      stop_reason = strformat("early stop: %lld validations without improvement", static_cast<long long>(a.early_stop));
      log << nlohmann::json({{"type", "early_stop"}, {"step", done}, {"reason", stop_reason}}).dump() << "\n";
      log.flush();
    } else if (a.max_steps > 0 && done - session_first >= a.max_steps) stop_reason = "--max-steps reached";
    else if (done < trainer.total_steps() && !gate_allows(stop_reason) && stop_asked())
      stop_reason = signal_name();
    const bool by_steps = a.save_every > 0 && done % a.save_every == 0;
    const bool by_time = a.save_every_sec > 0 &&
                         std::chrono::duration<double>(clock::now() - last_save_time).count() >= a.save_every_sec;
    if ((by_steps || by_time || !stop_reason.empty()) && done < trainer.total_steps()) {
      save();
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
  if (!a.options_record.is_null()) rec["options"] = a.options_record;
  if (!a.config_file.empty()) rec["config_file"] = a.config_file;
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
  rec["data_counts"] = {{"train", data_record(train)}};
  if (valid) rec["data_counts"]["valid"] = data_record(*valid);
  record.start_session(trainer.steps_done());
  log << nlohmann::json({{"type", "session"}, {"step", trainer.steps_done()}, {"resumed", loaded.has_value()}}).dump()
      << "\n";
  log.flush();

  TrainingJobResult result;
  result.total_steps = trainer.total_steps();
  // The gate is asked before the first step too (a job started off-charger waits at once).
  // The wall-time budget counts from here: loading and setting up (the model, the pacer, the
  // run record's writes) are not charged. (Charged from before the setup, a 0.35 s budget
  // was once used up before the first step, in a test under the load of the whole suite.)
  session_start = SystemClock().now_s();
  // run() returns the trainer's own adapter by reference (no copy): the final files are
  // written from it, or from the best one kept, below.
  if (early_stopped) {
    // Stopped early in an earlier session: only the files are rewritten (below).
  } else if (trainer.finished() || gate_allows(stop_reason)) {
    trainer.run(on_step, on_val, at_boundary);
  } else if (trainer.steps_done() != last_saved || store.list().empty()) {
    save();
  }
  result.step = trainer.steps_done();
  if (trainer.diverged()) {
    // The last checkpoint holds the state the run went back to; nothing else is written.
    out.line(strformat("diverged at step %lld: %s. No adapter was written; the last checkpoint (step %lld) is kept. "
                       "Try a smaller --lr (this run used %g%s), keep --clip on, and check the data for broken "
                       "examples.",
                       static_cast<long long>(diverged_at), trainer.diverged_reason().c_str(),
                       static_cast<long long>(trainer.steps_done()), a.lr, a.clip > 0 ? "" : ", with --clip 0"));
    record.end_session("diverged: " + trainer.diverged_reason(), trainer.steps_done());
    result.diverged = true;
    result.stop_reason = "diverged: " + trainer.diverged_reason();
    return result;
  }
  if (!trainer.finished() && !early_stopped) {
    out.line(strformat("stopped at step %lld/%lld (%s); checkpoint saved in %s: run the same command again to continue",
                       static_cast<long long>(trainer.steps_done()), static_cast<long long>(trainer.total_steps()),
                       stop_reason.c_str(), store.dir().c_str()));
    record.end_session("stopped: " + stop_reason, trainer.steps_done());
    result.stop_reason = stop_reason;
    result.signal = signal_seen();
    return result;
  }
  // The final state is a checkpoint too: it holds the optimizer state, and a re-run of a
  // finished job finds it and only rewrites the adapter files.
  if (last_saved != trainer.steps_done()) save();

  // With a validation set, the adapter kept is the best-validated one (often the last).
  std::string why;
  result.kept_step = trainer.steps_done();
  // Both by reference: the files are written from the trainer's adapter or the best one kept,
  // not from a copy of either.
  const LoraAdapter* trained = &trainer.state_view().adapter;
  if (best.has()) {
    trained = &best.adapter(*model);
    result.kept_step = best.step();
    result.kept_val_loss = best.val_loss();
    why = strformat("the best validation loss, %.4f", best.val_loss());
    rec["kept_adapter"] = {{"step", best.step()}, {"val_loss", best.val_loss()}, {"why", why}};
  } else {
    why = valid ? "no finite validation loss to choose by" : "the last step's (no --valid to choose by)";
    rec["kept_adapter"] = {{"step", result.kept_step}, {"why", why}};
  }
  if (!trained->all_finite())
    fail(a.out, "refusing to write an adapter with non-finite values (a bug: please report it)");
  save_adapter_peft(*trained, *model, a.out);
  const fs::path gguf_path = fs::path(a.out) / "adapter.gguf";
  save_adapter_gguf(*trained, *model, gguf_path.string());
  out.line("saved: " + a.out + " (PEFT: adapter_model.safetensors + adapter_config.json) and " + gguf_path.string());
  out.line(strformat("kept the adapter of step %lld: %s", static_cast<long long>(result.kept_step), why.c_str()) +
           (early_stopped ? " (" + stop_reason + ")" : std::string()));
  rec["adapter"] = {{"peft", a.out}, {"gguf", gguf_path.string()}};
  record.end_session(early_stopped ? "finished (early stop)" : "finished", trainer.steps_done());
  result.finished = true;
  result.early_stopped = early_stopped;
  return result;
}

}  // namespace

TrainingJobResult run_training_job(const TrainingJobOptions& options, TrainingJobOutput& output) {
  return run_job(options, output, nullptr);
}

TrainingJobResult run_training_job(const TrainingJobOptions& options, TrainingJobOutput& output,
                                   ResidentModel& resident) {
  if (!options.model.empty() && options.model != resident.path())
    fail("model " + options.model, "this job runs on the resident model " + resident.path(),
         "leave the job's model empty, or give the resident model's path");
  TrainingJobOptions o = options;
  o.model = resident.path();  // the run's identity, plan cache and run.json name the file
  return run_job(o, output, &resident);
}

int exit_code_of(const TrainingJobResult& r) {
  if (r.finished) return exit_code::kFinished;
  if (r.diverged) return exit_code::kDiverged;
  if (r.signal != 0) return exit_code::signal_code(r.signal);
  return exit_code::kStopped;
}

}  // namespace nl
