// A training job's structured progress through the C API (nl_train_event: on_event and
// nl_job_get_event; the first version's on_progress): every number equals the run's own
// log.jsonl row for the same event (steps, validations, pacing, background waits), checkpoints
// are reported as they are written, a caller's pause is a WAITING event, and a callback that
// waits for or frees its own job gets NL_ERR_STATE instead of a deadlock. On a tiny
// synthetic model, so it runs without ../shared.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "capi_test_util.h"
#include "nightlora.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using capitest::Model;
using capitest::stories_data;

// What the callbacks saw.
struct Seen {
  std::mutex mu;
  std::vector<nl_train_event> events;
  std::vector<nl_train_progress> progress;  // on_progress (status copied out)
  std::vector<std::string> status;
  std::atomic<nl_job*> job{nullptr};
  bool wants_job = false;  // on_event waits for `job` to be set
  int64_t pause_at = -1;  // on_event pauses the job after this step
  nl_status own_wait = NL_OK, own_free = NL_OK;  // nl_job_wait / nl_job_free from the job's thread
};

void on_event(void* u, const nl_train_event* e) {
  auto* s = static_cast<Seen*>(u);
  EXPECT_EQ(e->struct_size, sizeof(nl_train_event));
  // The handle is known once nl_train_start has returned (a moment after the job began).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!s->job.load() && s->wants_job && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  nl_job* job = s->job.load();
  if (e->kind == NL_TRAIN_EVENT_STEP && e->step == 1 && job) {
    s->own_wait = nl_job_wait(job, nullptr);
    s->own_free = nl_job_free(job);
  }
  if (e->kind == NL_TRAIN_EVENT_STEP && e->step == s->pause_at && job) {
    EXPECT_EQ(nl_job_pause(job), NL_OK);
  }
  std::lock_guard<std::mutex> lock(s->mu);
  s->events.push_back(*e);
}

void on_progress(void* u, const nl_train_progress* p) {
  auto* s = static_cast<Seen*>(u);
  std::lock_guard<std::mutex> lock(s->mu);
  s->progress.push_back(*p);
  s->status.push_back(p->status ? p->status : "(null)");
}

std::vector<nl_train_event> of_kind(const std::vector<nl_train_event>& all, int32_t kind) {
  std::vector<nl_train_event> out;
  for (const nl_train_event& e : all)
    if (e.kind == kind) out.push_back(e);
  return out;
}

// A log number as the event carries it: null (a non-finite figure) is NaN.
double num(const json& row, const char* key) {
  const json& v = row.at(key);
  return v.is_null() ? std::nan("") : v.get<double>();
}
void expect_same(double event, double log, const std::string& what) {
  if (std::isnan(log)) EXPECT_TRUE(std::isnan(event)) << what;
  else EXPECT_EQ(event, log) << what;
}

nl_train_callbacks callbacks(Seen& seen) {
  nl_train_callbacks cb;
  nl_train_callbacks_init(&cb);
  cb.user_data = &seen;
  cb.on_event = on_event;
  cb.on_progress = on_progress;
  return cb;
}

TEST(CApiProgress, EventsCarryTheNumbersOfTheLog) {
  nltest::TempDir td;
  Model model(capitest::synthetic_model(td.path));
  const fs::path out = td / "run";
  // 6 steps, validation every 2, a checkpoint every 3, pacing at a 50% duty cycle.
  const json opts = {{"data", stories_data("train.jsonl")}, {"valid", stories_data("valid.jsonl")},
                     {"out", out.string()}, {"iters", 6}, {"batch", 2}, {"lr", 5e-3}, {"seq-len", 64},
                     {"val-every", 2}, {"save-every", 3}, {"duty", 0.5}, {"threads", 2},
                     {"precision", "f32"}, {"plan-cache", "off"}};
  Seen seen;
  seen.pause_at = 4;
  seen.wants_job = true;
  const nl_train_callbacks cb = callbacks(seen);
  nl_job* job = nullptr;
  ASSERT_EQ(nl_train_start(model.m, opts.dump().c_str(), &cb, &job), NL_OK) << nl_last_error();
  seen.job = job;

  // The callback pauses the job after step 4: nl_job_get_event says so, with the step.
  nl_train_event e;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  do {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    e.struct_size = sizeof(e);
    ASSERT_EQ(nl_job_get_event(job, &e), NL_OK) << nl_last_error();
  } while (!e.paused && std::chrono::steady_clock::now() < deadline);
  ASSERT_EQ(e.paused, 1);
  EXPECT_EQ(e.kind, NL_TRAIN_EVENT_WAITING);
  EXPECT_STREQ(e.reason, "paused by the caller");
  EXPECT_EQ(e.step, 4);
  EXPECT_EQ(e.struct_size, sizeof(e));
  int32_t state = -1;
  ASSERT_EQ(nl_job_get_state(job, &state, nullptr), NL_OK);
  EXPECT_EQ(state, NL_JOB_PAUSED);
  ASSERT_EQ(nl_job_resume(job), NL_OK);
  nl_train_result r;
  ASSERT_EQ(nl_job_wait(job, &r), NL_OK) << nl_last_error();
  EXPECT_EQ(r.finished, 1);
  // From its own callback the job could not be waited for nor freed (it would wait for itself).
  EXPECT_EQ(seen.own_wait, NL_ERR_STATE);
  EXPECT_EQ(seen.own_free, NL_ERR_STATE);
  e.struct_size = sizeof(e);
  ASSERT_EQ(nl_job_get_event(job, &e), NL_OK);
  EXPECT_EQ(e.paused, 0);
  EXPECT_EQ(e.step, 6);
  // An older, shorter struct_size than the first version's is refused.
  e.struct_size = 8;
  EXPECT_EQ(nl_job_get_event(job, &e), NL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(nl_last_error()).find("struct_size"), std::string::npos) << nl_last_error();
  ASSERT_EQ(nl_job_free(job), NL_OK);

  // Steps: the "train" rows, number for number, and the first version's callback the same.
  const std::vector<json> train = nltest::read_jsonl(out / "log.jsonl", "train");
  const std::vector<nl_train_event> steps = of_kind(seen.events, NL_TRAIN_EVENT_STEP);
  ASSERT_EQ(train.size(), 6u);
  ASSERT_EQ(steps.size(), train.size());
  ASSERT_EQ(seen.progress.size(), train.size());
  for (size_t i = 0; i < train.size(); ++i) {
    const json& row = train[i];
    const nl_train_event& s = steps[i];
    const std::string at = "step " + std::to_string(i + 1);
    EXPECT_EQ(s.step, row["step"].get<int64_t>()) << at;
    EXPECT_EQ(s.total_steps, row["total"].get<int64_t>()) << at;
    EXPECT_EQ(s.epoch, row["epoch"].get<int64_t>()) << at;
    expect_same(s.loss, num(row, "loss"), at + " loss");
    expect_same(s.lr, num(row, "lr"), at + " lr");
    expect_same(s.grad_norm, num(row, "grad_norm"), at + " grad_norm");
    expect_same(s.tokens_per_second, num(row, "tokens_per_s"), at + " tokens_per_s");
    expect_same(s.elapsed_seconds, num(row, "elapsed_s"), at + " elapsed_s");
    EXPECT_EQ(s.skipped, row.value("skipped", false) ? 1 : 0) << at;
    EXPECT_EQ(s.paused, 0) << at;
    EXPECT_EQ(std::string(s.status).rfind("step " + std::to_string(i + 1) + "/6  loss ", 0), 0u) << s.status;
    EXPECT_EQ(seen.progress[i].step, s.step) << at;
    EXPECT_EQ(seen.progress[i].total_steps, s.total_steps) << at;
    expect_same(seen.progress[i].loss, s.loss, at + " on_progress loss");
    expect_same(seen.progress[i].tokens_per_second, s.tokens_per_second, at + " on_progress tokens/s");
    EXPECT_EQ(seen.status[i], s.status) << at;
  }
  // Validations: the "val" rows (before training, every 2 steps); steps carry the latest.
  const std::vector<json> val = nltest::read_jsonl(out / "log.jsonl", "val");
  const std::vector<nl_train_event> vals = of_kind(seen.events, NL_TRAIN_EVENT_VALIDATION);
  ASSERT_GE(val.size(), 3u);
  ASSERT_EQ(vals.size(), val.size());
  for (size_t i = 0; i < val.size(); ++i) {
    EXPECT_EQ(vals[i].step, val[i]["step"].get<int64_t>());
    expect_same(vals[i].val_loss, num(val[i], "val_loss"), "validation " + std::to_string(i));
  }
  // Every event carries the latest validation loss before it.
  double latest = std::nan("");
  for (const nl_train_event& ev : seen.events) {
    if (ev.kind == NL_TRAIN_EVENT_VALIDATION) latest = ev.val_loss;
    expect_same(ev.val_loss, latest, "the latest validation loss, at step " + std::to_string(ev.step));
  }
  // Pacing: the "pace" rows.
  const std::vector<json> pace = nltest::read_jsonl(out / "log.jsonl", "pace");
  const std::vector<nl_train_event> paces = of_kind(seen.events, NL_TRAIN_EVENT_PACING);
  ASSERT_FALSE(pace.empty());
  ASSERT_EQ(paces.size(), pace.size());
  for (size_t i = 0; i < pace.size(); ++i) {
    EXPECT_EQ(paces[i].step, pace[i]["step"].get<int64_t>());
    EXPECT_EQ(paces[i].idle_seconds, pace[i]["idle_s"].get<double>());
    EXPECT_EQ(std::string(paces[i].reason), pace[i]["reason"].get<std::string>());
  }
  // Checkpoints: every 3 steps (the last one at the end).
  std::vector<int64_t> saved;
  for (const nl_train_event& c : of_kind(seen.events, NL_TRAIN_EVENT_CHECKPOINT)) saved.push_back(c.step);
  EXPECT_EQ(saved, (std::vector<int64_t>{3, 6}));
  // The caller's pause: WAITING paused 1 then 0, after step 4.
  const std::vector<nl_train_event> waits = of_kind(seen.events, NL_TRAIN_EVENT_WAITING);
  ASSERT_EQ(waits.size(), 2u);
  EXPECT_EQ(waits[0].paused, 1);
  EXPECT_STREQ(waits[0].reason, "paused by the caller");
  EXPECT_EQ(waits[1].paused, 0);
  EXPECT_EQ(waits[0].step, 4);
  EXPECT_EQ(waits[1].step, 4);
}

// Background conditions: a time window that opens after a wait and closes after three steps
// (a fake clock moves a minute per step). Each wait is a WAITING event with the log's "wait"
// row's step and reason, and its end one with paused 0.
TEST(CApiProgress, BackgroundWaitsAreWaitingEvents) {
  nltest::TempDir td;
  Model model(capitest::synthetic_model(td.path));
  const fs::path out = td / "bg";
  const json opts = {{"data", stories_data("train.jsonl")}, {"out", out.string()}, {"iters", 5}, {"batch", 2},
                     {"seq-len", 64}, {"threads", 2}, {"precision", "f32"}, {"plan-cache", "off"},
                     {"background", true}, {"normal-priority", true}, {"window", "07:00-07:03"},
                     {"fake-clock", "06:59,60"}, {"recheck-sec", 3600}};
  Seen seen;
  const nl_train_callbacks cb = callbacks(seen);
  nl_train_result r;
  ASSERT_EQ(nl_train(model.m, opts.dump().c_str(), &cb, &r), NL_OK) << nl_last_error();
  EXPECT_EQ(r.finished, 1);
  const std::vector<json> rows = nltest::read_jsonl(out / "log.jsonl", "wait");
  ASSERT_EQ(rows.size(), 2u);  // before step 1 and after step 3
  std::vector<nl_train_event> began, ended;
  for (const nl_train_event& e : of_kind(seen.events, NL_TRAIN_EVENT_WAITING)) (e.paused ? began : ended).push_back(e);
  ASSERT_EQ(began.size(), rows.size());
  ASSERT_EQ(ended.size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(began[i].step, rows[i]["step"].get<int64_t>());
    EXPECT_EQ(std::string(began[i].reason), rows[i]["reason"].get<std::string>());
    EXPECT_NE(std::string(began[i].reason).find("outside the time window"), std::string::npos) << began[i].reason;
    EXPECT_EQ(ended[i].step, began[i].step);
    EXPECT_STREQ(ended[i].reason, "");
  }
  // Each wait began with a checkpoint.
  EXPECT_GE(of_kind(seen.events, NL_TRAIN_EVENT_CHECKPOINT).size(), rows.size());
}

}  // namespace

namespace {

// A caller built against the first nl_train_callbacks (without on_event) passes its shorter
// struct_size: what lies past it is never read, and on_progress still reports every step.
TEST(CApiProgress, FirstVersionCallbacksAreStillServed) {
  nltest::TempDir td;
  Model model(capitest::synthetic_model(td.path));
  const json opts = {{"data", stories_data("train.jsonl")}, {"out", (td / "run").string()}, {"iters", 3},
                     {"batch", 2}, {"seq-len", 64}, {"threads", 2}, {"precision", "f32"}, {"plan-cache", "off"}};
  Seen seen;
  nl_train_callbacks cb = callbacks(seen);
  cb.struct_size = offsetof(nl_train_callbacks, on_event);  // on_event is past the caller's struct
  nl_train_result r;
  ASSERT_EQ(nl_train(model.m, opts.dump().c_str(), &cb, &r), NL_OK) << nl_last_error();
  EXPECT_EQ(r.finished, 1);
  EXPECT_TRUE(seen.events.empty()) << "on_event was read past the caller's struct_size";
  ASSERT_EQ(seen.progress.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(seen.progress[i].step, static_cast<int64_t>(i + 1));
  // A struct_size larger than this library knows is refused (a caller newer than the library).
  cb.struct_size = sizeof(nl_train_callbacks) + 8;
  EXPECT_EQ(nl_train(model.m, opts.dump().c_str(), &cb, &r), NL_ERR_INVALID_ARGUMENT);
}

}  // namespace
