// kill -9 during a fine-tuning job, then a new server on the same data folder: the job
// continues from its checkpoint and its adapter is the bytes of an uninterrupted run; the
// uploaded file and the finished adapters are still there.
#include <httplib.h>

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include <nlohmann/json.hpp>

#include "serve_process.h"

namespace {

using namespace nltest;

// Polls the job until it leaves queued/running (at most `seconds`).
nlohmann::json wait_for_end(httplib::Client& c, const std::string& id, int seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  nlohmann::json job;
  while (std::chrono::steady_clock::now() < deadline) {
    job = get_json(c, "/v1/fine_tuning/jobs/" + id);
    const std::string s = job.value("status", "");
    if (s != "queued" && s != "running") return job;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ADD_FAILURE() << "the job did not end within " << seconds << " s: " << job.dump();
  return job;
}

TEST(ServeRestart, KilledDuringAJobResumesFromItsCheckpoint) {
  TempDir tmp;
  const fs::path model = serve_test_model(tmp.path);
  const std::vector<std::string> args = {"--model", model.string(), "--data", (tmp / "data").string()};
  const int steps = 120, save_every = 10, seed = 7;
  const double lr = 5e-3;
  std::string job_id, file_id, first_model;
  {
    ServeProcess server(args, tmp / "serve1.log");
    ASSERT_TRUE(server.started());
    httplib::Client c("127.0.0.1", server.port());
    httplib::MultipartFormDataItems items = {{"purpose", "fine-tune", "", ""},
                                             {"file", read_text(serve_test_data()), "train.jsonl", "application/jsonl"}};
    auto up = c.Post("/v1/files", items);
    ASSERT_TRUE(up && up->status == 200) << (up ? up->body : "no answer");
    file_id = nlohmann::json::parse(up->body)["id"];
    // A short job first, left finished: its adapter must be served again after the restart.
    nlohmann::json body = {{"model", model.stem().string()}, {"training_file", file_id}, {"seed", seed},
                           {"hyperparameters", {{"n_steps", 5}, {"learning_rate", lr}, {"precision", "f32"}}}};
    auto first = c.Post("/v1/fine_tuning/jobs", body.dump(), "application/json");
    ASSERT_TRUE(first && first->status == 200) << (first ? first->body : "no answer");
    nlohmann::json done = wait_for_end(c, nlohmann::json::parse(first->body)["id"], 60);
    ASSERT_EQ(done["status"], "succeeded") << done.dump();
    first_model = done["fine_tuned_model"];

    body["hyperparameters"] = {{"n_steps", steps}, {"learning_rate", lr}, {"precision", "f32"}, {"save_every", save_every}};
    auto created = c.Post("/v1/fine_tuning/jobs", body.dump(), "application/json");
    ASSERT_TRUE(created && created->status == 200) << (created ? created->body : "no answer");
    job_id = nlohmann::json::parse(created->body)["id"];
    // Kill it once a checkpoint is on disk, well before the end.
    const fs::path checkpoints = tmp / "data/jobs" / job_id / "run/checkpoints";
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline &&
           !(fs::exists(checkpoints) && !fs::is_empty(checkpoints)))
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    server.kill9();
    ASSERT_TRUE(fs::exists(checkpoints) && !fs::is_empty(checkpoints)) << "no checkpoint appeared";
    ASSERT_FALSE(fs::exists(tmp / "data/jobs" / job_id / "run/adapter.gguf")) << "the job ended before the kill";
  }
  ServeProcess server(args, tmp / "serve2.log");
  ASSERT_TRUE(server.started());
  EXPECT_NE(server.log().find("job " + job_id + " queued again after a restart"), std::string::npos) << server.log();
  httplib::Client c("127.0.0.1", server.port());
  EXPECT_EQ(get_json(c, "/v1/files/" + file_id)["id"], file_id);
  nlohmann::json models = get_json(c, "/v1/models");
  ASSERT_EQ(models["data"].size(), 2u) << models.dump();
  EXPECT_EQ(models["data"][1]["id"], first_model);
  nlohmann::json job = wait_for_end(c, job_id, 120);
  ASSERT_EQ(job["status"], "succeeded") << job.dump();
  nlohmann::json events = get_json(c, "/v1/fine_tuning/jobs/" + job_id + "/events?limit=1000");
  bool resumed = false;
  for (const auto& e : events["data"]) resumed |= e["message"].get<std::string>().find("continues from its newest checkpoint") != std::string::npos;
  EXPECT_TRUE(resumed) << events.dump(1);
  const fs::path ref = standalone_train(model, tmp / "standalone", steps, lr, seed, save_every);
  EXPECT_TRUE(same_bytes(tmp / "data/jobs" / job_id / "run/adapter.gguf", ref))
      << "the resumed job's adapter differs from an uninterrupted run's";
  EXPECT_EQ(server.terminate(), 0) << server.log();
}

}  // namespace
