// Fuzz target: what `nightlora serve` reads from a request (#41), through the functions the
// server calls. The first byte chooses the endpoint:
//   0  POST /v1/chat/completions: the body (parse_body_object, read_completion_fields), and
//      the messages rendered with a chat template, as the server does before tokenizing
//   1  POST /v1/completions: the body
//   2  POST /v1/fine_tuning/jobs: the body (read_fine_tuning_request)
//   3  POST /v1/files: the form's fields (read_upload) and the file (check_training_file);
//      the rest of the input is "purpose \n----\n filename \n----\n file", the second byte
//      says which fields the form has and its Content-Type, the third the size limit
// (cpp-httplib itself parses the HTTP and the multipart envelope: Debian ships it compiled,
// so it is not instrumented here.)
//
// The rule: bad input is an ApiError with a 4xx status, as the server answers it, and its
// error body serializes as the server writes it; any other exception is a finding (the server
// would answer 500). What a reader accepts must keep its promises: the ones checked below are
// what the server's next steps rely on (a job's settings all present with their types,
// max_tokens >= 1, at most 4 stop strings of 1 to 256 bytes, sampling within range).
#include <cmath>
#include <cstdint>
#include <string>

#include <httplib.h>

#include "fuzz_util.h"
#include "nightlora/tokenizer/chat_template.h"
#include "serve/api_error.h"
#include "serve/completion_fields.h"
#include "serve/file_store.h"
#include "serve/fine_tuning_request.h"
#include "serve/request_fields.h"
#include "serve/upload_request.h"

namespace {

using nl::serve::ApiError;

[[noreturn]] void finding(const std::string& what) {
  std::fprintf(stderr, "nlfuzz: FINDING: %s\n", what.c_str());
  std::abort();
}

std::string dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);  // as server.cpp writes answers
}

void check_completion(const nl::serve::CompletionFields& f) {
  if (f.max_tokens && *f.max_tokens < 1) finding("max_tokens below 1 accepted");
  if (f.stop.size() > 4) finding("more than 4 stop strings accepted");
  for (const std::string& s : f.stop)
    if (s.empty() || s.size() > 256) finding("a stop string of " + std::to_string(s.size()) + " bytes accepted");
  const nl::SamplerOptions& o = f.sampling;
  if (!(o.temperature >= 0 && o.temperature <= 2) || !(o.top_p > 0 && o.top_p <= 1) || o.top_k < 0 ||
      !(o.min_p >= 0 && o.min_p <= 1) || !(o.repeat_penalty > 0) || o.repeat_last_n < -1)
    finding("a sampling option out of range accepted");
  if (f.chat) {
    if (f.messages.empty()) finding("a chat with no message accepted");
    for (const nl::ChatMessage& m : f.messages)
      if (m.role != "system" && m.role != "user" && m.role != "assistant") finding("a role '" + m.role + "' accepted");
    (void)nl::render_chat_text(nl::ChatFormat::ChatML, f.messages, /*add_generation_prompt=*/true);
  }
}

// What FineTuningJobs::options_of reads from the settings, with the same types.
void check_fine_tuning(const nl::serve::FineTuningRequest& r, int64_t context) {
  const nlohmann::json& s = r.settings;
  for (const char* key : {"epochs", "batch", "iters", "rank", "seq_len", "grad_accum", "warmup", "save_every"})
    if (!s.contains(key) || !s[key].is_number_integer() || s[key].get<int64_t>() < 0)
      finding(std::string("setting '") + key + "' missing or not a count");
  for (const char* key : {"lora_seed", "seed"})
    if (!s.contains(key) || !s[key].is_number_integer() || s[key].get<int64_t>() < 0)
      finding(std::string("setting '") + key + "' missing or negative");
  for (const char* key : {"lr", "alpha"})
    if (!s.contains(key) || !s[key].is_number() || !std::isfinite(s[key].get<double>()) || s[key].get<double>() <= 0)
      finding(std::string("setting '") + key + "' missing or not a positive number");
  for (const char* key : {"precision", "schedule", "train_on"})
    if (!s.contains(key) || !s[key].is_string()) finding(std::string("setting '") + key + "' missing");
  if (s["seq_len"].get<int64_t>() > context) finding("seq_len above the context accepted");
  if (r.suffix && (r.suffix->empty() || r.suffix->size() > 40)) finding("a suffix of a wrong length accepted");
  (void)dump(s);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int endpoint = data[0] % 4;
  const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  constexpr int64_t kContext = 512;  // stories260K's
  try {
    if (endpoint <= 1) {
      check_completion(nl::serve::read_completion_fields(nl::serve::parse_body_object(body), endpoint == 0));
    } else if (endpoint == 2) {
      check_fine_tuning(nl::serve::read_fine_tuning_request(nl::serve::parse_body_object(body), kContext), kContext);
    } else {
      if (body.size() < 2) return 0;
      const uint8_t form = static_cast<uint8_t>(body[0]);
      const size_t limit = 1 + static_cast<size_t>(static_cast<uint8_t>(body[1])) * 64;
      const auto parts = nlfuzz::split_parts(std::string_view(body).substr(2), 3);
      httplib::Request req;
      req.set_header("Content-Type", (form & 1) ? "multipart/form-data; boundary=nlfuzz" : "application/json");
      auto part = [&](size_t i) { return i < parts.size() ? std::string(parts[i]) : std::string(); };
      if (form & 2) req.files.emplace("purpose", httplib::MultipartFormData{"purpose", part(0), "", ""});
      if (form & 4) req.files.emplace("file", httplib::MultipartFormData{"file", part(2), part(1), "application/jsonl"});
      if (form & 8) req.files.emplace("file", httplib::MultipartFormData{"file", part(1), part(0), ""});  // a second one
      const nl::serve::Upload u = nl::serve::read_upload(req, limit);
      if (u.content.size() > limit) finding("a file over the size limit accepted");
      nl::serve::check_training_file(u.purpose, u.content);
      if (u.purpose != "fine-tune") finding("a purpose other than fine-tune accepted");
    }
  } catch (const ApiError& e) {
    if (e.status < 400 || e.status > 499) finding("an error with status " + std::to_string(e.status));
    (void)dump(nl::serve::error_body(e.what(), e.type, e.param, e.code));
  } catch (const std::exception& e) {
    finding(std::string("an exception other than ApiError escaped (the server would answer 500): ") + e.what());
  }
  return 0;
}
