// nl_train_start and nl_job_*: `nightlora train` on the resident model in a background
// thread (nl::run_training_job with the ResidentModel: each step under a training turn, so
// the caller's generations go between steps). Pause and cancel go through
// TrainingJobOutput::stop_requested, which the job asks at every step boundary: pausing
// blocks there (the engine is free meanwhile), cancelling answers yes (the job saves a
// checkpoint and stops, resumable by the same options).
#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstddef>
#include <cstring>
#include <limits>
#include <string>
#include <thread>

#include "capi/objects.h"
#include "capi/train_options.h"
#include "nightlora/job/exit_codes.h"

using namespace nl::capi;

namespace {
const char* const kPausedByCaller = "paused by the caller";

// The event a job reports before its first: nothing measured yet.
nl_train_event no_event_yet() {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  nl_train_event e;
  std::memset(&e, 0, sizeof(e));
  e.struct_size = sizeof(e);
  e.kind = NL_TRAIN_EVENT_STEP;
  e.loss = e.lr = e.grad_norm = e.tokens_per_second = e.val_loss = nan;
  return e;
}

// The first version's progress report of an event (status NULL).
nl_train_progress progress_of(const nl_train_event& e) {
  nl_train_progress p{};
  p.step = e.step;
  p.total_steps = e.total_steps;
  p.loss = e.loss;
  p.lr = e.lr;
  p.grad_norm = e.grad_norm;
  p.tokens_per_second = e.tokens_per_second;
  p.status = nullptr;
  return p;
}
}  // namespace

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
  nl_train_event event = no_event_yet();  // the latest event (nl_job_get_event, nl_job_get_state)
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

// The first version's nl_train_callbacks ended before on_event.
const size_t kCallbacksV1 = offsetof(nl_train_callbacks, on_event);

// Waiting for the job from its own thread (one of its callbacks) would never end.
void refuse_own_thread(const nl_job& j, const char* function) {
  if (std::this_thread::get_id() == j.thread.get_id())
    wrong_state(function, "called from the job's own callback: the job would wait for itself "
                          "(cancel it there, and wait for or free it from another thread)");
}

Registry<nl_job>& jobs() {
  static Registry<nl_job> r("job");
  return r;
}

// Copies s into a fixed char array, cut to fit, NUL-terminated.
template <size_t N>
void copy_to_array(char (&dst)[N], const std::string& s) {
  const size_t n = std::min(N - 1, s.size());
  std::memcpy(dst, s.data(), n);
  dst[n] = '\0';
}

int32_t event_kind(nl::TrainingProgress::Event e) {
  using E = nl::TrainingProgress::Event;
  switch (e) {
    case E::Step: return NL_TRAIN_EVENT_STEP;
    case E::Validation: return NL_TRAIN_EVENT_VALIDATION;
    case E::Checkpoint: return NL_TRAIN_EVENT_CHECKPOINT;
    case E::Waiting: return NL_TRAIN_EVENT_WAITING;
    case E::Pacing: return NL_TRAIN_EVENT_PACING;
  }
  return NL_TRAIN_EVENT_STEP;
}

nl_train_event to_event(const nl::TrainingProgress& p) {
  nl_train_event e;
  std::memset(&e, 0, sizeof(e));
  e.struct_size = sizeof(e);
  e.kind = event_kind(p.event);
  e.step = p.step;
  e.total_steps = p.total_steps;
  e.epoch = p.epoch;
  e.loss = p.loss;
  e.lr = p.lr;
  e.grad_norm = p.grad_norm;
  e.tokens_per_second = p.tokens_per_s;
  e.skipped = p.skipped;
  e.paused = p.paused;
  e.val_loss = p.val_loss;
  e.elapsed_seconds = p.elapsed_s;
  e.idle_seconds = p.idle_s;
  copy_to_array(e.reason, p.reason);
  copy_to_array(e.status, p.status);
  return e;
}

// What the job says, passed to the caller's callbacks; and the caller's pause and cancel.
class JobOutput final : public nl::TrainingJobOutput {
 public:
  explicit JobOutput(nl_job& job) : job_(job) {}
  void line(const std::string& text) override { log(NL_LOG_INFO, text); }
  void warning(const std::string& text) override { log(NL_LOG_WARNING, text); }
  // The job's structured progress (training_job.h): the same numbers as its log.jsonl rows.
  void progress(const nl::TrainingProgress& p) override {
    const nl_train_event e = to_event(p);
    {
      std::lock_guard<std::mutex> lock(job_.mu);
      job_.event = e;
    }
    if (job_.callbacks.on_event) job_.callbacks.on_event(job_.callbacks.user_data, &e);
    if (p.event == nl::TrainingProgress::Event::Step && job_.callbacks.on_progress) {
      nl_train_progress v1 = progress_of(e);
      v1.status = p.status.c_str();
      job_.callbacks.on_progress(job_.callbacks.user_data, &v1);
    }
  }
  // Pausing blocks here, at a step boundary, until resumed or cancelled; on_event hears of
  // it (WAITING, paused 1, then 0), outside the lock: the callback may resume the job itself.
  bool stop_requested() override {
    std::unique_lock<std::mutex> lock(job_.mu);
    if (job_.pause_wanted && !job_.cancel_wanted) {
      job_.paused = true;
      job_.cv.notify_all();
      nl_train_event e = job_.event;
      e.kind = NL_TRAIN_EVENT_WAITING;
      e.paused = 1;
      e.idle_seconds = 0;
      copy_to_array(e.reason, kPausedByCaller);
      copy_to_array(e.status, "");
      announce(lock, e);
      job_.cv.wait(lock, [&] { return !job_.pause_wanted || job_.cancel_wanted; });
      job_.paused = false;
      job_.cv.notify_all();
      e.paused = 0;
      copy_to_array(e.reason, "");
      announce(lock, e);
    }
    return job_.cancel_wanted;
  }

 private:
  void log(int32_t level, const std::string& text) {
    if (job_.callbacks.on_log) job_.callbacks.on_log(job_.callbacks.user_data, level, text.c_str());
  }
  // Gives on_event an event of the C API's own (a caller's pause), with job_.mu released.
  void announce(std::unique_lock<std::mutex>& lock, const nl_train_event& e) {
    if (!job_.callbacks.on_event) return;
    lock.unlock();
    job_.callbacks.on_event(job_.callbacks.user_data, &e);
    lock.lock();
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
    if (progress) *progress = progress_of(j->event);
  });
}

NL_API nl_status nl_job_get_event(nl_job* job, nl_train_event* out) {
  return api_call([&] {
    const char* fn = "nl_job_get_event";
    std::shared_ptr<nl_job> j = jobs().get(job, fn);
    require(out, fn, "out");
    const size_t n = out->struct_size;
    const size_t first_version = sizeof(nl_train_event);
    if (n < first_version)
      misuse(fn, "struct_size " + std::to_string(n) + " is not one this library knows (at least " +
                     std::to_string(first_version) + "): set it to sizeof(nl_train_event)");
    nl_train_event e;
    {
      std::lock_guard<std::mutex> lock(j->mu);
      e = j->event;
      if (j->paused) {  // held by nl_job_pause (the job's last event may predate it)
        e.kind = NL_TRAIN_EVENT_WAITING;
        e.paused = 1;
        e.idle_seconds = 0;
        copy_to_array(e.reason, kPausedByCaller);
        copy_to_array(e.status, "");
      }
    }
    const size_t filled = std::min(n, sizeof(e));
    std::memcpy(static_cast<void*>(out), &e, filled);  // a newer caller's extra fields stay as they were
    out->struct_size = static_cast<uint32_t>(filled);
  });
}

NL_API nl_status nl_job_wait(nl_job* job, nl_train_result* result) {
  return api_call([&] {
    std::shared_ptr<nl_job> j = jobs().get(job, "nl_job_wait");
    refuse_own_thread(*j, "nl_job_wait");
    std::unique_lock<std::mutex> lock(j->mu);
    j->cv.wait(lock, [&] { return j->done; });
    if (j->error) std::rethrow_exception(j->error);
    if (result) fill_result(j->result, result);
  });
}

NL_API nl_status nl_job_free(nl_job* job) {
  return api_call([&] {
    if (!job) return;
    refuse_own_thread(*jobs().get(job, "nl_job_free"), "nl_job_free");
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
