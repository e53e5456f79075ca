// `nightlora serve --model M [--adapters DIR] [--data DIR] [--host H] [--port N] [--api-key K]`:
// the OpenAI API subset over one resident model (serve/server.h; docs/SERVE.md). The command
// of nightlora-serve (cli/serve/main.cpp), which `nightlora serve` execs: its options are
// defined here only. Log lines go
// to stdout, one per event; the first ones say the models and the address. SIGINT/SIGTERM
// stop it: a running fine-tuning job saves a checkpoint first and continues when the server
// starts again on the same --data folder.
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "command.h"
#include "nightlora/serve/server.h"
#include "serve_program.h"

namespace {

std::string default_data_dir() {
  if (const char* x = std::getenv("XDG_DATA_HOME"); x && *x) return std::string(x) + "/nightlora/serve";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.local/share/nightlora/serve";
  return "nightlora-serve";
}

void log_line(const std::string& s) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  char stamp[32];
  const std::time_t t = std::time(nullptr);
  std::strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", std::gmtime(&t));
  std::printf("%s serve: %s\n", stamp, s.c_str());
  std::fflush(stdout);
}

int run_serve(const nl::ServeOptions& opt) {
  // The signals that stop the server are taken by one thread (sigwait) in every thread's
  // stead, so no handler runs inside the HTTP or training threads: it asks the server to stop,
  // and the server lets the running job save a checkpoint first.
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGUSR1}) sigaddset(&set, s);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client that went away is a failed write, not the end of the server

  nl::Server server(opt, log_line);
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&set, &sig);
    if (sig != SIGUSR1) log_line(std::string("signal ") + std::to_string(sig) + ": stopping");
    server.stop();
  });
  server.run();
  pthread_kill(waiter.native_handle(), SIGUSR1);  // wakes the waiter when no signal came
  waiter.join();
  log_line("stopped");
  return 0;
}

nlcli::Register reg_serve(
    "serve", nlcli::kServeHelp, [](CLI::App& sub) -> nlcli::Run {
      auto o = std::make_shared<nl::ServeOptions>();
      o->data_dir = default_data_dir();
      sub.add_option("-m,--model", o->model, "GGUF file or Hugging Face folder: loaded once, shared by every request and job")
          ->required();
      sub.add_option("--adapters", o->adapters_dir,
                     "folder of adapters served by name: NAME.gguf, or NAME/ with adapter.gguf or a PEFT adapter");
      sub.add_option("--data", o->data_dir, "folder of uploaded files, fine-tuning jobs and their adapters (kept across restarts)")
          ->capture_default_str();
      sub.add_option("--host", o->host, "address to listen on (loopback by default; another one wants --api-key)")
          ->capture_default_str();
      sub.add_option("--port", o->port, "port (0: any free one, printed at start)")->capture_default_str()->check(CLI::Range(0, 65535));
      sub.add_option("--api-key", o->api_key, "require 'Authorization: Bearer KEY' on every request");
      sub.add_option("--chat-format", o->chat_format,
                     "chat template instead of the model's: chatml, qwen2, qwen2.5, qwen3, llama3, llama3.1");
      sub.add_option("--precision", o->precision, "inference products: int8 (fast, the default) or f32 (exact)")
          ->check(CLI::IsMember({"int8", "f32"}))->capture_default_str();
      sub.add_option("--kv-type", o->kv_type, "KV cache element type: f16 or f32")->check(CLI::IsMember({"f16", "f32"}))
          ->capture_default_str();
      sub.add_option("-t,--threads", o->threads, "engine threads (0 = all cores)")->check(CLI::NonNegativeNumber);
      sub.add_option("--max-body", o->limits.max_body_bytes, "largest JSON request body, bytes")->capture_default_str();
      sub.add_option("--max-upload", o->limits.max_upload_bytes, "largest uploaded file, bytes")->capture_default_str();
      sub.add_option("--max-prompt-tokens", o->limits.max_prompt_tokens, "longest prompt of a request, tokens")
          ->capture_default_str();
      sub.add_option("--max-tokens", o->limits.max_output_tokens, "most tokens one request may generate")->capture_default_str();
      sub.add_option("--max-concurrent", o->limits.max_concurrent, "completions running at once (more get 429)")
          ->capture_default_str();
      sub.add_option("--max-files", o->limits.max_files, "files kept")->capture_default_str();
      sub.add_option("--max-jobs", o->limits.max_queued_jobs, "fine-tuning jobs queued or running")->capture_default_str();
      return [o]() { return run_serve(*o); };
    });

}  // namespace
