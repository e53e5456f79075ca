// A `nightlora serve` child process for the tests: started on a free loopback port (--port 0),
// its log in a file, the port read from its "listening on" line; stopped with SIGTERM (or
// killed with SIGKILL by kill9()) when the object goes. Plus what the serve tests share: the
// model they run on and the standalone `nightlora train` run a job is compared with.
#pragma once
#include <sys/types.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_util.h"

namespace httplib {
class Client;
}

namespace nltest {

class ServeProcess {
 public:
  // Runs `nightlora serve ARGS --port 0` (serve_command()), its output in LOG, with ENV
  // ("NAME=value") added to this process's environment; waits for it to listen (fails the
  // test with the log after 120 s or when it exits).
  ServeProcess(const std::vector<std::string>& args, const fs::path& log, const std::vector<std::string>& env = {});
  ~ServeProcess();
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1"; }
  std::string log() const { return read_text(log_); }
  bool started() const { return port_ > 0; }
  // The process's peak resident memory so far (VmHWM), bytes; 0 when it cannot be read.
  size_t peak_rss_bytes() const;
  void kill9();      // SIGKILL, as a phone's OS or the OOM killer ends an app
  int terminate();  // SIGTERM and wait: the exit status

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  fs::path log_;
};

// The words that start the server: this build's `nightlora serve` (which execs nightlora-serve
// from beside it: the path a user takes), or $NL_SERVE_CLI alone when set: a nightlora-serve
// run directly (scripts/fuzz.sh --ci points it at the ASan + UBSan one in build-fuzz/ to run
// the hostile requests against).
std::vector<std::string> serve_command();
// The same, quoted for /bin/sh.
std::string serve_command_line();

// The model the serve tests run on: stories260K from ../shared, or (absent) a tiny synthetic
// llama made in `dir`, with a note on stderr saying so.
fs::path serve_test_model(const fs::path& dir);

// The training data the jobs use (data/stories/train.jsonl, shipped with the repo).
fs::path serve_test_data();

// `nightlora train` on `model` and the test data into OUT with the settings a job gets from
// {"n_steps": steps, "learning_rate": lr, "precision": "f32", "save_every": save_every} and
// seed `seed`; returns the adapter.gguf path (fails the test when train fails).
fs::path standalone_train(const fs::path& model, const fs::path& out, int steps, double lr, int seed, int save_every);

// `nightlora generate` greedy: the text alone (no trailing newline); chat renders the
// prompt with the model's template.
std::string cli_generate(const fs::path& model, const std::string& prompt, int n, const std::string& adapter, bool chat);

// GET PATH as JSON (an empty object when the request failed); a status other than 200 fails
// the test, with the body.
nlohmann::json get_json(httplib::Client& c, const std::string& path);

// node, when it and tools/js-serve's openai client are installed; "" otherwise.
std::string node_with_openai();

// Text as a JSON answer carries it: bytes that are not UTF-8 (a random-weight model makes
// them) become U+FFFD, as the server's JSON encoder writes them. The identity on UTF-8 text.
std::string as_json_text(const std::string& s);

// The files' bytes are equal.
bool same_bytes(const fs::path& a, const fs::path& b);

}  // namespace nltest
