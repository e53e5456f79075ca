// The fields of a POST /v1/chat/completions or /v1/completions body, read and type-checked
// with nothing but the JSON: no model, no tokenizer. Completions::parse (completions.h) reads
// a request through this, then looks the model up, renders and tokenizes the prompt and checks
// the lengths against the limits and the context. The fuzz target fuzz/serve_request_fuzz.cpp
// calls the same function on arbitrary bodies.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nightlora/infer/sampler.h"
#include "nightlora/tokenizer/chat_template.h"

namespace nl::serve {

struct CompletionFields {
  bool chat = false;
  std::string model;                   // the name asked for (not yet looked up)
  std::vector<ChatMessage> messages;   // chat: role "developer" is read as "system"
  std::string prompt;                  // text completions: the prompt text ("" when absent)
  std::optional<int64_t> max_tokens;   // max_completion_tokens, else max_tokens (>= 1)
  std::string max_tokens_name;         // which of the two the request used (for the 400s)
  SamplerOptions sampling;             // OpenAI's defaults where absent; seed random when absent
  std::vector<std::string> stop;       // 0 to 4 strings of 1 to 256 bytes
  bool stream = false;
  bool include_usage = false;          // stream_options.include_usage
};

// Reads `body` (one JSON object, parse_body_object) as the endpoint `chat` (or not) documents
// it: a missing or wrongly typed field, or a value out of range, is a 400 naming the field.
CompletionFields read_completion_fields(const nlohmann::json& body, bool chat);

}  // namespace nl::serve
