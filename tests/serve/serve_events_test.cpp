// A fine-tuning job's /events: one OpenAI metrics event per step and per validation
// ("Step N/M: training loss=X", type "metrics", the figures in data) carrying the numbers of the
// job's own log.jsonl rows, and the job's progress kept current.
#include <httplib.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include <nlohmann/json.hpp>

#include "serve_process.h"

namespace {

using namespace nltest;
using json = nlohmann::json;

std::string loss_text(double x) {
  char b[32];
  std::snprintf(b, sizeof(b), "%.4f", x);
  return b;
}

TEST(ServeEvents, MetricsEventsCarryTheNumbersOfTheLog) {
  TempDir tmp;
  const fs::path model = serve_test_model(tmp.path);
  ServeProcess server({"--model", model.string(), "--data", (tmp / "data").string()}, tmp / "serve.log");
  ASSERT_TRUE(server.started());
  httplib::Client c("127.0.0.1", server.port());
  httplib::MultipartFormDataItems items = {{"purpose", "fine-tune", "", ""},
                                           {"file", read_text(serve_test_data()), "train.jsonl", "application/jsonl"}};
  auto up = c.Post("/v1/files", items);
  ASSERT_TRUE(up && up->status == 200) << (up ? up->body : "no answer");
  const std::string file_id = json::parse(up->body)["id"];
  const int steps = 6;
  json body = {{"model", model.stem().string()}, {"training_file", file_id}, {"validation_file", file_id},
               {"hyperparameters", {{"n_steps", steps}, {"learning_rate", 5e-3}, {"precision", "f32"}}}};
  auto created = c.Post("/v1/fine_tuning/jobs", body.dump(), "application/json");
  ASSERT_TRUE(created && created->status == 200) << (created ? created->body : "no answer");
  const std::string id = json::parse(created->body)["id"];
  json job;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    job = get_json(c, "/v1/fine_tuning/jobs/" + id);
    if (job.value("status", "") != "queued" && job.value("status", "") != "running") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(job["status"], "succeeded") << job.dump();
  EXPECT_EQ(job["progress"], json({{"step", steps}, {"total_steps", steps}}));

  // Oldest first: the metrics events of the steps, then of the validations.
  const json events = get_json(c, "/v1/fine_tuning/jobs/" + id + "/events?limit=1000");
  std::vector<json> train_events, val_events;
  for (auto it = events["data"].rbegin(); it != events["data"].rend(); ++it) {
    if ((*it)["type"] != "metrics") continue;
    ((*it)["data"].contains("train_loss") ? train_events : val_events).push_back(*it);
  }
  std::vector<json> train_rows, val_rows;
  for (const json& row : read_jsonl(tmp / "data/jobs" / id / "run/log.jsonl")) {
    if (row.value("type", "") == "train") train_rows.push_back(row);
    if (row.value("type", "") == "val") val_rows.push_back(row);
  }
  ASSERT_EQ(train_rows.size(), static_cast<size_t>(steps));
  ASSERT_EQ(train_events.size(), train_rows.size()) << events.dump(1);
  for (size_t i = 0; i < train_rows.size(); ++i) {
    const json &e = train_events[i], &row = train_rows[i];
    EXPECT_EQ(e["object"], "fine_tuning.job.event");
    EXPECT_EQ(e["message"], "Step " + std::to_string(i + 1) + "/" + std::to_string(steps) +
                                ": training loss=" + loss_text(row["loss"].get<double>()));
    EXPECT_EQ(e["data"]["step"], row["step"]);
    EXPECT_EQ(e["data"]["total_steps"], row["total"]);
    EXPECT_EQ(e["data"]["epoch"], row["epoch"]);
    EXPECT_EQ(e["data"]["train_loss"].get<double>(), row["loss"].get<double>());
    EXPECT_EQ(e["data"]["learning_rate"].get<double>(), row["lr"].get<double>());
    EXPECT_EQ(e["data"]["tokens_per_second"].get<double>(), row["tokens_per_s"].get<double>());
    EXPECT_EQ(e["data"]["elapsed_seconds"].get<double>(), row["elapsed_s"].get<double>());
  }
  ASSERT_EQ(val_rows.size(), 2u);  // before the first step and after the last
  ASSERT_EQ(val_events.size(), val_rows.size()) << events.dump(1);
  for (size_t i = 0; i < val_rows.size(); ++i) {
    EXPECT_EQ(val_events[i]["data"]["step"], val_rows[i]["step"]);
    EXPECT_EQ(val_events[i]["data"]["valid_loss"].get<double>(), val_rows[i]["val_loss"].get<double>());
    EXPECT_EQ(val_events[i]["message"], "Step " + val_rows[i]["step"].dump() + "/" + std::to_string(steps) +
                                            ": validation loss=" + loss_text(val_rows[i]["val_loss"].get<double>()));
  }
}

}  // namespace
