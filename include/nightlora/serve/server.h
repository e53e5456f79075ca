// `nightlora serve`: an HTTP server speaking the subset of OpenAI's API that clients already
// use (models, chat and text completions with or without streaming, files, fine-tuning jobs)
// over ONE resident model (train/resident_model.h). Every request's adapter is applied on the
// fly to that base (no reload, no merged copy); requests and a background fine-tuning job
// take turns on its engine (engine/engine_turns.h): a request's forward (each prompt chunk,
// each new token) goes before a waiting training step. docs/SERVE.md describes the endpoints,
// the limits and the security rules.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace nl {

struct ModelConfig;

// Limits on what one request (and all of them at once) may ask for. Past a limit the request
// gets an OpenAI-shaped JSON error with the right status (413, 400 or 429), never a crash.
struct ServeLimits {
  size_t max_body_bytes = size_t{1} << 20;     // a JSON request body (413 past it)
  size_t max_upload_bytes = size_t{64} << 20;  // one uploaded file (POST /v1/files; 413)
  int64_t max_prompt_tokens = 4096;            // prompt tokens of one request (400)
  int64_t max_output_tokens = 1024;            // max_tokens of one request (400 past it)
  int max_concurrent = 16;                     // completions running at once (429 past it)
  int max_files = 1000;                        // files kept in the data folder (400 past it)
  int max_queued_jobs = 16;                    // fine-tuning jobs queued or running (429)
};

struct ServeOptions {
  std::string model;         // GGUF file or Hugging Face folder, loaded once
  std::string adapters_dir;  // adapters served by name ("" : none but the fine-tuned ones)
  std::string data_dir;      // files, jobs and their adapters (survives restarts)
  std::string host = "127.0.0.1";
  int port = 8080;           // 0: any free port (port() tells which)
  std::string api_key;       // "" : no bearer check (only sensible on loopback)
  std::string chat_format;   // "" : the model's template (plain text when it has none)
  std::string precision = "int8";  // the decoder's products: int8 or f32
  std::string kv_type = "f16";     // f16 or f32
  int threads = 0;                 // engine threads (0: all cores)
  ServeLimits limits;
};

// The memory the completions running at once may hold beyond the resident model and a
// training job, in bytes: per request its KV cache (K and V for n_layer x kv_dim values per
// position, 2 bytes each in f16 or 4 in f32, for min(context, max_prompt_tokens +
// max_output_tokens) positions) and the activations of one 256-token prompt chunk
// (256 x (3 d_model + 2 q_dim + 2 kv_dim + 2 d_ff + 64) floats, two logits rows), times
// max_concurrent; plus 8 MiB for the HTTP threads and buffers. The server prints it at start;
// docs/SERVE.md (Memory) explains it and tests/serve checks the peak against it.
size_t serve_memory_budget(const ModelConfig& c, const ServeLimits& limits, bool kv_f16 = true);

class Server {
 public:
  // Loads the model, the adapters and the data folder (locked: one server per folder),
  // re-queues the jobs a previous server left running, and binds the socket. Throws
  // nl::Error for bad options or files, a busy folder or a port that cannot be bound.
  // `log` receives one line per event (start, requests refused, job progress).
  Server(const ServeOptions& opt, std::function<void(const std::string&)> log);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  int port() const;
  // Serves until stop() (from another thread or a signal handler thread). A running job is
  // checkpointed before it returns; it continues when a server starts on the folder again.
  void run();
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nl
