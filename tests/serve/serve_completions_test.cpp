// Completion features beyond greedy text: stop strings (cut before them, streamed or not),
// seeded sampling equal to `nightlora generate --temp T --seed S` with the same top-k/top-p,
// an adapter from --adapters, and usage counts.
#include <httplib.h>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "serve_process.h"

namespace {

using namespace nltest;

nlohmann::json post(httplib::Client& c, const std::string& path, const nlohmann::json& body) {
  auto r = c.Post(path, body.dump(), "application/json");
  EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
  return r ? nlohmann::json::parse(r->body, nullptr, false) : nlohmann::json::object();
}

// The text of a streamed text completion, from its server-sent events.
std::string streamed_text(httplib::Client& c, const nlohmann::json& body, std::string& finish) {
  auto r = c.Post("/v1/completions", body.dump(), "application/json");
  EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
  if (!r) return "";
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  std::string text;
  size_t pos = 0;
  bool done = false;
  while ((pos = r->body.find("data: ", pos)) != std::string::npos) {
    const size_t end = r->body.find("\n\n", pos);
    const std::string data = r->body.substr(pos + 6, end - pos - 6);
    pos = end;
    if (data == "[DONE]") {
      done = true;
      break;
    }
    nlohmann::json j = nlohmann::json::parse(data);
    text += j["choices"][0]["text"].get<std::string>();
    if (!j["choices"][0]["finish_reason"].is_null()) finish = j["choices"][0]["finish_reason"];
  }
  EXPECT_TRUE(done) << "no [DONE] event";
  return text;
}

TEST(ServeCompletions, StopStringsSamplingAndAdapters) {
  TempDir tmp;
  const fs::path model = serve_test_model(tmp.path);
  fs::create_directories(tmp / "adapters/zorbo");
  const fs::path adapter = standalone_train(model, tmp / "zorbo-run", 10, 5e-3, 1, 50);
  fs::copy_file(adapter, tmp / "adapters/zorbo/adapter.gguf");
  ServeProcess server({"--model", model.string(), "--adapters", (tmp / "adapters").string(), "--data",
                       (tmp / "data").string()},
                      tmp / "serve.log");
  ASSERT_TRUE(server.started());
  httplib::Client c("127.0.0.1", server.port());
  const std::string base = model.stem().string(), prompt = "Once upon a time";

  // Greedy, then with a stop string taken from the middle of that text.
  nlohmann::json req = {{"model", base}, {"prompt", prompt}, {"max_tokens", 40}, {"temperature", 0}};
  nlohmann::json full = post(c, "/v1/completions", req);
  const std::string text = full["choices"][0]["text"];
  const int completion_tokens = full["usage"]["completion_tokens"];
  EXPECT_TRUE(completion_tokens == 40 || full["choices"][0]["finish_reason"] == "stop") << full.dump();
  EXPECT_EQ(full["usage"]["prompt_tokens"].get<int>() + completion_tokens, full["usage"]["total_tokens"].get<int>());
  // A stop string from that text, after its first byte: 3 printable ASCII characters (a
  // random-weight model's text may hold bytes that are not UTF-8, which JSON cannot carry).
  auto printable = [&](size_t i) {
    for (size_t k = i; k < i + 3; ++k)
      if (k >= text.size() || text[k] < 0x21 || text[k] > 0x7e) return false;
    return true;
  };
  size_t at = text.size() / 3;
  while (at + 3 <= text.size() && !printable(at)) ++at;
  if (!printable(at))
    for (at = 1; at + 3 <= text.size() && !printable(at);) ++at;
  ASSERT_TRUE(printable(at)) << "no 3 printable characters in " << text;
  const std::string stop = text.substr(at, 3);
  const std::string before = text.substr(0, text.find(stop));
  req["stop"] = {"never-there", stop};
  nlohmann::json cut = post(c, "/v1/completions", req);
  EXPECT_EQ(cut["choices"][0]["text"], before);
  EXPECT_EQ(cut["choices"][0]["finish_reason"], "stop");
  req["stream"] = true;
  std::string finish;
  EXPECT_EQ(streamed_text(c, req, finish), before);
  EXPECT_EQ(finish, "stop");

  // Seeded sampling: the same text twice, and `generate`'s with the same settings.
  nlohmann::json sampled = {{"model", base}, {"prompt", prompt}, {"max_tokens", 30}, {"temperature", 0.8},
                            {"top_k", 40},   {"top_p", 0.95},     {"min_p", 0.05}, {"seed", 5}};
  const std::string a = post(c, "/v1/completions", sampled)["choices"][0]["text"];
  const std::string b = post(c, "/v1/completions", sampled)["choices"][0]["text"];
  EXPECT_EQ(a, b);
  CmdResult gen = run_cli("generate -q --model " + shq(model.string()) + " --prompt " + shq(prompt) +
                          " -n 30 --temp 0.8 --top-k 40 --top-p 0.95 --min-p 0.05 --seed 5");
  ASSERT_EQ(gen.rc, 0) << gen.err;
  EXPECT_EQ(a + "\n", as_json_text(gen.out));

  // The adapter from --adapters, by its folder's name.
  nlohmann::json with_adapter = {{"model", "zorbo"}, {"prompt", prompt}, {"max_tokens", 40}, {"temperature", 0}};
  EXPECT_EQ(post(c, "/v1/completions", with_adapter)["choices"][0]["text"].get<std::string>() + "\n",
            as_json_text(run_cli("generate -q --temp 0 --model " + shq(model.string()) + " --prompt " + shq(prompt) +
                    " -n 40 --adapter " + shq(adapter.string()))
                             .out));
  EXPECT_EQ(server.terminate(), 0) << server.log();
}

}  // namespace
