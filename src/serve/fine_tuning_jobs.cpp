#include "serve/fine_tuning_jobs.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "nightlora/job/atomic_file.h"
#include "nightlora/job/file_ops.h"
#include "nightlora/train/resident_model.h"
#include "nightlora/util/error.h"
#include "serve/adapter_registry.h"
#include "serve/api_error.h"
#include "serve/file_store.h"
#include "serve/fine_tuning_request.h"
#include "serve/request_fields.h"

namespace fs = std::filesystem;

namespace nl::serve {

// Events kept per job (the oldest step lines go first).
constexpr size_t kMaxEvents = 500;

struct FineTuningJobs::Job {
  nlohmann::json record;    // the job as OpenAI's API shows it
  nlohmann::json settings;  // the training options, fixed when the job was made (resume needs the same)
  std::vector<nlohmann::json> events;  // oldest first
  std::string folder;
  std::atomic<bool> cancel{false};
  std::chrono::steady_clock::time_point last_persist{};
};

namespace {

bool well_formed_job_id(const std::string& id) {
  if (id.size() != 6 + 24 || id.compare(0, 6, "ftjob-") != 0) return false;
  return std::all_of(id.begin() + 6, id.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

nlohmann::json make_event(const std::string& message, const std::string& level,
                          const nlohmann::json& data = nlohmann::json::object(), const std::string& type = "message") {
  return {{"object", "fine_tuning.job.event"}, {"id", random_id("ftevent-")}, {"created_at", unix_now()},
          {"level", level},  {"message", message},  {"data", data}, {"type", type}};
}

// Appends an event to a job's list, the oldest step events going first beyond kMaxEvents.
void push_event(std::vector<nlohmann::json>& events, nlohmann::json event) {
  events.push_back(std::move(event));
  if (events.size() > kMaxEvents) events.erase(events.begin() + 1);  // keep "created"
}

// A number for an event's data: null when it is not finite (JSON has no NaN).
nlohmann::json finite_or_null(double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); }

// OpenAI's metrics event for a step or a validation: "Step 3/10: training loss=1.234", with
// the figures in data (train_loss, valid_loss, ...), the same numbers as the run's log.jsonl.
nlohmann::json metrics_event(const TrainingProgress& p) {
  const bool val = p.event == TrainingProgress::Event::Validation;
  const double loss = val ? p.val_loss : p.loss;
  char figure[32];
  std::snprintf(figure, sizeof(figure), "%.4f", loss);
  std::string message = "Step " + std::to_string(p.step) + "/" + std::to_string(p.total_steps) + ": " +
                        (val ? "validation" : "training") + " loss=" + (std::isfinite(loss) ? figure : "n/a");
  if (!val && p.skipped) message += " (not applied: the divergence guard refused the step)";
  nlohmann::json data = {{"step", p.step}, {"total_steps", p.total_steps}};
  if (val) {
    data["valid_loss"] = finite_or_null(p.val_loss);
  } else {
    data.update({{"train_loss", finite_or_null(p.loss)}, {"epoch", p.epoch}, {"learning_rate", finite_or_null(p.lr)},
                 {"tokens_per_second", finite_or_null(p.tokens_per_s)}, {"elapsed_seconds", p.elapsed_s}});
    if (std::isfinite(p.val_loss)) data["valid_loss"] = p.val_loss;  // the last validation's
  }
  return make_event(message, "info", data, "metrics");
}

}  // namespace

// Where the training job reports: lines and warnings become the job's events, each step and
// validation a metrics event (from the job's structured progress), waits a warning; and the
// job asks at every step boundary whether it should stop (cancelled, or the server stopping).
class FineTuningJobs::Output : public TrainingJobOutput {
 public:
  Output(FineTuningJobs& jobs, Job& job) : jobs_(jobs), job_(job) {}
  void line(const std::string& text) override { event(text, "info"); }
  void warning(const std::string& text) override { event(text, "warn"); }
  void progress(const TrainingProgress& p) override {
    using E = TrainingProgress::Event;
    if (p.event != E::Step && p.event != E::Validation) return;  // waits and saving come as lines
    std::lock_guard<std::mutex> lock(jobs_.mu_);
    job_.record["progress"] = {{"step", p.step}, {"total_steps", p.total_steps}};
    push_event(job_.events, metrics_event(p));
    // Steps come often: the record is written at most once a second for them.
    if (std::chrono::steady_clock::now() - job_.last_persist > std::chrono::seconds(1)) jobs_.persist(job_);
  }
  bool stop_requested() override {
    std::lock_guard<std::mutex> lock(jobs_.mu_);
    return job_.cancel || jobs_.stopping_;
  }

 private:
  void event(const std::string& raw, const std::string& level) {
    // The training job names its files by path; a client sees them relative to the data
    // folder ("<data>/jobs/..."), not where the server keeps it.
    std::string text = raw;
    const std::string data = fs::path(jobs_.dir_).parent_path().string();
    for (size_t at; !data.empty() && (at = text.find(data)) != std::string::npos;) text.replace(at, data.size(), "<data>");
    std::lock_guard<std::mutex> lock(jobs_.mu_);
    jobs_.add_event(job_, text, level);
    // Step lines come often: the record is written at most once a second for them.
    if (std::chrono::steady_clock::now() - job_.last_persist > std::chrono::seconds(1)) jobs_.persist(job_);
  }
  FineTuningJobs& jobs_;
  Job& job_;
};

FineTuningJobs::FineTuningJobs(ResidentModel& resident, AdapterRegistry& registry, const FileStore& files,
                               const std::string& dir, int max_queued, std::function<void(const std::string&)> log)
    : resident_(resident), registry_(registry), files_(files), dir_(dir), max_queued_(max_queued), log_(std::move(log)) {
  make_dirs(dir_);
  std::vector<std::shared_ptr<Job>> pending;
  for (const fs::directory_entry& e : fs::directory_iterator(dir_)) {
    const std::string id = e.path().filename().string();
    const fs::path rec_path = e.path() / "job.json";
    if (!well_formed_job_id(id) || !fs::exists(rec_path)) continue;
    nlohmann::json j = nlohmann::json::parse(read_file(rec_path.string()), nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("job") || !j.contains("settings"))
      fail(rec_path.string(), "a job record is not valid", "remove the job's folder");
    auto job = std::make_shared<Job>();
    job->record = j["job"];
    job->settings = j["settings"];
    for (const nlohmann::json& ev : j.value("events", nlohmann::json::array())) job->events.push_back(ev);
    job->folder = e.path().string();
    const std::string status = job->record.value("status", "");
    if (status == "succeeded") {
      const std::string name = job->record.value("fine_tuned_model", "");
      try {
        registry_.add(name, (e.path() / "run" / "adapter.gguf").string(), id, job->record.value("finished_at", int64_t{0}));
      } catch (const std::exception& ex) {
        log_(std::string("warning: the adapter of ") + id + " cannot be served: " + ex.what());
      }
    } else if (status == "queued" || status == "running") {
      pending.push_back(job);
    }
    jobs_[id] = job;
  }
  std::sort(pending.begin(), pending.end(), [](const auto& a, const auto& b) {
    return a->record.value("created_at", int64_t{0}) < b->record.value("created_at", int64_t{0});
  });
  for (const auto& job : pending) {
    const bool was_running = job->record.value("status", "") == "running";
    job->record["status"] = "queued";
    add_event(*job, was_running ? "The server restarted: the job continues from its newest checkpoint"
                                : "The server restarted: the job is queued again");
    persist(*job);
    queue_.push_back(job->record["id"].get<std::string>());
    log_("job " + job->record["id"].get<std::string>() + " queued again after a restart");
  }
}

FineTuningJobs::~FineTuningJobs() { shutdown(); }

void FineTuningJobs::start() { thread_ = std::thread([this] { worker(); }); }

void FineTuningJobs::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void FineTuningJobs::persist(const Job& job) const {
  nlohmann::json j = {{"job", job.record}, {"settings", job.settings}, {"events", job.events}};
  write_file_atomic((fs::path(job.folder) / "job.json").string(), j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  const_cast<Job&>(job).last_persist = std::chrono::steady_clock::now();
}

void FineTuningJobs::add_event(Job& job, const std::string& message, const std::string& level) {
  push_event(job.events, make_event(message, level));
}

std::shared_ptr<FineTuningJobs::Job> FineTuningJobs::find(const std::string& id) const {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) not_found("No such fine-tuning job: '" + id + "'", "fine_tuning_job_id", "job_not_found");
  return it->second;
}

nlohmann::json FineTuningJobs::create(const nlohmann::json& body) {
  // Every field's type first (fine_tuning_request.h), then the model and the files.
  FineTuningRequest req = read_fine_tuning_request(body, resident_.model().config.context);
  const std::string& model = req.model;
  if (model != registry_.base_id())
    bad_request("fine-tuning starts from the base model '" + registry_.base_id() + "'; '" + model + "' is not it",
                "model", "invalid_value");
  const std::string& training_file = req.training_file;
  const std::optional<std::string>& validation_file = req.validation_file;
  const std::optional<std::string>& suffix = req.suffix;
  const int64_t seed = req.seed;
  nlohmann::json& settings = req.settings;
  // The files last, once every field has its type: ids this server made, never paths.
  try {
    settings["data"] = files_.data_path(training_file, "training_file");
  } catch (const ApiError&) {
    bad_request("training_file '" + training_file + "' is not a file on this server (POST /v1/files first)",
                "training_file", "file_not_found");
  }
  if (validation_file) {
    try {
      settings["valid"] = files_.data_path(*validation_file, "validation_file");
    } catch (const ApiError&) {
      bad_request("validation_file '" + *validation_file + "' is not a file on this server", "validation_file",
                  "file_not_found");
    }
  }

  std::lock_guard<std::mutex> lock(mu_);
  const size_t active = std::count_if(jobs_.begin(), jobs_.end(), [](const auto& kv) {
    const std::string s = kv.second->record.value("status", "");
    return s == "queued" || s == "running";
  });
  if (static_cast<int>(active) >= max_queued_)
    throw ApiError(429, "rate_limit_error",
                   "this server already has " + std::to_string(active) + " fine-tuning jobs queued or running (at most " +
                       std::to_string(max_queued_) + "); wait for one to finish or cancel one",
                   "", "too_many_jobs");
  auto job = std::make_shared<Job>();
  const std::string id = random_id("ftjob-");
  job->folder = (fs::path(dir_) / id).string();
  job->settings = settings;
  job->record = {{"object", "fine_tuning.job"},
                 {"id", id},
                 {"model", model},
                 {"created_at", unix_now()},
                 {"finished_at", nullptr},
                 {"fine_tuned_model", nullptr},
                 {"organization_id", "nightlora"},
                 {"result_files", nlohmann::json::array()},
                 {"status", "queued"},
                 {"validation_file", validation_file ? nlohmann::json(*validation_file) : nlohmann::json(nullptr)},
                 {"training_file", training_file},
                 {"hyperparameters",
                  {{"n_epochs", settings["epochs"]}, {"batch_size", settings["batch"]},
                   {"learning_rate_multiplier", settings["lr"].get<double>() / kBaseLearningRate},
                   {"n_steps", settings["iters"]}, {"rank", settings["rank"]}, {"alpha", settings["alpha"]},
                   {"seq_len", settings["seq_len"]}, {"precision", settings["precision"]}}},
                 {"trained_tokens", nullptr},
                 {"error", nullptr},
                 {"seed", seed},
                 {"estimated_finish", nullptr},
                 {"integrations", nlohmann::json::array()},
                 {"user_provided_suffix", suffix ? nlohmann::json(*suffix) : nlohmann::json(nullptr)},
                 {"progress", {{"step", 0}, {"total_steps", nullptr}}}};
  // The name its adapter will be served under.
  job->settings["fine_tuned_model"] = "ft:" + registry_.base_id() + ":" + (suffix ? *suffix + ":" : "") + id.substr(6);
  // Durable (its parent synced) before job.json is: a power cut must not drop a job that
  // was reported created along with its folder.
  make_dirs(job->folder);
  add_event(*job, "Created fine-tuning job: " + id);
  persist(*job);
  jobs_[id] = job;
  queue_.push_back(id);
  cv_.notify_all();
  log_("job " + id + " created");
  return job->record;
}

nlohmann::json FineTuningJobs::get(const std::string& id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return find(id)->record;
}

namespace {
// A page of a newest-first list: the items after the one with id `after` (all when empty).
nlohmann::json page(const std::vector<nlohmann::json>& newest_first, const std::string& after, int64_t limit) {
  size_t start = 0;
  if (!after.empty()) {
    auto it = std::find_if(newest_first.begin(), newest_first.end(), [&](const nlohmann::json& j) { return j["id"] == after; });
    start = it == newest_first.end() ? newest_first.size() : static_cast<size_t>(it - newest_first.begin()) + 1;
  }
  nlohmann::json data = nlohmann::json::array();
  for (size_t i = start; i < newest_first.size() && static_cast<int64_t>(data.size()) < limit; ++i)
    data.push_back(newest_first[i]);
  const bool more = start + data.size() < newest_first.size();
  return {{"object", "list"}, {"data", data}, {"has_more", more}};
}
}  // namespace

nlohmann::json FineTuningJobs::list(const std::string& after, int64_t limit) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<nlohmann::json> all;
  for (const auto& [id, job] : jobs_) all.push_back(job->record);
  std::stable_sort(all.begin(), all.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
    return a.value("created_at", int64_t{0}) > b.value("created_at", int64_t{0});
  });
  return page(all, after, limit);
}

nlohmann::json FineTuningJobs::events(const std::string& id, const std::string& after, int64_t limit) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::shared_ptr<Job> job = find(id);
  std::vector<nlohmann::json> newest_first(job->events.rbegin(), job->events.rend());
  return page(newest_first, after, limit);
}

nlohmann::json FineTuningJobs::cancel(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  std::shared_ptr<Job> job = find(id);
  const std::string status = job->record.value("status", "");
  if (status != "queued" && status != "running")
    bad_request("the job is " + status + ": only a queued or running job can be cancelled", "fine_tuning_job_id",
                "invalid_state");
  // A running job stops at its next step boundary (the worker sees the flag); the record
  // says cancelled at once, so a restart in between does not run it again.
  job->cancel = true;
  job->record["status"] = "cancelled";
  job->record["finished_at"] = unix_now();
  add_event(*job, "Fine-tuning job cancelled");
  persist(*job);
  log_("job " + id + " cancelled");
  return job->record;
}

TrainingJobOptions FineTuningJobs::options_of(const Job& job) const {
  const nlohmann::json& s = job.settings;
  TrainingJobOptions o;
  o.model = resident_.path();
  o.data = s["data"].get<std::string>();
  if (s.contains("valid")) o.valid = s["valid"].get<std::string>();
  o.out = (fs::path(job.folder) / "run").string();
  o.epochs = s["epochs"].get<int64_t>();
  o.batch = s["batch"].get<int64_t>();
  o.lr = s["lr"].get<double>();
  o.iters = s["iters"].get<int64_t>();
  o.rank = s["rank"].get<int64_t>();
  o.alpha = s["alpha"].get<float>();
  o.seq_len = s["seq_len"].get<int64_t>();
  o.grad_accum = s["grad_accum"].get<int64_t>();
  o.warmup = s["warmup"].get<int64_t>();
  o.lora_seed = s["lora_seed"].get<uint64_t>();
  o.save_every = s["save_every"].get<int64_t>();
  o.precision = s["precision"].get<std::string>();
  o.schedule = s["schedule"].get<std::string>();
  o.train_on = s["train_on"].get<std::string>();
  o.seed = s["seed"].get<uint64_t>();
  return o;
}

void FineTuningJobs::worker() {
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      const std::string id = queue_.front();
      queue_.pop_front();
      job = jobs_.at(id);
      if (job->record.value("status", "") != "queued") continue;  // cancelled while queued
      job->record["status"] = "running";
      add_event(*job, "Fine-tuning job started");
      persist(*job);
    }
    run_one(job);
  }
}

void FineTuningJobs::run_one(const std::shared_ptr<Job>& job) {
  const std::string id = job->record["id"].get<std::string>();
  log_("job " + id + " running");
  Output out(*this, *job);
  TrainingJobResult res;
  std::string error;
  try {
    res = run_training_job(options_of(*job), out, resident_);
  } catch (const Error& e) {
    error = e.what();
  } catch (const std::exception& e) {
    error = std::string("internal error (please report it): ") + e.what();
  }
  std::string name;
  if (error.empty() && res.finished) {
    name = job->settings["fine_tuned_model"].get<std::string>();
    try {
      registry_.add(name, (fs::path(job->folder) / "run" / "adapter.gguf").string(), id, unix_now());
    } catch (const std::exception& e) {
      error = std::string("the finished adapter cannot be loaded: ") + e.what();
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  job->record["progress"] = {{"step", res.step}, {"total_steps", res.total_steps}};
  if (!error.empty()) {
    job->record["status"] = "failed";
    job->record["finished_at"] = unix_now();
    job->record["error"] = {{"code", "training_failed"}, {"message", error}, {"param", nullptr}};
    add_event(*job, "Fine-tuning job failed: " + error, "error");
    log_("job " + id + " failed: " + error);
  } else if (res.finished) {
    job->record["status"] = "succeeded";
    job->record["finished_at"] = unix_now();
    job->record["fine_tuned_model"] = name;
    add_event(*job, "The job has successfully completed: " + name);
    log_("job " + id + " succeeded: " + name);
  } else if (res.diverged) {
    job->record["status"] = "failed";
    job->record["finished_at"] = unix_now();
    job->record["error"] = {{"code", "diverged"}, {"message", res.stop_reason}, {"param", nullptr}};
    add_event(*job, "Fine-tuning job failed: " + res.stop_reason, "error");
    log_("job " + id + " diverged");
  } else if (job->cancel) {
    add_event(*job, "Stopped at step " + std::to_string(res.step) + " after the cancellation");
  } else {
    // The server is stopping: the record stays "running" and the job continues from this
    // checkpoint when a server starts on the folder again.
    add_event(*job, "Paused at step " + std::to_string(res.step) + " (" + res.stop_reason +
                        "); it continues when the server starts again");
    log_("job " + id + " paused at step " + std::to_string(res.step));
  }
  persist(*job);
}

}  // namespace nl::serve
