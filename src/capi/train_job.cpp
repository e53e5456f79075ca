// nl_train_start and nl_job_*: `nightlora train` on the resident model in a background
// thread (nl::run_training_job with the ResidentModel: each step under a training turn, so
// the caller's generations go between steps). Pause and cancel go through
// TrainingJobOutput::stop_requested, which the job asks at every step boundary: pausing
// blocks there (the engine is free meanwhile), cancelling answers yes (the job saves a
// checkpoint and stops, resumable by the same options).
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "capi/objects.h"
#include "capi/train_options.h"
#include "nightlora/job/exit_codes.h"

using namespace nl::capi;

// A job: its thread, what the caller asked (pause, cancel) and what it has said (progress,
// the result or the error).
struct nl_job {
  std::shared_ptr<nl_model> model;  // loaded while the job is
  nl::TrainingJobOptions options;
  nl_train_callbacks callbacks{};

  std::mutex mu;
  std::condition_variable cv;
  bool pause_wanted = false, cancel_wanted = false;
  bool paused = false, done = false;
  nl_train_progress progress{};  // the last step's (status NULL)
  nl::TrainingJobResult result;
  std::exception_ptr error;
  std::thread thread;

  ~nl_job() {
    {
      std::lock_guard<std::mutex> lock(mu);
      cancel_wanted = true;
    }
    cv.notify_all();
    if (thread.joinable()) thread.join();
  }
};

namespace {

const size_t kCallbacksV1 = sizeof(nl_train_callbacks);

Registry<nl_job>& jobs() {
  static Registry<nl_job> r("job");
  return r;
}

// The last "train" row of OUT/log.jsonl: the job writes (and flushes) a step's row before it
// reports the step's status line, so the numbers come from the run's own record.
nlohmann::json last_train_row(const std::string& log_path) {
  std::ifstream in(log_path, std::ios::binary);
  if (!in) return {};
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  const std::streamoff tail = std::min<std::streamoff>(size, 64 * 1024);
  std::string buf(static_cast<size_t>(tail), '\0');
  in.seekg(size - tail);
  in.read(buf.data(), tail);
  size_t end = buf.size();
  while (end > 0) {
    const size_t nl_pos = buf.rfind('\n', end - 1);
    const size_t begin = nl_pos == std::string::npos ? 0 : nl_pos + 1;
    if (begin < end) {
      nlohmann::json row = nlohmann::json::parse(buf.substr(begin, end - begin), nullptr, /*allow_exceptions=*/false);
      if (row.is_object() && row.value("type", "") == "train") return row;
    }
    if (nl_pos == std::string::npos) break;
    end = nl_pos;
  }
  return {};
}

double number_or_nan(const nlohmann::json& row, const char* key) {
  auto it = row.find(key);
  return it != row.end() && it->is_number() ? it->get<double>() : std::numeric_limits<double>::quiet_NaN();
}

// What the job says, passed to the caller's callbacks; and the caller's pause and cancel.
class JobOutput final : public nl::TrainingJobOutput {
 public:
  explicit JobOutput(nl_job& job) : job_(job) {}
  void line(const std::string& text) override { log(NL_LOG_INFO, text); }
  void warning(const std::string& text) override { log(NL_LOG_WARNING, text); }
  void step_status(const std::string& text) override {
    const nlohmann::json row = last_train_row(job_.options.out + "/log.jsonl");
    nl_train_progress p{};
    if (row.is_object()) {
      p.step = row.value("step", int64_t{0});
      p.total_steps = row.value("total", int64_t{0});
      p.loss = number_or_nan(row, "loss");
      p.lr = number_or_nan(row, "lr");
      p.grad_norm = number_or_nan(row, "grad_norm");
      p.tokens_per_second = number_or_nan(row, "tokens_per_s");
    }
    {
      std::lock_guard<std::mutex> lock(job_.mu);
      job_.progress = p;
    }
    if (job_.callbacks.on_progress) {
      p.status = text.c_str();
      job_.callbacks.on_progress(job_.callbacks.user_data, &p);
    }
  }
  bool stop_requested() override {
    std::unique_lock<std::mutex> lock(job_.mu);
    if (job_.pause_wanted && !job_.cancel_wanted) {
      job_.paused = true;
      job_.cv.notify_all();
      job_.cv.wait(lock, [&] { return !job_.pause_wanted || job_.cancel_wanted; });
      job_.paused = false;
      job_.cv.notify_all();
    }
    return job_.cancel_wanted;
  }

 private:
  void log(int32_t level, const std::string& text) {
    if (job_.callbacks.on_log) job_.callbacks.on_log(job_.callbacks.user_data, level, text.c_str());
  }
  nl_job& job_;
};

void run_job(nl_job* job) {
  try {
    JobOutput out(*job);
    nl::TrainingJobResult r = nl::run_training_job(job->options, out, *job->model->resident);
    std::lock_guard<std::mutex> lock(job->mu);
    job->result = r;
  } catch (...) {
    std::lock_guard<std::mutex> lock(job->mu);
    job->error = std::current_exception();
  }
  std::lock_guard<std::mutex> lock(job->mu);
  job->done = true;
  job->paused = false;
  job->cv.notify_all();
}

void fill_result(const nl::TrainingJobResult& r, nl_train_result* out) {
  std::memset(out, 0, sizeof(*out));
  out->finished = r.finished;
  out->early_stopped = r.early_stopped;
  out->diverged = r.diverged;
  out->exit_code = nl::exit_code_of(r);
  out->step = r.step;
  out->total_steps = r.total_steps;
  out->kept_step = r.kept_step;
  out->kept_val_loss = r.kept_val_loss;
  const size_t n = std::min(sizeof(out->stop_reason) - 1, r.stop_reason.size());
  std::memcpy(out->stop_reason, r.stop_reason.data(), n);
}

}  // namespace

extern "C" {

NL_API void nl_train_callbacks_init(nl_train_callbacks* c) {
  if (!c) return;
  std::memset(c, 0, sizeof(*c));
  c->struct_size = sizeof(*c);
}

NL_API nl_status nl_train_start(nl_model* model, const char* options_json, const nl_train_callbacks* callbacks,
                                nl_job** out) {
  return api_call([&] {
    const char* fn = "nl_train_start";
    std::shared_ptr<nl_model> m = models().get(model, fn);
    require(options_json, fn, "options_json");
    require(out, fn, "out");
    *out = nullptr;
    auto job = std::make_shared<nl_job>();
    job->model = m;
    job->options = parse_train_options(options_json);
    job->callbacks = options_or_defaults(callbacks, nl_train_callbacks_init, kCallbacksV1, fn);
    nl_job* raw = job.get();
    job->thread = std::thread(run_job, raw);  // the object outlives the thread: ~nl_job joins it
    *out = jobs().add(std::move(job));
  });
}

NL_API nl_status nl_job_pause(nl_job* job) {
  return api_call([&] {
    std::shared_ptr<nl_job> j = jobs().get(job, "nl_job_pause");
    std::lock_guard<std::mutex> lock(j->mu);
    if (j->done) wrong_state("nl_job_pause", "the job has ended");
    j->pause_wanted = true;
  });
}

NL_API nl_status nl_job_resume(nl_job* job) {
  return api_call([&] {
    std::shared_ptr<nl_job> j = jobs().get(job, "nl_job_resume");
    {
      std::lock_guard<std::mutex> lock(j->mu);
      if (!j->pause_wanted) wrong_state("nl_job_resume", "the job is not paused (nl_job_pause first)");
      j->pause_wanted = false;
    }
    j->cv.notify_all();
  });
}

NL_API nl_status nl_job_cancel(nl_job* job) {
  return api_call([&] {
    std::shared_ptr<nl_job> j = jobs().get(job, "nl_job_cancel");
    {
      std::lock_guard<std::mutex> lock(j->mu);
      j->cancel_wanted = true;
    }
    j->cv.notify_all();
  });
}

NL_API nl_status nl_job_get_state(nl_job* job, int32_t* state, nl_train_progress* progress) {
  return api_call([&] {
    std::shared_ptr<nl_job> j = jobs().get(job, "nl_job_get_state");
    std::lock_guard<std::mutex> lock(j->mu);
    if (state) *state = j->done ? NL_JOB_DONE : j->paused ? NL_JOB_PAUSED : NL_JOB_RUNNING;
    if (progress) *progress = j->progress;
  });
}

NL_API nl_status nl_job_wait(nl_job* job, nl_train_result* result) {
  return api_call([&] {
    std::shared_ptr<nl_job> j = jobs().get(job, "nl_job_wait");
    std::unique_lock<std::mutex> lock(j->mu);
    j->cv.wait(lock, [&] { return j->done; });
    if (j->error) std::rethrow_exception(j->error);
    if (result) fill_result(j->result, result);
  });
}

NL_API nl_status nl_job_free(nl_job* job) {
  return api_call([&] {
    if (!job) return;
    std::shared_ptr<nl_job> j = jobs().remove(job, "nl_job_free");
    {
      std::lock_guard<std::mutex> lock(j->mu);
      j->cancel_wanted = true;
    }
    j->cv.notify_all();
    // The last reference joins the thread (here, or in a call still using the job).
  });
}

NL_API nl_status nl_train(nl_model* model, const char* options_json, const nl_train_callbacks* callbacks,
                          nl_train_result* result) {
  nl_job* job = nullptr;
  const nl_status s = nl_train_start(model, options_json, callbacks, &job);
  if (s != NL_OK) return s;
  const nl_status w = nl_job_wait(job, result);
  std::string message = nl_last_error();
  nl_job_free(job);
  if (w != NL_OK) nl::capi::set_last_error(message);
  return w;
}

}  // extern "C"
