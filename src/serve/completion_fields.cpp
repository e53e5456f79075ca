#include "serve/completion_fields.h"

#include <random>

#include "serve/api_error.h"
#include "serve/request_fields.h"

namespace nl::serve {

namespace {

// A message's content: a string, or an array of {"type": "text", "text": ...} parts.
std::string message_content(const nlohmann::json& msg, size_t i) {
  const std::string where = "messages[" + std::to_string(i) + "].content";
  auto it = msg.find("content");
  if (it == msg.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (!it->is_array()) bad_request("'" + where + "' must be a string or an array of text parts", where, "invalid_type");
  std::string text;
  for (const nlohmann::json& part : *it) {
    if (!part.is_object() || !part.contains("type") || part["type"] != "text" || !part.contains("text") ||
        !part["text"].is_string())
      bad_request("'" + where + "' may only hold parts {\"type\": \"text\", \"text\": \"...\"}", where, "invalid_type");
    text += part["text"].get<std::string>();
  }
  return text;
}

std::vector<ChatMessage> read_messages(const nlohmann::json& body) {
  auto it = body.find("messages");
  if (it == body.end() || !it->is_array() || it->empty())
    bad_request("'messages' must be a non-empty array of {role, content}", "messages",
                it == body.end() ? "missing_required_parameter" : "invalid_type");
  std::vector<ChatMessage> msgs;
  for (size_t i = 0; i < it->size(); ++i) {
    const nlohmann::json& m = (*it)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) bad_request("'" + where + "' must be an object", where, "invalid_type");
    std::optional<std::string> role;
    try {
      role = opt_string(m, "role");
    } catch (ApiError& e) {
      e.param = where + ".role";
      throw;
    }
    if (!role) bad_request("'" + where + ".role' is required", where + ".role", "missing_required_parameter");
    if (*role == "developer") role = "system";
    if (*role != "system" && *role != "user" && *role != "assistant")
      bad_request("'" + where + ".role' must be system, developer, user or assistant", where + ".role", "invalid_value");
    msgs.push_back({*role, message_content(m, i)});
  }
  return msgs;
}

std::string read_prompt(const nlohmann::json& body) {
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array() && it->size() == 1 && (*it)[0].is_string()) return (*it)[0].get<std::string>();
  bad_request("'prompt' must be a string (or an array of one string)", "prompt", "invalid_type");
}

}  // namespace

CompletionFields read_completion_fields(const nlohmann::json& body, bool chat) {
  CompletionFields f;
  f.chat = chat;
  f.model = req_string(body, "model");
  std::optional<int64_t> n = opt_integer(body, "n", 1, 1000000);
  if (n && *n != 1) bad_request("only n = 1 is supported", "n", "invalid_value");
  f.stream = opt_bool(body, "stream").value_or(false);
  if (auto it = body.find("stream_options"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) bad_request("'stream_options' must be an object", "stream_options", "invalid_type");
    f.include_usage = opt_bool(*it, "include_usage").value_or(false);
  }
  if (chat) f.messages = read_messages(body);
  else f.prompt = read_prompt(body);

  // How much to generate (checked against the limits and the context once the prompt is tokens).
  f.max_tokens = opt_integer(body, "max_completion_tokens", 1, INT64_MAX);
  f.max_tokens_name = "max_completion_tokens";
  if (!f.max_tokens) {
    f.max_tokens = opt_integer(body, "max_tokens", 1, INT64_MAX);
    if (f.max_tokens) f.max_tokens_name = "max_tokens";
  }

  // Sampling, with OpenAI's defaults (temperature 1, top_p 1, nothing else); top_k, min_p,
  // repeat_penalty and repeat_last_n are ours (`nightlora generate`'s options of those names).
  f.sampling.temperature = static_cast<float>(opt_number(body, "temperature", 0, 2).value_or(1.0));
  f.sampling.top_p = static_cast<float>(opt_number(body, "top_p", 0, 1).value_or(1.0));
  if (f.sampling.top_p <= 0) bad_request("'top_p' must be above 0", "top_p", "invalid_value");
  f.sampling.top_k = static_cast<int>(opt_integer(body, "top_k", 0, 1 << 30).value_or(0));
  f.sampling.min_p = static_cast<float>(opt_number(body, "min_p", 0, 1).value_or(0.0));
  f.sampling.repeat_penalty = static_cast<float>(opt_number(body, "repeat_penalty", 0.01, 100).value_or(1.0));
  f.sampling.repeat_last_n = static_cast<int>(opt_integer(body, "repeat_last_n", -1, 1 << 20).value_or(64));
  for (const char* unsupported : {"frequency_penalty", "presence_penalty"})
    if (opt_number(body, unsupported, -2, 2).value_or(0.0) != 0.0)
      bad_request(std::string("'") + unsupported + "' is not supported (use repeat_penalty)", unsupported,
                  "unsupported_parameter");
  std::optional<int64_t> seed = opt_integer(body, "seed", INT64_MIN, INT64_MAX);
  f.sampling.seed = seed ? static_cast<uint64_t>(*seed) : std::random_device{}();

  if (auto it = body.find("stop"); it != body.end() && !it->is_null()) {
    if (it->is_string()) f.stop.push_back(it->get<std::string>());
    else if (it->is_array() && it->size() <= 4) {
      for (const nlohmann::json& s : *it) {
        if (!s.is_string()) bad_request("'stop' must be a string or an array of up to 4 strings", "stop", "invalid_type");
        f.stop.push_back(s.get<std::string>());
      }
    } else {
      bad_request("'stop' must be a string or an array of up to 4 strings", "stop", "invalid_type");
    }
    for (const std::string& s : f.stop)
      if (s.empty() || s.size() > 256) bad_request("each stop string must have 1 to 256 bytes", "stop", "invalid_value");
  }
  return f;
}

}  // namespace nl::serve
