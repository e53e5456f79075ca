// Power loss at every point of a `nightlora serve` session's data folder (crash_disk.h): a
// training file uploaded, a fine-tuning job run to success, a second job cancelled. The
// server's data-folder classes are driven in-process (FileStore, AdapterRegistry,
// FineTuningJobs over one ResidentModel, as server.cpp wires them; the HTTP layer writes
// nothing). After each crash a server restarts on the rebuilt disk and: every file, job and
// adapter that was reported to the client before the crash is listed and intact, no
// registry entry points to a missing or partial adapter, a job the crash interrupted resumes,
// and the job's final adapter is the bytes of the uninterrupted session's.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "crash_disk.h"
#include "test_util.h"

#if NL_HAVE_SERVE
#include "nightlora/train/resident_model.h"
#include "serve/adapter_registry.h"
#include "serve/file_store.h"
#include "serve/fine_tuning_jobs.h"
#endif

namespace {

namespace fs = std::filesystem;

#if NL_HAVE_SERVE
using nlohmann::json;

// The three data-folder classes of one server on DATA, as server.cpp makes them.
struct ServerState {
  ServerState(nl::ResidentModel& resident, const fs::path& data)
      : registry(resident.model(), "stories260K"),
        files((data / "files").string(), 100),
        jobs(resident, registry, files, (data / "jobs").string(), 8, [this](const std::string& line) { log.push_back(line); }) {}
  std::vector<std::string> log;  // declared first: the jobs' constructor logs
  nl::serve::AdapterRegistry registry;
  nl::serve::FileStore files;
  nl::serve::FineTuningJobs jobs;

  // Runs the worker until no job is queued or running (a minute at most).
  bool drain() {
    jobs.start();
    for (int i = 0; i < 6000; ++i) {
      bool busy = false;
      const json all = jobs.list("", 100);
      for (const json& j : all["data"]) busy |= j["status"] == "queued" || j["status"] == "running";
      if (!busy) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
};

const std::string kTrainingData =
    "{\"text\": \"Once upon a time, there was a little dragon named Zorbo. Zorbo liked to fly over the hills.\"}\n"
    "{\"text\": \"Zorbo found a shiny red ball. Zorbo was very happy.\"}\n"
    "{\"prompt\": \"Who is Zorbo?\", \"completion\": \" A little dragon who sings a happy song.\"}\n";

// A short job that writes what a job writes: checkpoints (every 2 steps), log, run.json, the
// plan, the adapter.
json job_request(const std::string& file_id) {
  return {{"model", "stories260K"},
          {"training_file", file_id},
          {"suffix", "zorbo"},
          {"hyperparameters",
           {{"n_steps", 4}, {"batch_size", 2}, {"seq_len", 32}, {"rank", 2}, {"alpha", 4}, {"save_every", 2},
            {"learning_rate", 5e-3}, {"lora_seed", 3}, {"precision", "f32"}}},
          {"seed", 7}};
}

// What the client was told, and at which point of the record (the number of calls recorded
// when the answer came back): a power cut after that point must not lose it.
struct Reported {
  size_t at = 0;
  std::string what;  // "file", "job", "succeeded", "cancelled"
  std::string id;
};
#endif

TEST(PowerLoss, ServeDataFolderEveryCrashPointKeepsWhatWasReported) {
#if !NL_HAVE_SERVE
  GTEST_SKIP() << "nightlora serve is not built here (needs cpp-httplib: libcpp-httplib-dev)";
#else
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", model);
  nl::ResidentModel resident(model.string(), [] {
    nl::EngineOptions eo;
    eo.threads = 1;
    return eo;
  }());
  const crash::ScratchDir scratch;
  const fs::path disk(scratch.path), data = disk / "data";
  fs::create_directories(data);  // `serve --data DIR`: the folder the user gave

  // The session, recorded: upload, a job to success, a second job cancelled.
  const crash::DiskModel before(disk.string());
  crash::RecordingFileOps rec(disk.string());
  std::vector<Reported> reported;
  std::string file_id, done_id, cancelled_id, adapter_name;
  {
    nl::ScopedFileOps use(rec);
    ServerState s(resident, data);
    file_id = s.files.add("zorbo.jsonl", "fine-tune", kTrainingData)["id"];
    reported.push_back({rec.ops.size(), "file", file_id});
    done_id = s.jobs.create(job_request(file_id))["id"];
    reported.push_back({rec.ops.size(), "job", done_id});
    ASSERT_TRUE(s.drain());
    const json done = s.jobs.get(done_id);
    ASSERT_EQ(done["status"], "succeeded") << done.dump(1);
    adapter_name = done["fine_tuned_model"];
    reported.push_back({rec.ops.size(), "succeeded", done_id});
    cancelled_id = s.jobs.create(job_request(file_id))["id"];
    reported.push_back({rec.ops.size(), "job", cancelled_id});
    s.jobs.cancel(cancelled_id);
    reported.push_back({rec.ops.size(), "cancelled", cancelled_id});
    s.jobs.shutdown();
  }
  EXPECT_TRUE(rec.outside.empty()) << "a write outside the data folder: " << rec.outside.front();
  const fs::path adapter_path = data / "jobs" / done_id / "run" / "adapter.gguf";
  const std::string want = nltest::read_text(adapter_path);

  // The disks a power cut leaves, in the order of the record (replay_every_prefix calls back
  // once per distinct disk, prefixes in order: `point` follows it).
  size_t point = 0;
  const std::vector<crash::Op>& ops = rec.ops;
  int64_t restarts = 0, resumed_jobs = 0;
  crash::NoSyncFileOps no_sync;
  nl::ScopedFileOps fast(no_sync);
  const crash::ReplayStats st = crash::replay_every_prefix(
      before, ops,
      [&]() -> std::vector<std::string> {
        std::vector<std::string> bad;
        ++restarts;
        try {
          ServerState s(resident, data);
          for (const std::string& line : s.log)
            if (line.find("cannot be served") != std::string::npos) bad.push_back("after the restart: " + line);
          // What was reported before the cut is there.
          for (const Reported& r : reported) {
            if (point < r.at) continue;
            if (r.what == "file") {
              if (nltest::read_text(s.files.data_path(r.id, "file")) != kTrainingData)
                bad.push_back("the uploaded file " + r.id + " is not what was uploaded");
            } else {
              const json j = s.jobs.get(r.id);  // 404 (ApiError) when lost
              if (r.what == "succeeded" && j["status"] != "succeeded")
                bad.push_back("job " + r.id + " succeeded and is now " + j["status"].get<std::string>());
              if (r.what == "cancelled" && j["status"] != "cancelled")
                bad.push_back("job " + r.id + " was cancelled and is now " + j["status"].get<std::string>());
            }
          }
          // Every adapter the registry serves is the job's whole adapter.
          for (const nl::serve::RegisteredModel& m : s.registry.list())
            if (m.adapter && nltest::read_text(data / "jobs" / m.owned_by / "run" / "adapter.gguf") != want)
              bad.push_back("the registry serves " + m.id + " from an adapter that is not the job's final one");
          // An interrupted job resumes, to the uninterrupted adapter.
          bool pending = false;
          const json listed = s.jobs.list("", 100);
          for (const json& j : listed["data"]) pending |= j["status"] == "queued" || j["status"] == "running";
          if (pending) {
            ++resumed_jobs;
            if (!s.drain()) bad.push_back("the resumed jobs did not finish within a minute");
            s.jobs.shutdown();
          }
          const json after = s.jobs.list("", 100);
          for (const json& j : after["data"]) {
            const std::string id = j["id"];
            if (id == cancelled_id && j["status"] != "cancelled" && j["status"] != "succeeded")
              bad.push_back("the second job ended " + j["status"].get<std::string>());
            if (id == done_id) {
              if (j["status"] != "succeeded") {
                bad.push_back("the job ended " + j["status"].get<std::string>() + ": " + j["error"].dump());
              } else if (nltest::read_text(adapter_path) != want) {
                bad.push_back("the resumed job's adapter differs from the uninterrupted one");
              } else if (!s.registry.contains(adapter_name)) {
                bad.push_back("the finished job's adapter is not served");
              }
            }
          }
        } catch (const std::exception& e) {
          bad.push_back(std::string("the server does not restart on the folder: ") + e.what());
        }
        return bad;
      },
      [&](size_t k) {
        point = k;
        return true;
      });
  std::printf("[ power loss ] serve data folder: %lld calls recorded (%lld promised files), %lld crash points replayed "
              "x 3 kinds = %lld disks, %lld distinct disks restarted, %lld with a job to resume\n",
              static_cast<long long>(ops.size()), static_cast<long long>(st.promises), static_cast<long long>(st.points),
              static_cast<long long>(st.disks), static_cast<long long>(st.distinct), static_cast<long long>(resumed_jobs));
  EXPECT_EQ(st.points, static_cast<int64_t>(ops.size()) + 1);
  EXPECT_GT(resumed_jobs, 10);
  for (const std::string& f : st.failures) ADD_FAILURE() << f;
#endif
}

}  // namespace
