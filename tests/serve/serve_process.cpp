#include "serve_process.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <regex>
#include <thread>

extern char** environ;

namespace nltest {

std::vector<std::string> serve_command() {
  const char* sanitized = std::getenv("NL_SERVE_CLI");
  if (sanitized && *sanitized) return {sanitized};
  return {NL_CLI_PATH, "serve"};
}

std::string serve_command_line() {
  std::string line;
  for (const std::string& word : serve_command()) line += (line.empty() ? "" : " ") + shq(word);
  return line;
}

ServeProcess::ServeProcess(const std::vector<std::string>& args, const fs::path& log,
                           const std::vector<std::string>& env)
    : log_(log) {
  std::vector<std::string> argv_s = serve_command();
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  argv_s.push_back("--port");
  argv_s.push_back("0");
  std::vector<char*> argv;
  for (std::string& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  std::vector<std::string> env_s(env);
  for (char** e = environ; *e; ++e) env_s.push_back(*e);  // the first of a name wins (getenv)
  std::vector<char*> envp;
  for (std::string& s : env_s) envp.push_back(s.data());
  envp.push_back(nullptr);
  const int rc = posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    ADD_FAILURE() << "cannot start " << argv[0];
    pid_ = -1;
    return;
  }
  const std::regex listening(R"(listening on http://127\.0\.0\.1:(\d+))");
  // (A sanitized build starts slower: 120 s.)
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    std::smatch m;
    const std::string text = read_text(log_);
    if (std::regex_search(text, m, listening)) {
      port_ = std::stoi(m[1]);
      return;
    }
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      ADD_FAILURE() << "nightlora serve exited before listening:\n" << text;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ADD_FAILURE() << "nightlora serve did not listen within 120 s:\n" << read_text(log_);
}

ServeProcess::~ServeProcess() {
  if (pid_ > 0) terminate();
}

size_t ServeProcess::peak_rss_bytes() const {
  if (pid_ <= 0) return 0;
  const std::string status = read_text("/proc/" + std::to_string(pid_) + "/status");
  const size_t at = status.find("VmHWM:");
  if (at == std::string::npos) return 0;
  return static_cast<size_t>(std::stoull(status.substr(at + 6))) * 1024;  // "VmHWM:   12345 kB"
}

void ServeProcess::kill9() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

int ServeProcess::terminate() {
  if (pid_ <= 0) return -1;
  ::kill(pid_, SIGTERM);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

fs::path serve_test_model(const fs::path& dir) {
  const fs::path shared = shared_models_dir();
  if (!shared.empty() && fs::exists(shared / "stories260K/stories260K.gguf")) return shared / "stories260K/stories260K.gguf";
  std::fprintf(stderr, "note: ../shared/models/stories260K is absent: the serve tests run on a tiny synthetic llama\n");
  const fs::path p = dir / "tiny-llama.gguf";
  CmdResult r = run_cli("synth-model --preset tiny-llama --type q8_0 " + shq(p.string()));
  EXPECT_EQ(r.rc, 0) << r.err;
  return p;
}

fs::path serve_test_data() { return source_dir() / "data/stories/train.jsonl"; }

fs::path standalone_train(const fs::path& model, const fs::path& out, int steps, double lr, int seed, int save_every) {
  char lr_s[32];
  std::snprintf(lr_s, sizeof lr_s, "%.17g", lr);
  CmdResult r = run_cli("train --model " + shq(model.string()) + " --data " + shq(serve_test_data().string()) +
                        " --out " + shq(out.string()) + " --iters " + std::to_string(steps) + " --lr " + lr_s +
                        " --precision f32 --seed " + std::to_string(seed) + " --save-every " + std::to_string(save_every));
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  return out / "adapter.gguf";
}

std::string cli_generate(const fs::path& model, const std::string& prompt, int n, const std::string& adapter, bool chat) {
  std::string args = "generate -q --temp 0 --model " + shq(model.string()) + " --prompt " + shq(prompt) + " -n " +
                     std::to_string(n);
  if (!adapter.empty()) args += " --adapter " + shq(adapter);
  if (chat) args += " --chat";
  CmdResult r = run_cli(args);
  EXPECT_EQ(r.rc, 0) << r.err;
  std::string text = r.out;
  if (!text.empty() && text.back() == '\n') text.pop_back();  // generate ends its output with one
  return text;
}

std::string node_with_openai() {
  if (!fs::exists(source_dir() / "tools/js-serve/node_modules/openai/package.json")) return "";
  if (std::system("node --version >/dev/null 2>&1") != 0) return "";
  return "node";
}

std::string as_json_text(const std::string& s) {
  return nlohmann::json::parse(nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace))
      .get<std::string>();
}

bool same_bytes(const fs::path& a, const fs::path& b) {
  return fs::exists(a) && fs::exists(b) && read_text(a) == read_text(b);
}

nlohmann::json get_json(httplib::Client& c, const std::string& path) {
  auto r = c.Get(path);
  if (!r) return nlohmann::json::object();
  EXPECT_EQ(r->status, 200) << path << ": " << r->body;
  return nlohmann::json::parse(r->body, nullptr, false);
}

}  // namespace nltest
