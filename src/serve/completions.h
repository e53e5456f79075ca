// POST /v1/chat/completions and /v1/completions: a request's fields read and checked
// (completion_fields.h; 400s name the field), its prompt rendered and tokenized as
// `nightlora generate` does, and the generation run on the resident model with the request's
// adapter. Each request has its own decoder (its own KV cache, sized for its prompt and
// max_tokens) on the shared engine. Its prompt runs alone under a serving turn
// (engine/engine_turns.h); then the decode loop (decode_scheduler.h) advances it together
// with the other running completions, one batched step per token, each step under one
// serving turn, so a training step waits between steps.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nightlora/infer/decoder.h"
#include "nightlora/infer/sampler.h"
#include "nightlora/tokenizer/chat_template.h"
#include "serve/adapter_registry.h"

namespace nl {
class ResidentModel;
struct ServeLimits;
}  // namespace nl

namespace nl::serve {

class DecodeScheduler;

struct CompletionRequest {
  bool chat = false;
  RegisteredModel target;
  std::vector<int32_t> prompt;
  int64_t max_tokens = 0;
  SamplerOptions sampling;
  std::vector<std::string> stop;  // stop strings (not included in the answer)
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
};

struct CompletionOutcome {
  std::string text;
  int64_t prompt_tokens = 0, completion_tokens = 0;
  std::string finish_reason;  // "stop" (a stop token or string) or "length"
};

class Completions {
 public:
  // chat_format "" : the model's template, or plain text when the model has none.
  Completions(ResidentModel& resident, const AdapterRegistry& registry, const ServeLimits& limits,
              const DecoderOptions& decoder, const std::string& chat_format);
  ~Completions();
  // Reads and checks a request body (400 / 404 as ApiError).
  CompletionRequest parse(const nlohmann::json& body, bool chat) const;
  // Runs it: the prompt, then the decode loop's steps. on_text gets each piece of new text as
  // it becomes final (on the caller's thread, while the loop goes on); returning false (the
  // client went away) ends the generation.
  CompletionOutcome run(const CompletionRequest& req, const std::function<bool(const std::string&)>& on_text) const;
  // The decode loop's steps so far, and the tokens they fed in all (GET /health).
  int64_t decode_steps() const;
  int64_t decode_tokens() const;
  // A short description of how chat messages become a prompt (for the start-up line).
  std::string chat_description() const;

 private:
  std::vector<int32_t> tokenize(const std::string& text, bool chat_template) const;
  ResidentModel& resident_;
  const AdapterRegistry& registry_;
  const ServeLimits& limits_;
  DecoderOptions decoder_;
  bool has_chat_format_ = false;
  ChatFormat chat_format_ = ChatFormat::ChatML;
  std::unique_ptr<DecodeScheduler> scheduler_;  // the decode loop of every running completion
};

}  // namespace nl::serve
