// The concurrency limit (--max-concurrent), deterministically: the server's test hook
// NL_SERVE_TEST_HOLD=FILE makes every completion that has its slot wait while FILE exists, so
// the test holds both slots as long as it needs, sees them held through GET /health, and the
// third request's 429 races nothing. Timing decides nothing here: every wait is for a state
// the server reports, with a deadline only to fail instead of hanging.
#include <httplib.h>

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "serve_process.h"

namespace {

using namespace nltest;

// GET /health's completions_running (-1 when it cannot be read).
int running(httplib::Client& c) {
  auto r = c.Get("/health");
  if (!r || r->status != 200) return -1;
  nlohmann::json j = nlohmann::json::parse(r->body, nullptr, false);
  return j.is_object() && j.contains("completions_running") ? j["completions_running"].get<int>() : -1;
}

// Waits until /health reports `n` completions running; false after 60 s.
bool wait_running(httplib::Client& c, int n) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    if (running(c) == n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

TEST(ServeLimits, ConcurrencyLimitIs429WhileEverySlotIsHeld) {
  TempDir tmp;
  const fs::path model = serve_test_model(tmp.path);
  const fs::path hold = tmp / "hold";
  std::ofstream(hold) << "held\n";
  ServeProcess server({"--model", model.string(), "--data", (tmp / "data").string(), "--max-concurrent", "2",
                       "--max-tokens", "8"},
                      tmp / "serve.log", {"NL_SERVE_TEST_HOLD=" + hold.string()});
  ASSERT_TRUE(server.started());
  httplib::Client c("127.0.0.1", server.port());
  ASSERT_EQ(running(c), 0) << server.log();
  const std::string base = model.stem().string();
  const nlohmann::json body = {{"model", base}, {"prompt", "Once"}, {"max_tokens", 8}, {"temperature", 0}};
  nlohmann::json streamed = body;
  streamed["stream"] = true;

  // Two completions take the two slots and wait there (one streamed, one not).
  // What each held request got: its status and body (-1: no answer).
  int first_status = -1, second_status = -1;
  std::string first_body, second_body;
  std::thread t1([&] {
    httplib::Client c1("127.0.0.1", server.port());
    c1.set_read_timeout(120);
    if (auto r = c1.Post("/v1/completions", body.dump(), "application/json")) first_status = r->status, first_body = r->body;
  });
  std::thread t2([&] {
    httplib::Client c2("127.0.0.1", server.port());
    c2.set_read_timeout(120);
    if (auto r = c2.Post("/v1/completions", streamed.dump(), "application/json"))
      second_status = r->status, second_body = r->body;
  });
  const bool both_held = wait_running(c, 2);
  EXPECT_TRUE(both_held) << "the two completions did not both hold a slot:\n" << server.log();

  if (both_held) {
    // The third, chat or not, streamed or not: 429 in OpenAI's shape. Other routes still answer.
    for (const std::string path : {"/v1/completions", "/v1/chat/completions"}) {
      nlohmann::json third = path == "/v1/completions"
                                 ? body
                                 : nlohmann::json{{"model", base}, {"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                                                  {"stream", true}};
      auto r = c.Post(path, third.dump(), "application/json");
      ASSERT_TRUE(r) << "no answer";
      EXPECT_EQ(r->status, 429) << r->body;
      nlohmann::json e = nlohmann::json::parse(r->body, nullptr, false);
      ASSERT_TRUE(e.is_object() && e.contains("error")) << r->body;
      EXPECT_EQ(e["error"]["type"], "rate_limit_error") << r->body;
      EXPECT_EQ(e["error"]["code"], "rate_limit_exceeded") << r->body;
    }
    auto models = c.Get("/v1/models");
    ASSERT_TRUE(models);
    EXPECT_EQ(models->status, 200);
    EXPECT_EQ(running(c), 2) << "a refused request kept a slot";
  }

  // Let go: both held requests are answered, the slots come back, a new request is served.
  fs::remove(hold);
  t1.join();
  t2.join();
  EXPECT_EQ(first_status, 200) << first_body << server.log();
  EXPECT_EQ(second_status, 200) << second_body << server.log();
  EXPECT_NE(second_body.find("data: [DONE]"), std::string::npos) << second_body;
  EXPECT_TRUE(wait_running(c, 0)) << "the slots were not given back";
  auto again = c.Post("/v1/completions", body.dump(), "application/json");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 200) << again->body;
  EXPECT_EQ(server.terminate(), 0) << server.log();
}

}  // namespace
