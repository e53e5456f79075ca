// The HTTP side of `nightlora serve` (cpp-httplib): routes, the bearer check, limits, the
// JSON and server-sent-event answers. The work itself is in completions.*, file_store.*,
// fine_tuning_jobs.* and adapter_registry.*.
#include "nightlora/serve/server.h"

#include <httplib.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <thread>

#include "nightlora/infer/inference_memory.h"
#include "nightlora/job/file_ops.h"
#include "nightlora/job/folder_lock.h"
#include "nightlora/train/resident_model.h"
#include "nightlora/util/error.h"
#include "serve/adapter_registry.h"
#include "serve/api_error.h"
#include "serve/completions.h"
#include "serve/file_store.h"
#include "serve/fine_tuning_jobs.h"
#include "serve/request_fields.h"
#include "serve/upload_request.h"

namespace fs = std::filesystem;

namespace nl {

using serve::ApiError;

namespace {

// The base model's name in the API: the file name without .gguf (or the folder's name), with
// characters a model name may not hold replaced by '-'.
std::string base_model_id(const std::string& path) {
  fs::path p(path);
  while (!p.empty() && p.filename().empty()) p = p.parent_path();  // "dir/" -> "dir"
  std::string name = p.extension() == ".gguf" ? p.stem().string() : p.filename().string();
  for (char& c : name)
    if (!serve::valid_model_name(std::string(1, c))) c = '-';
  if (name.empty() || name[0] == '.') name = "base" + name;
  return name.substr(0, 128);
}

bool is_loopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

// Whether the two strings are equal, in a time that does not depend on where they differ
// (a bearer token must not be guessable byte by byte from response times).
bool equal_constant_time(const std::string& a, const std::string& b) {
  const size_t n = std::max(a.size(), b.size());
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

std::string dump(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

void send_json(httplib::Response& res, int status, const nlohmann::json& j) {
  res.status = status;
  res.set_content(dump(j), "application/json");
}

void send_error(httplib::Response& res, int status, const std::string& message, const std::string& type,
                const std::string& param = "", const std::string& code = "") {
  send_json(res, status, serve::error_body(message, type, param, code));
}

const char* status_error_type(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 413: return "invalid_request_error";
    case 429: return "rate_limit_error";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

}  // namespace

struct Server::Impl {
  ServeOptions opt;
  std::function<void(const std::string&)> log;
  std::unique_ptr<FolderLock> lock;
  std::unique_ptr<ResidentModel> resident;
  std::unique_ptr<serve::AdapterRegistry> registry;
  std::unique_ptr<serve::FileStore> files;
  std::unique_ptr<serve::FineTuningJobs> jobs;
  std::unique_ptr<serve::Completions> completions;
  httplib::Server http;
  int port = 0;
  std::atomic<int> active{0};  // completions running now
  // A test hook (NL_SERVE_TEST_HOLD=FILE, read at start, announced in the log): a completion
  // that has its slot waits while FILE exists, so a test can hold every slot for as long as
  // it needs and see the 429 without racing a request's end (tests/serve/serve_limits_test.cpp).
  std::string hold_file;

  std::mutex stop_mu;
  std::condition_variable stop_cv;
  bool stop_requested = false;

  Impl(const ServeOptions& o, std::function<void(const std::string&)> l) : opt(o), log(std::move(l)) {}

  // A completion's place among the ones running at once (429 past the limit).
  struct Slot {
    explicit Slot(std::atomic<int>& a) : active(a) {}
    ~Slot() { --active; }
    std::atomic<int>& active;
  };
  std::shared_ptr<Slot> take_slot() {
    if (++active > opt.limits.max_concurrent) {
      --active;
      throw ApiError(429, "rate_limit_error",
                     "the server is running " + std::to_string(opt.limits.max_concurrent) +
                         " completions already (its limit); retry shortly",
                     "", "rate_limit_exceeded");
    }
    return std::make_shared<Slot>(active);
  }
  void wait_while_held() const {
    if (hold_file.empty()) return;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (fs::exists(hold_file) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }

  nlohmann::json json_body(const httplib::Request& req) const {
    if (req.body.size() > opt.limits.max_body_bytes)
      throw ApiError(413, "invalid_request_error",
                     "the request body has " + std::to_string(req.body.size()) + " bytes; this server takes at most " +
                         std::to_string(opt.limits.max_body_bytes),
                     "", "request_too_large");
    return serve::parse_body_object(req.body);
  }

  // Runs a handler, turning what it throws into an OpenAI-shaped error answer.
  template <class F>
  httplib::Server::Handler guarded(F f) {
    return [this, f](const httplib::Request& req, httplib::Response& res) {
      try {
        f(req, res);
      } catch (const ApiError& e) {
        send_error(res, e.status, e.what(), e.type, e.param, e.code);
      } catch (const Error& e) {  // bad input found deeper down (the tokenizer, a file)
        send_error(res, 400, e.what(), "invalid_request_error");
      } catch (const std::exception& e) {
        log(std::string("internal error on ") + req.method + " " + req.path + ": " + e.what());
        send_error(res, 500, std::string("internal error (please report it): ") + e.what(), "server_error");
      }
    };
  }

  void completion(const httplib::Request& req, httplib::Response& res, bool chat) {
    const nlohmann::json body = json_body(req);
    serve::CompletionRequest cr = completions->parse(body, chat);
    std::shared_ptr<Slot> slot = take_slot();
    wait_while_held();
    const std::string id = serve::random_id(chat ? "chatcmpl-" : "cmpl-");
    const int64_t created = serve::unix_now();
    const std::string model = cr.target.id;
    const char* object = chat ? "chat.completion" : "text_completion";
    auto usage = [](const serve::CompletionOutcome& o) {
      return nlohmann::json{{"prompt_tokens", o.prompt_tokens},
                            {"completion_tokens", o.completion_tokens},
                            {"total_tokens", o.prompt_tokens + o.completion_tokens}};
    };
    if (!cr.stream) {
      serve::CompletionOutcome o = completions->run(cr, [](const std::string&) { return true; });
      nlohmann::json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", o.finish_reason}};
      if (chat) choice["message"] = {{"role", "assistant"}, {"content", o.text}, {"refusal", nullptr}};
      else choice["text"] = o.text;
      send_json(res, 200,
                {{"id", id}, {"object", object}, {"created", created}, {"model", model},
                 {"system_fingerprint", nullptr}, {"choices", {choice}}, {"usage", usage(o)}});
      return;
    }
    // Server-sent events: one chunk per piece of text, then the finish reason, then [DONE].
    auto chunk = [=](const nlohmann::json& delta_or_text, const nlohmann::json& finish) {
      nlohmann::json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", finish}};
      if (chat) choice["delta"] = delta_or_text;
      else choice["text"] = delta_or_text;
      return nlohmann::json{{"id", id}, {"object", chat ? "chat.completion.chunk" : "text_completion"},
                            {"created", created}, {"model", model}, {"system_fingerprint", nullptr},
                            {"choices", {choice}}};
    };
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream", [this, cr, slot, chunk, chat, usage, id, created, model](size_t, httplib::DataSink& sink) {
          auto send = [&sink](const nlohmann::json& j) {
            const std::string line = "data: " + dump(j) + "\n\n";
            return sink.write(line.data(), line.size());
          };
          if (chat && !send(chunk({{"role", "assistant"}, {"content", ""}}, nullptr))) return false;
          bool ok = true;
          serve::CompletionOutcome o;
          try {
            o = completions->run(cr, [&](const std::string& piece) {
              ok = send(chunk(chat ? nlohmann::json{{"content", piece}} : nlohmann::json(piece), nullptr));
              return ok;
            });
          } catch (const std::exception& e) {
            // The status line is gone already: the error goes out as an event.
            send(serve::error_body(e.what(), "server_error"));
            return false;
          }
          if (!ok) return false;  // the client went away
          if (!send(chunk(chat ? nlohmann::json::object() : nlohmann::json(""), o.finish_reason))) return false;
          if (cr.include_usage) {
            nlohmann::json u = {{"id", id}, {"object", chat ? "chat.completion.chunk" : "text_completion"},
                                {"created", created}, {"model", model}, {"choices", nlohmann::json::array()},
                                {"usage", usage(o)}};
            if (!send(u)) return false;
          }
          static const std::string done = "data: [DONE]\n\n";
          if (!sink.write(done.data(), done.size())) return false;
          sink.done();
          return true;
        });
  }

  void routes() {
    // The bearer check comes before any route (and before a body is looked at).
    http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (opt.api_key.empty()) return httplib::Server::HandlerResponse::Unhandled;
      const std::string auth = req.get_header_value("Authorization");
      const std::string prefix = "Bearer ";
      const bool ok = auth.size() > prefix.size() && auth.compare(0, prefix.size(), prefix) == 0 &&
                      equal_constant_time(auth.substr(prefix.size()), opt.api_key);
      if (ok) return httplib::Server::HandlerResponse::Unhandled;
      send_error(res, 401,
                 auth.empty() ? "You didn't provide an API key: send it as 'Authorization: Bearer KEY'"
                              : "Incorrect API key provided",
                 "invalid_request_error", "", "invalid_api_key");
      return httplib::Server::HandlerResponse::Handled;
    });
    // Answers with an error status and no body yet (no route, payload too large) get one.
    http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      std::string msg;
      if (res.status == 404) msg = "Unknown request URL: " + req.method + " " + req.path;
      else if (res.status == 413) msg = "the request is larger than this server accepts";
      else if (res.status == 405) msg = "Method not allowed: " + req.method + " " + req.path;
      else msg = "HTTP status " + std::to_string(res.status);
      send_json(res, res.status, serve::error_body(msg, status_error_type(res.status), "",
                                                   res.status == 413 ? "request_too_large" : ""));
    });
    http.set_exception_handler([this](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
      std::string what = "unknown";
      try {
        std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      log("internal error on " + req.method + " " + req.path + ": " + what);
      send_error(res, 500, "internal error (please report it): " + what, "server_error");
    });

    // Also how many completions run now (a client or a test sees when the 429 limit is
    // reached), and the decode loop's steps and the tokens they advanced (tokens / steps:
    // how many completions a step carried on average).
    http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      send_json(res, 200, {{"status", "ok"}, {"completions_running", active.load()},
                           {"max_concurrent", opt.limits.max_concurrent},
                           {"decode_steps", completions->decode_steps()},
                           {"decode_tokens", completions->decode_tokens()}});
    });

    auto model_object = [](const serve::RegisteredModel& m) {
      return nlohmann::json{{"id", m.id}, {"object", "model"}, {"created", m.created}, {"owned_by", m.owned_by}};
    };
    http.Get("/v1/models", guarded([this, model_object](const httplib::Request&, httplib::Response& res) {
      nlohmann::json data = nlohmann::json::array();
      for (const serve::RegisteredModel& m : registry->list()) data.push_back(model_object(m));
      send_json(res, 200, {{"object", "list"}, {"data", data}});
    }));
    http.Get(R"(/v1/models/([^/]+))", guarded([this, model_object](const httplib::Request& req, httplib::Response& res) {
      send_json(res, 200, model_object(registry->find(req.matches[1])));
    }));
    http.Post("/v1/chat/completions",
              guarded([this](const httplib::Request& req, httplib::Response& res) { completion(req, res, true); }));
    http.Post("/v1/completions",
              guarded([this](const httplib::Request& req, httplib::Response& res) { completion(req, res, false); }));

    http.Post("/v1/files", guarded([this](const httplib::Request& req, httplib::Response& res) {
      const serve::Upload upload = serve::read_upload(req, opt.limits.max_upload_bytes);
      send_json(res, 200, files->add(upload.filename, upload.purpose, upload.content));
    }));
    http.Get("/v1/files", guarded([this](const httplib::Request&, httplib::Response& res) {
      nlohmann::json data = nlohmann::json::array();
      for (const nlohmann::json& f : files->list()) data.push_back(f);
      send_json(res, 200, {{"object", "list"}, {"data", data}, {"has_more", false}});
    }));
    http.Get(R"(/v1/files/([^/]+))", guarded([this](const httplib::Request& req, httplib::Response& res) {
      send_json(res, 200, files->get(req.matches[1], "file_id"));
    }));

    auto page_args = [](const httplib::Request& req, std::string& after, int64_t& limit) {
      after = req.has_param("after") ? req.get_param_value("after") : "";
      limit = 20;
      if (req.has_param("limit")) {
        const std::string s = req.get_param_value("limit");
        char* end = nullptr;
        const long v = std::strtol(s.c_str(), &end, 10);
        if (s.empty() || *end != 0 || v < 1 || v > 1000)
          serve::bad_request("'limit' must be an integer from 1 to 1000", "limit", "invalid_value");
        limit = v;
      }
    };
    http.Post("/v1/fine_tuning/jobs", guarded([this](const httplib::Request& req, httplib::Response& res) {
      send_json(res, 200, jobs->create(json_body(req)));
    }));
    http.Get("/v1/fine_tuning/jobs", guarded([this, page_args](const httplib::Request& req, httplib::Response& res) {
      std::string after;
      int64_t limit = 0;
      page_args(req, after, limit);
      send_json(res, 200, jobs->list(after, limit));
    }));
    http.Get(R"(/v1/fine_tuning/jobs/([^/]+))", guarded([this](const httplib::Request& req, httplib::Response& res) {
      send_json(res, 200, jobs->get(req.matches[1]));
    }));
    http.Get(R"(/v1/fine_tuning/jobs/([^/]+)/events)",
             guarded([this, page_args](const httplib::Request& req, httplib::Response& res) {
               std::string after;
               int64_t limit = 0;
               page_args(req, after, limit);
               send_json(res, 200, jobs->events(req.matches[1], after, limit));
             }));
    http.Post(R"(/v1/fine_tuning/jobs/([^/]+)/cancel)",
              guarded([this](const httplib::Request& req, httplib::Response& res) {
                send_json(res, 200, jobs->cancel(req.matches[1]));
              }));
  }
};

size_t serve_memory_budget(const ModelConfig& c, const ServeLimits& limits, bool kv_f16) {
  const int64_t positions = std::min<int64_t>(c.context, limits.max_prompt_tokens + limits.max_output_tokens);
  const size_t request = inference_request_bytes(c, positions, kv_f16 ? KvType::F16 : KvType::F32,
                                                 DecoderOptions{}.prefill_chunk);  // infer/inference_memory.h
  return static_cast<size_t>(limits.max_concurrent) * request + (size_t{8} << 20);
}

Server::Server(const ServeOptions& opt, std::function<void(const std::string&)> log)
    : impl_(std::make_unique<Impl>(opt, std::move(log))) {
  Impl& s = *impl_;
  const ServeLimits& lim = s.opt.limits;
  if (lim.max_concurrent < 1 || lim.max_output_tokens < 1 || lim.max_prompt_tokens < 1 || lim.max_body_bytes < 1 ||
      lim.max_upload_bytes < 1 || lim.max_files < 1 || lim.max_queued_jobs < 1)
    fail("serve", "every limit must be at least 1");
  if (s.opt.data_dir.empty()) fail("serve", "no data folder", "give --data DIR");
  make_dirs(s.opt.data_dir);  // durable: what the server promises inside must not vanish with it
  s.lock = std::make_unique<FolderLock>(s.opt.data_dir, "nightlora serve");

  DecoderOptions dopt;
  dopt.precision = parse_precision(s.opt.precision);
  dopt.kv_type = parse_kv_type(s.opt.kv_type);
  EngineOptions eopt;
  eopt.threads = s.opt.threads;
  s.resident = std::make_unique<ResidentModel>(s.opt.model, eopt);
  s.registry = std::make_unique<serve::AdapterRegistry>(s.resident->model(), base_model_id(s.opt.model));
  if (!s.opt.adapters_dir.empty()) s.registry->load_folder(s.opt.adapters_dir);
  s.files = std::make_unique<serve::FileStore>((fs::path(s.opt.data_dir) / "files").string(), lim.max_files);
  s.jobs = std::make_unique<serve::FineTuningJobs>(*s.resident, *s.registry, *s.files,
                                                   (fs::path(s.opt.data_dir) / "jobs").string(), lim.max_queued_jobs, s.log);
  s.completions = std::make_unique<serve::Completions>(*s.resident, *s.registry, lim, dopt, s.opt.chat_format);

  // One worker per request that may run at once, and a few for the cheap routes; the
  // payload limit covers an upload (its multipart envelope included); JSON routes check
  // their own, smaller limit.
  const size_t workers = static_cast<size_t>(lim.max_concurrent) + 4;
  s.http.new_task_queue = [workers] { return new httplib::ThreadPool(workers); };
  s.http.set_payload_max_length(std::max(lim.max_upload_bytes, lim.max_body_bytes) + (size_t{1} << 16));
  // SO_REUSEADDR only: httplib's default adds SO_REUSEPORT, which would let a second server
  // bind the same port and take half of the connections instead of failing.
  s.http.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  s.http.set_keep_alive_timeout(5);
  s.http.set_read_timeout(30);
  s.http.set_write_timeout(30);
  s.routes();
  if (const char* hold = std::getenv("NL_SERVE_TEST_HOLD"); hold && *hold) {
    s.hold_file = hold;
    s.log(std::string("test hook NL_SERVE_TEST_HOLD: completions wait while ") + hold + " exists");
  }

  if (!is_loopback(s.opt.host) && s.opt.api_key.empty())
    s.log("warning: listening on " + s.opt.host + " without --api-key: anyone who can reach it can use the model, "
          "read the jobs and start training; give --api-key KEY");
  if (s.opt.port == 0) {
    s.port = s.http.bind_to_any_port(s.opt.host);
    if (s.port < 0) fail("serve", "cannot listen on " + s.opt.host, "check --host");
  } else {
    if (!s.http.bind_to_port(s.opt.host, s.opt.port))
      fail("serve", "cannot listen on " + s.opt.host + ":" + std::to_string(s.opt.port),
           "is another server on that port? give another --port");
    s.port = s.opt.port;
  }
  std::string names;
  for (const serve::RegisteredModel& m : s.registry->list()) names += (names.empty() ? "" : ", ") + m.id;
  s.log("models: " + names);
  s.log("chat: " + s.completions->chat_description());
  char budget[160];
  std::snprintf(budget, sizeof budget, "memory: the model and a job, plus up to %.1f MiB for %d completions at once",
                static_cast<double>(serve_memory_budget(s.resident->model().config, lim, dopt.kv_type == KvType::F16)) /
                    (1 << 20),
                lim.max_concurrent);
  s.log(budget);
}

Server::~Server() {
  if (impl_ && impl_->jobs) impl_->jobs->shutdown();
}

int Server::port() const { return impl_->port; }

void Server::run() {
  Impl& s = *impl_;
  s.jobs->start();
  std::atomic<bool> listening_done{false};
  std::thread listener([&] {
    s.http.listen_after_bind();
    listening_done = true;
  });
  s.log("listening on http://" + (s.opt.host.find(':') != std::string::npos ? "[" + s.opt.host + "]" : s.opt.host) +
        ":" + std::to_string(s.port));
  {
    std::unique_lock<std::mutex> lock(s.stop_mu);
    s.stop_cv.wait(lock, [&] { return s.stop_requested; });
  }
  // stop() before the listener has started would be lost: repeat it until listening ends.
  while (!listening_done) {
    s.http.stop();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  listener.join();
  s.log("stopping: the running job (if any) saves a checkpoint");
  s.jobs->shutdown();
}

void Server::stop() {
  {
    std::lock_guard<std::mutex> lock(impl_->stop_mu);
    impl_->stop_requested = true;
  }
  impl_->stop_cv.notify_all();
}

}  // namespace nl
