// Requests a server must refuse, each with an OpenAI-shaped JSON error and the right status,
// and the server still serving afterwards: bearer tokens, path-like model names and ids,
// oversized bodies and uploads, malformed JSON, wrong types, huge max_tokens, long prompts;
// and what it must still do among them (a streamed and a plain completion, a tiny job).
// scripts/fuzz.sh --ci runs this suite again against the ASan + UBSan nightlora of
// build-fuzz/ (NL_SERVE_CLI): a request that makes the server read out of bounds, leak or
// overflow fails there.
#include <httplib.h>

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include <nlohmann/json.hpp>

#include "serve_process.h"

namespace {

using namespace nltest;

const char* kKey = "sk-test-0123456789abcdef";

class ServeRefusals : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new TempDir;
    model_ = serve_test_model(tmp_->path);
    server_ = new ServeProcess({"--model", model_.string(), "--data", (tmp_->path / "data").string(), "--api-key", kKey,
                                "--max-body", "4096", "--max-upload", "8192", "--max-tokens", "64",
                                "--max-prompt-tokens", "32"},
                               tmp_->path / "serve.log");
  }
  static void TearDownTestSuite() {
    delete server_;
    delete tmp_;
  }
  void SetUp() override { ASSERT_TRUE(server_->started()); }

  static httplib::Headers auth(const std::string& key = kKey) { return {{"Authorization", "Bearer " + key}}; }
  static httplib::Client client() { return httplib::Client("127.0.0.1", server_->port()); }

  // Checks an error answer: the status and the error's shape (message, type, param, code).
  static nlohmann::json expect_error(const httplib::Result& r, int status, const std::string& code = "",
                                     const std::string& param = "") {
    EXPECT_TRUE(r) << "no answer (the server died?)";
    if (!r) return {};
    EXPECT_EQ(r->status, status) << r->body;
    EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
    nlohmann::json j = nlohmann::json::parse(r->body, nullptr, false);
    EXPECT_TRUE(j.is_object() && j.contains("error")) << r->body;
    if (!j.is_object() || !j.contains("error")) return {};
    const nlohmann::json& e = j["error"];
    EXPECT_TRUE(e["message"].is_string() && !e["message"].get<std::string>().empty()) << r->body;
    EXPECT_TRUE(e["type"].is_string()) << r->body;
    if (!code.empty()) {
      EXPECT_EQ(e["code"], code) << r->body;
    }
    if (!param.empty()) {
      EXPECT_EQ(e["param"], param) << r->body;
    }
    return e;
  }

  static httplib::Result post(const std::string& path, const std::string& body) {
    httplib::Client c = client();
    return c.Post(path, auth(), body, "application/json");
  }
  std::string base() const { return model_.stem().string(); }

  static TempDir* tmp_;
  static fs::path model_;
  static ServeProcess* server_;
};
TempDir* ServeRefusals::tmp_ = nullptr;
fs::path ServeRefusals::model_;
ServeProcess* ServeRefusals::server_ = nullptr;

TEST_F(ServeRefusals, BearerTokenIsRequiredAndChecked) {
  httplib::Client c = client();
  expect_error(c.Get("/v1/models"), 401, "invalid_api_key");
  expect_error(c.Get("/v1/models", auth("sk-test-0123456789abcdeX")), 401, "invalid_api_key");  // last byte differs
  expect_error(c.Get("/v1/models", auth("sk-test")), 401, "invalid_api_key");                   // a prefix
  expect_error(c.Get("/v1/models", auth(std::string(kKey) + "0")), 401, "invalid_api_key");     // longer
  expect_error(c.Get("/v1/models", {{"Authorization", kKey}}), 401, "invalid_api_key");         // no "Bearer "
  expect_error(c.Post("/v1/completions", "{}", "application/json"), 401, "invalid_api_key");
  auto ok = c.Get("/v1/models", auth());
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
}

TEST_F(ServeRefusals, PathLikeNamesAreJustUnknownNames) {
  const std::vector<std::string> names = {"../../../../etc/passwd", "/etc/passwd", "..", ".", "adapters/../x",
                                         "x\\..\\y", std::string("a\0b", 3), std::string(2000, 'a')};
  for (const std::string& name : names) {
    nlohmann::json body = {{"model", name}, {"prompt", "Once"}};
    expect_error(post("/v1/completions", body.dump()), 404, "model_not_found", "model");
  }
  httplib::Client c = client();
  expect_error(c.Get("/v1/models/..%2F..%2Fetc%2Fpasswd", auth()), 404);
  expect_error(c.Get("/v1/files/file-..%2F..%2Fetc%2Fpasswd", auth()), 404);
  expect_error(c.Get("/v1/files/file-000000000000000000000000", auth()), 404, "file_not_found");
  expect_error(c.Get("/v1/fine_tuning/jobs/..%2Fjobs/events", auth()), 404);
  expect_error(c.Post("/v1/fine_tuning/jobs/ftjob-000000000000000000000000/cancel", auth(), "", "application/json"),
               404, "job_not_found");
  for (const std::string file : {"../../../../etc/passwd", "/etc/passwd", "file-../../x"}) {
    nlohmann::json body = {{"model", base()}, {"training_file", file}};
    expect_error(post("/v1/fine_tuning/jobs", body.dump()), 400, "file_not_found", "training_file");
  }
  // An adapter named like a path is not a model to fine-tune from either.
  nlohmann::json body = {{"model", "../x"}, {"training_file", "file-000000000000000000000000"}};
  expect_error(post("/v1/fine_tuning/jobs", body.dump()), 400, "invalid_value", "model");
}

TEST_F(ServeRefusals, OversizedBodiesAndUploads) {
  nlohmann::json body = {{"model", base()}, {"prompt", std::string(5000, 'a')}};
  expect_error(post("/v1/completions", body.dump()), 413, "request_too_large");
  httplib::Client c = client();
  std::string big;
  for (int i = 0; i < 200; ++i) big += "{\"text\": \"Once upon a time there was a dragon.\"}\n";
  ASSERT_GT(big.size(), 8192u);
  httplib::MultipartFormDataItems items = {{"purpose", "fine-tune", "", ""}, {"file", big, "big.jsonl", ""}};
  expect_error(c.Post("/v1/files", auth(), items), 413, "file_too_large", "file");
  // A body far past every limit is refused before it is read.
  expect_error(c.Post("/v1/files", auth(), std::string(1 << 20, 'x'), "application/octet-stream"), 413);
}

TEST_F(ServeRefusals, MalformedJsonAndWrongTypesAre400s) {
  const std::string m = "\"model\": \"" + base() + "\"";
  for (const std::string body : {"", "{", "{\"model\": }", "[1, 2]", "\"text\"", "null", "{\"model\": \"x\"} trailing"})
    expect_error(post("/v1/chat/completions", body), 400);
  struct Case {
    std::string path, body, param;
  };
  const std::vector<Case> cases = {
      {"/v1/completions", "{\"model\": 5, \"prompt\": \"x\"}", "model"},
      {"/v1/completions", "{\"prompt\": \"x\"}", "model"},
      {"/v1/completions", "{" + m + ", \"prompt\": 7}", "prompt"},
      {"/v1/completions", "{" + m + ", \"prompt\": \"x\", \"max_tokens\": \"8\"}", "max_tokens"},
      {"/v1/completions", "{" + m + ", \"prompt\": \"x\", \"max_tokens\": 0}", "max_tokens"},
      {"/v1/completions", "{" + m + ", \"prompt\": \"x\", \"max_tokens\": 2.5}", "max_tokens"},
      {"/v1/completions", "{" + m + ", \"prompt\": \"x\", \"temperature\": \"hot\"}", "temperature"},
      {"/v1/completions", "{" + m + ", \"prompt\": \"x\", \"temperature\": 9}", "temperature"},
      {"/v1/completions", "{" + m + ", \"prompt\": \"x\", \"stream\": \"yes\"}", "stream"},
      {"/v1/completions", "{" + m + ", \"prompt\": \"x\", \"n\": 3}", "n"},
      {"/v1/completions", "{" + m + ", \"prompt\": \"x\", \"stop\": [1]}", "stop"},
      {"/v1/chat/completions", "{" + m + ", \"messages\": \"hi\"}", "messages"},
      {"/v1/chat/completions", "{" + m + ", \"messages\": []}", "messages"},
      {"/v1/chat/completions", "{" + m + ", \"messages\": [{\"role\": \"wizard\", \"content\": \"x\"}]}", "messages[0].role"},
      {"/v1/chat/completions", "{" + m + ", \"messages\": [{\"role\": \"user\", \"content\": 5}]}", "messages[0].content"},
      // A text part whose type is not a string (nlohmann's value() threw: a 500 before).
      {"/v1/chat/completions", "{" + m + ", \"messages\": [{\"role\": \"user\", \"content\": [{\"type\": 5, \"text\": \"x\"}]}]}",
       "messages[0].content"},
      {"/v1/chat/completions", "{" + m + ", \"messages\": [{\"role\": 7, \"content\": \"x\"}]}", "messages[0].role"},
      {"/v1/fine_tuning/jobs", "{" + m + ", \"training_file\": 5}", "training_file"},
      {"/v1/fine_tuning/jobs", "{" + m + ", \"training_file\": \"f\", \"hyperparameters\": []}", "hyperparameters"},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.body);
    expect_error(post(k.path, k.body), 400, "", k.param);
  }
}

TEST_F(ServeRefusals, HugeMaxTokensAndLongPromptsAre400s) {
  for (const std::string max : {"65", "1000000000000", "9223372036854775807", "18446744073709551615", "1e300"}) {
    SCOPED_TRACE(max);
    const std::string body = "{\"model\": \"" + base() + "\", \"prompt\": \"Once\", \"max_tokens\": " + max + "}";
    expect_error(post("/v1/completions", body), 400, "", "max_tokens");
  }
  nlohmann::json body = {{"model", base()}, {"prompt", std::string(400, 'z')}, {"max_tokens", 4}};
  expect_error(post("/v1/completions", body.dump()), 400, "context_length_exceeded", "prompt");
  // Within the limits: answered.
  body = {{"model", base()}, {"prompt", "Once"}, {"max_tokens", 64}, {"temperature", 0}};
  auto ok = post("/v1/completions", body.dump());
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
}

TEST_F(ServeRefusals, ASecondServerOnTheSamePortOrFolderFails) {
  const std::string cli = "timeout 60 " + serve_command_line() + " --model " + shq(model_.string());
  CmdResult port = run_cmd(cli + " --data " + shq((tmp_->path / "other").string()) + " --port " +
                           std::to_string(server_->port()));
  EXPECT_EQ(port.rc, 1) << port.out << port.err;
  EXPECT_NE(port.err.find("cannot listen on 127.0.0.1:" + std::to_string(server_->port())), std::string::npos) << port.err;
  CmdResult folder = run_cmd(cli + " --data " + shq((tmp_->path / "data").string()) + " --port 0");
  EXPECT_EQ(folder.rc, 4) << folder.out << folder.err;  // busy, as `train` on a locked folder
  EXPECT_NE(folder.err.find("another nightlora serve is using"), std::string::npos) << folder.err;
}

TEST_F(ServeRefusals, BadUploadsAndUnknownRoutes) {
  httplib::Client c = client();
  httplib::MultipartFormDataItems wrong_purpose = {{"purpose", "assistants", "", ""}, {"file", "{\"text\": \"a\"}\n", "a.jsonl", ""}};
  expect_error(c.Post("/v1/files", auth(), wrong_purpose), 400, "invalid_value", "purpose");
  httplib::MultipartFormDataItems not_jsonl = {{"purpose", "fine-tune", "", ""},
                                               {"file", "{\"text\": \"a\"}\nnot json\n", "a.jsonl", ""}};
  nlohmann::json e = expect_error(c.Post("/v1/files", auth(), not_jsonl), 400, "invalid_file_format", "file");
  EXPECT_NE(e.value("message", "").find("line 2"), std::string::npos) << e.dump();
  expect_error(c.Post("/v1/files", auth(), "{}", "application/json"), 400, "missing_required_parameter", "file");
  expect_error(c.Get("/v1/nothing-here", auth()), 404);
  expect_error(c.Delete("/v1/models", auth()), 404);
  expect_error(c.Get("/v1/fine_tuning/jobs?limit=-1", auth()), 400, "invalid_value", "limit");
  // Still serving after everything above.
  auto ok = c.Get("/v1/models", auth());
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
}

TEST_F(ServeRefusals, AmongThemAnswersStreamedAndPlainCompletionsAndTrainsATinyJob) {
  httplib::Client c = client();
  c.set_read_timeout(120);
  nlohmann::json body = {{"model", base()}, {"messages", {{{"role", "user"}, {"content", "Once upon a time"}}}},
                         {"max_tokens", 12}, {"temperature", 0}};
  auto plain = c.Post("/v1/chat/completions", auth(), body.dump(), "application/json");
  ASSERT_TRUE(plain);
  ASSERT_EQ(plain->status, 200) << plain->body;
  const std::string text = nlohmann::json::parse(plain->body)["choices"][0]["message"]["content"].get<std::string>();
  body["stream"] = true;
  auto streamed = c.Post("/v1/chat/completions", auth(), body.dump(), "application/json");
  ASSERT_TRUE(streamed);
  ASSERT_EQ(streamed->status, 200) << streamed->body;
  // The streamed deltas add up to the plain answer (greedy), and the stream ends with [DONE].
  std::string joined;
  for (size_t at = 0; (at = streamed->body.find("data: {", at)) != std::string::npos;) {
    const size_t end = streamed->body.find("\n\n", at);
    nlohmann::json ev = nlohmann::json::parse(streamed->body.substr(at + 6, end - at - 6));
    joined += ev["choices"][0]["delta"].value("content", "");
    at = end;
  }
  EXPECT_EQ(joined, text);
  EXPECT_NE(streamed->body.find("data: [DONE]"), std::string::npos);

  // A tiny fine-tuning job: upload, create, run to the end, chat with its model.
  std::string data;
  for (const std::string line : {"{\"text\": \"Once upon a time there was a dragon named Zorbo.\"}",
                                  "{\"prompt\": \"Zorbo saw\", \"completion\": \" a red ball.\"}"})
    data += line + "\n";
  httplib::MultipartFormDataItems items = {{"purpose", "fine-tune", "", ""}, {"file", data, "tiny.jsonl", ""}};
  auto file = c.Post("/v1/files", auth(), items);
  ASSERT_TRUE(file);
  ASSERT_EQ(file->status, 200) << file->body;
  nlohmann::json job_body = {{"model", base()},
                             {"training_file", nlohmann::json::parse(file->body)["id"]},
                             {"hyperparameters", {{"n_steps", 2}, {"batch_size", 1}, {"seq_len", 16}, {"rank", 2}}}};
  auto job = post("/v1/fine_tuning/jobs", job_body.dump());
  ASSERT_TRUE(job);
  ASSERT_EQ(job->status, 200) << job->body;
  const std::string id = nlohmann::json::parse(job->body)["id"].get<std::string>();
  nlohmann::json state;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
  do {
    auto r = c.Get("/v1/fine_tuning/jobs/" + id, auth());
    ASSERT_TRUE(r);
    state = nlohmann::json::parse(r->body);
    if (state["status"] != "queued" && state["status"] != "running") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  } while (std::chrono::steady_clock::now() < deadline);
  ASSERT_EQ(state["status"], "succeeded") << state.dump(1);
  body = {{"model", state["fine_tuned_model"]}, {"prompt", "Zorbo saw"}, {"max_tokens", 8}, {"temperature", 0}};
  auto ft = post("/v1/completions", body.dump());
  ASSERT_TRUE(ft);
  EXPECT_EQ(ft->status, 200) << ft->body;
}

}  // namespace
