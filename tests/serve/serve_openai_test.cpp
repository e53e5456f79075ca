// `nightlora serve` driven by the official openai npm client (tools/js-serve/), as an app
// would drive it: the answers are checked against the command line (`nightlora generate`
// greedy with the same adapter, `nightlora train` with the same seed and data).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "nightlora/modelio/model.h"
#include "nightlora/serve/server.h"
#include "serve_process.h"

namespace {

using namespace nltest;

constexpr int kSteps = 30;
constexpr double kLr = 5e-3;
constexpr int kSeed = 3;
constexpr int kSaveEvery = 10;
constexpr int kTokens = 40;

std::string hyperparameters(int steps) {
  return nlohmann::json{{"n_steps", steps}, {"learning_rate", kLr}, {"precision", "f32"}, {"save_every", kSaveEvery}}.dump();
}

nlohmann::json run_node(const std::string& script, const std::vector<std::string>& args) {
  std::string cmd = "node " + shq((source_dir() / "tools/js-serve" / script).string());
  for (const std::string& a : args) cmd += " " + shq(a);
  CmdResult r = run_cmd(cmd);
  EXPECT_EQ(r.rc, 0) << script << " failed:\n" << r.out << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << script << " printed no JSON:\n" << r.out << r.err;
  return j.is_discarded() ? nlohmann::json::object() : j;
}

#define NL_REQUIRE_OPENAI_CLIENT()                                                                          \
  if (node_with_openai().empty())                                                                           \
    GTEST_SKIP() << "node or the openai npm client is not installed (tools/js-serve/node_modules: run "     \
                    "scripts/setup.sh)";

TEST(ServeOpenAiClient, ChatFineTuneAndCancelEndToEnd) {
  NL_REQUIRE_OPENAI_CLIENT();
  TempDir tmp;
  const fs::path model = serve_test_model(tmp.path);
  ServeProcess server({"--model", model.string(), "--data", (tmp / "data").string()}, tmp / "serve.log");
  ASSERT_TRUE(server.started());
  const std::string prompt = "Once upon a time";
  nlohmann::json out = run_node("end_to_end.mjs", {server.base_url(), "no-key", serve_test_data().string(), prompt,
                                                   std::to_string(kTokens), hyperparameters(kSteps), std::to_string(kSeed)});
  ASSERT_TRUE(out.contains("job")) << out.dump(1);
  const bool has_template = server.log().find("chat: chat template") != std::string::npos;

  // The base model, by the name of its file; chat streamed and not; a text completion.
  const std::string base = model.stem().string();
  EXPECT_EQ(out["models"], nlohmann::json::array({base}));
  EXPECT_EQ(out["completion"], as_json_text(cli_generate(model, prompt, kTokens, "", false)));
  EXPECT_EQ(out["chat"]["text"], as_json_text(cli_generate(model, prompt, kTokens, "", has_template)));
  EXPECT_EQ(out["chat_stream"]["text"], out["chat"]["text"]);
  EXPECT_EQ(out["chat_stream"]["usage"], out["chat"]["usage"]);
  EXPECT_GT(out["chat_stream"]["chunks"].get<int>(), 2) << "the answer came in one piece, not streamed";

  // The uploaded file and the job.
  EXPECT_TRUE(out["file_listed"].get<bool>());
  EXPECT_EQ(out["file"]["bytes"].get<size_t>(), read_text(serve_test_data()).size());
  EXPECT_EQ(out["created_status"], "queued");
  ASSERT_EQ(out["job"]["status"], "succeeded") << out["job"].dump();
  const std::string ft = out["job"]["fine_tuned_model"].get<std::string>();
  EXPECT_EQ(out["models_after"], nlohmann::json::array({base, ft}));
  EXPECT_EQ(out["retrieved"], ft);
  EXPECT_EQ(out["jobs_listed"], nlohmann::json::array({out["job"]["id"]}));
  bool saw_step = false;
  for (const auto& e : out["events"]) {
    saw_step |= e.get<std::string>().rfind("Step " + std::to_string(kSteps) + "/" + std::to_string(kSteps) +
                                           ": training loss=", 0) == 0;
    EXPECT_EQ(e.get<std::string>().find((tmp / "data").string()), std::string::npos) << "an event shows the data folder: " << e;
  }
  EXPECT_TRUE(saw_step) << out["events"].dump(1);

  // Its adapter: the bytes of a standalone `nightlora train` with the same seed and data, and
  // the fine-tuned model's greedy text is `nightlora generate --adapter`'s.
  const fs::path job_adapter = tmp / "data/jobs" / out["job"]["id"].get<std::string>() / "run/adapter.gguf";
  const fs::path ref = standalone_train(model, tmp / "standalone", kSteps, kLr, kSeed, kSaveEvery);
  EXPECT_TRUE(same_bytes(job_adapter, ref)) << job_adapter << " differs from " << ref;
  const std::string ft_text = as_json_text(cli_generate(model, prompt, kTokens, job_adapter.string(), has_template));
  EXPECT_EQ(out["ft_chat"]["text"], ft_text);
  EXPECT_EQ(out["ft_chat_stream"]["text"], ft_text);
  EXPECT_NE(ft_text, as_json_text(cli_generate(model, prompt, kTokens, "", has_template))) << "the adapter changed nothing";

  // The cancelled job: cancelled at once and later, no model, a second cancel refused.
  EXPECT_EQ(out["cancel"]["status"], "cancelled");
  EXPECT_EQ(out["cancel"]["later"], "cancelled");
  EXPECT_TRUE(out["cancel"]["fine_tuned_model"].is_null());
  EXPECT_EQ(out["cancel"]["again"], 400);
  EXPECT_EQ(server.terminate(), 0) << server.log();
}

TEST(ServeOpenAiClient, ConcurrentClientsWhileAJobTrains) {
  NL_REQUIRE_OPENAI_CLIENT();
  TempDir tmp;
  const fs::path model = serve_test_model(tmp.path);
  // A second adapter to mix in, served from --adapters.
  fs::create_directories(tmp / "adapters");
  const fs::path other = standalone_train(model, tmp / "other", 10, kLr, 11, kSaveEvery);
  fs::copy_file(other, tmp / "adapters/zorbo.gguf");
  ServeProcess server({"--model", model.string(), "--adapters", (tmp / "adapters").string(), "--data",
                       (tmp / "data").string()},
                      tmp / "serve.log");
  ASSERT_TRUE(server.started());
  const int steps = 60;
  // 16 clients x 8 requests (chat and text, streamed and not, base and adapter) while it
  // trains: as many at once as the default --max-concurrent, so none is refused.
  constexpr int kClients = 16, kRequests = 8;
  nlohmann::json out = run_node("load.mjs", {server.base_url(), serve_test_data().string(), model.stem().string() + ",zorbo",
                                             std::to_string(kClients), std::to_string(kRequests), "24",
                                             hyperparameters(steps), std::to_string(kSeed)});
  ASSERT_TRUE(out.contains("job")) << out.dump(1);
  EXPECT_EQ(out["answered"], kClients * kRequests);
  EXPECT_TRUE(out["mismatches"].empty()) << out["mismatches"].dump(1);
  EXPECT_EQ(out["status_at_start"], "running") << "the load did not overlap the job";
  std::printf("load: %d requests in %.2f s; the job was %s when they were answered\n", kClients * kRequests,
              out["load_seconds"].get<double>(),
              out["status_after_load"].get<std::string>().c_str());
  // The running completions shared decode steps (serve's decode loop batches them).
  httplib::Client health("127.0.0.1", server.port());
  const nlohmann::json h = get_json(health, "/health");
  std::printf("decode loop: %lld steps carried %lld tokens\n", h.value("decode_steps", 0LL), h.value("decode_tokens", 0LL));
  EXPECT_GT(h.value("decode_steps", 0LL), 0);
  EXPECT_GT(h.value("decode_tokens", 0LL), h.value("decode_steps", 0LL)) << "no step carried two completions";
  ASSERT_EQ(out["job"]["status"], "succeeded") << out["job"].dump();
  const fs::path job_adapter = tmp / "data/jobs" / out["job"]["id"].get<std::string>() / "run/adapter.gguf";
  const fs::path ref = standalone_train(model, tmp / "standalone", steps, kLr, kSeed, kSaveEvery);
  EXPECT_TRUE(same_bytes(job_adapter, ref)) << "the job's adapter under load differs from a standalone train's";
  // Memory: the server's peak within the standalone run's peak plus the KV-cache budget of
  // the requests that may run at once (docs/SERVE.md, Memory).
  double train_peak_mib = 0;
  for (const nlohmann::json& row : read_jsonl(tmp / "standalone/log.jsonl", "train"))
    train_peak_mib = std::max(train_peak_mib, row.value("peak_rss_mib", 0.0));
  const double server_peak_mib = static_cast<double>(server.peak_rss_bytes()) / (1 << 20);
  const double budget_mib =
      static_cast<double>(nl::serve_memory_budget(nl::Model::load(model.string())->config, nl::ServeLimits{})) / (1 << 20);
  std::printf("peak RSS: server %.1f MiB, standalone train %.1f MiB, request budget %.1f MiB\n", server_peak_mib,
              train_peak_mib, budget_mib);
  EXPECT_GT(server_peak_mib, 0.0);
  EXPECT_LE(server_peak_mib, train_peak_mib + budget_mib);
  EXPECT_EQ(server.terminate(), 0) << server.log();
}

}  // namespace
