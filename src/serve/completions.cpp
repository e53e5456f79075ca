#include "serve/completions.h"

#include <algorithm>
#include <memory>
#include <random>

#include "nightlora/engine/engine_turns.h"
#include "nightlora/infer/chat_session.h"
#include "nightlora/infer/generate.h"
#include "nightlora/serve/server.h"
#include "nightlora/tokenizer/tokenizer.h"
#include "nightlora/train/resident_model.h"
#include "nightlora/util/error.h"
#include "serve/api_error.h"
#include "serve/request_fields.h"

namespace nl::serve {

Completions::Completions(ResidentModel& resident, const AdapterRegistry& registry, const ServeLimits& limits,
                         const DecoderOptions& decoder, const std::string& chat_format)
    : resident_(resident), registry_(registry), limits_(limits), decoder_(decoder) {
  const Model& m = resident_.model();
  if (!m.tokenizer) fail(m.source_path, "the model has no tokenizer", "serve needs a model with its tokenizer");
  if (!chat_format.empty()) {
    chat_format_ = parse_chat_format(chat_format);
    has_chat_format_ = true;
  } else if (!m.tokenizer->chat_template().empty()) {
    chat_format_ = detect_chat_format(m.tokenizer->chat_template(), m.source_path + " (or give --chat-format)");
    has_chat_format_ = true;
  }
}

std::string Completions::chat_description() const {
  if (has_chat_format_) return std::string("chat template ") + chat_format_name(chat_format_);
  return "no chat template: chat messages become their contents joined by newlines, as a plain prompt";
}

std::vector<int32_t> Completions::tokenize(const std::string& text, bool chat_template) const {
  // As `nightlora generate` makes its prompt (cli/cmd_generate.cpp), so that a request and
  // the command give the same tokens and, greedy, the same text.
  const Model& m = resident_.model();
  const Tokenizer& tok = *m.tokenizer;
  if (text.empty()) {
    if (tok.bos() < 0) bad_request("the prompt is empty and this model has no BOS token to start from", "prompt");
    return {tok.bos()};
  }
  if (chat_template) return encode_chat_text(tok, text);
  return tok.encode(text, tok.add_bos_default(), /*parse_special=*/false);
}

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
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string())
      bad_request("'" + where + "' may only hold parts {\"type\": \"text\", \"text\": \"...\"}", where, "invalid_type");
    text += part["text"].get<std::string>();
  }
  return text;
}

}  // namespace

CompletionRequest Completions::parse(const nlohmann::json& body, bool chat) const {
  CompletionRequest r;
  r.chat = chat;
  r.target = registry_.find(req_string(body, "model"));
  std::optional<int64_t> n = opt_integer(body, "n", 1, 1000000);
  if (n && *n != 1) bad_request("only n = 1 is supported", "n", "invalid_value");
  r.stream = opt_bool(body, "stream").value_or(false);
  if (auto it = body.find("stream_options"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) bad_request("'stream_options' must be an object", "stream_options", "invalid_type");
    r.include_usage = opt_bool(*it, "include_usage").value_or(false);
  }

  // The prompt.
  if (chat) {
    auto it = body.find("messages");
    if (it == body.end() || !it->is_array() || it->empty())
      bad_request("'messages' must be a non-empty array of {role, content}", "messages",
                  it == body.end() ? "missing_required_parameter" : "invalid_type");
    std::vector<ChatMessage> msgs;
    for (size_t i = 0; i < it->size(); ++i) {
      const nlohmann::json& m = (*it)[i];
      const std::string where = "messages[" + std::to_string(i) + "]";
      if (!m.is_object()) bad_request("'" + where + "' must be an object", where, "invalid_type");
      std::optional<std::string> role = opt_string(m, "role");
      if (!role) bad_request("'" + where + ".role' is required", where + ".role", "missing_required_parameter");
      if (*role == "developer") role = "system";
      if (*role != "system" && *role != "user" && *role != "assistant")
        bad_request("'" + where + ".role' must be system, developer, user or assistant", where + ".role",
                    "invalid_value");
      msgs.push_back({*role, message_content(m, i)});
    }
    if (has_chat_format_) {
      r.prompt = tokenize(render_chat_text(chat_format_, msgs, /*add_generation_prompt=*/true), /*chat_template=*/true);
    } else {
      std::string text;
      for (size_t i = 0; i < msgs.size(); ++i) text += (i ? "\n" : "") + msgs[i].content;
      r.prompt = tokenize(text, /*chat_template=*/false);
    }
  } else {
    auto it = body.find("prompt");
    std::string text;
    if (it == body.end() || it->is_null()) text = "";
    else if (it->is_string()) text = it->get<std::string>();
    else if (it->is_array() && it->size() == 1 && (*it)[0].is_string()) text = (*it)[0].get<std::string>();
    else bad_request("'prompt' must be a string (or an array of one string)", "prompt", "invalid_type");
    r.prompt = tokenize(text, /*chat_template=*/false);
  }
  const int64_t context = resident_.model().config.context;
  const int64_t prompt_n = static_cast<int64_t>(r.prompt.size());
  if (prompt_n > limits_.max_prompt_tokens)
    bad_request("the prompt has " + std::to_string(prompt_n) + " tokens; this server takes at most " +
                    std::to_string(limits_.max_prompt_tokens),
                chat ? "messages" : "prompt", "context_length_exceeded");

  // How much to generate.
  std::optional<int64_t> max = opt_integer(body, "max_completion_tokens", 1, INT64_MAX);
  if (!max) max = opt_integer(body, "max_tokens", 1, INT64_MAX);
  const char* max_name = body.contains("max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  if (max && *max > limits_.max_output_tokens)
    bad_request(std::string("'") + max_name + "' is " + std::to_string(*max) + "; this server generates at most " +
                    std::to_string(limits_.max_output_tokens) + " tokens per request",
                max_name, "invalid_value");
  if (prompt_n >= context)
    bad_request("the prompt has " + std::to_string(prompt_n) + " tokens; the model's context is " +
                    std::to_string(context),
                chat ? "messages" : "prompt", "context_length_exceeded");
  if (max && prompt_n + *max > context)
    bad_request("the prompt (" + std::to_string(prompt_n) + " tokens) and " + max_name + " (" + std::to_string(*max) +
                    ") exceed the model's context of " + std::to_string(context) + " tokens",
                max_name, "context_length_exceeded");
  r.max_tokens = max ? *max : std::min(limits_.max_output_tokens, context - prompt_n);

  // Sampling, with OpenAI's defaults (temperature 1, top_p 1, nothing else); top_k, min_p,
  // repeat_penalty and repeat_last_n are ours (`nightlora generate`'s options of those names).
  r.sampling.temperature = static_cast<float>(opt_number(body, "temperature", 0, 2).value_or(1.0));
  r.sampling.top_p = static_cast<float>(opt_number(body, "top_p", 0, 1).value_or(1.0));
  if (r.sampling.top_p <= 0) bad_request("'top_p' must be above 0", "top_p", "invalid_value");
  r.sampling.top_k = static_cast<int>(opt_integer(body, "top_k", 0, 1 << 30).value_or(0));
  r.sampling.min_p = static_cast<float>(opt_number(body, "min_p", 0, 1).value_or(0.0));
  r.sampling.repeat_penalty = static_cast<float>(opt_number(body, "repeat_penalty", 0.01, 100).value_or(1.0));
  r.sampling.repeat_last_n = static_cast<int>(opt_integer(body, "repeat_last_n", -1, 1 << 20).value_or(64));
  for (const char* unsupported : {"frequency_penalty", "presence_penalty"})
    if (opt_number(body, unsupported, -2, 2).value_or(0.0) != 0.0)
      bad_request(std::string("'") + unsupported + "' is not supported (use repeat_penalty)", unsupported,
                  "unsupported_parameter");
  std::optional<int64_t> seed = opt_integer(body, "seed", INT64_MIN, INT64_MAX);
  r.sampling.seed = seed ? static_cast<uint64_t>(*seed) : std::random_device{}();

  if (auto it = body.find("stop"); it != body.end() && !it->is_null()) {
    if (it->is_string()) r.stop.push_back(it->get<std::string>());
    else if (it->is_array() && it->size() <= 4) {
      for (const nlohmann::json& s : *it) {
        if (!s.is_string()) bad_request("'stop' must be a string or an array of up to 4 strings", "stop", "invalid_type");
        r.stop.push_back(s.get<std::string>());
      }
    } else {
      bad_request("'stop' must be a string or an array of up to 4 strings", "stop", "invalid_type");
    }
    for (const std::string& s : r.stop)
      if (s.empty() || s.size() > 256) bad_request("each stop string must have 1 to 256 bytes", "stop", "invalid_value");
  }
  return r;
}


CompletionOutcome Completions::run(const CompletionRequest& req,
                                   const std::function<bool(const std::string&)>& on_text) const {
  const Model& m = resident_.model();
  const Tokenizer& tok = *m.tokenizer;
  EngineTurns& turns = resident_.turns();

  DecoderOptions dopt = decoder_;
  dopt.max_context = std::min<int64_t>(m.config.context, static_cast<int64_t>(req.prompt.size()) + req.max_tokens);
  Decoder dec(m, resident_.engine(), dopt);
  dec.set_adapter(req.target.adapter.get());
  Sampler sampler(req.sampling);
  GenerateOptions gopt;
  gopt.max_new_tokens = req.max_tokens;
  gopt.stop_ids = default_stop_ids(tok);
  gopt.vocab_limit = tok.vocab_size();

  CompletionOutcome out;
  TextStream text(tok, req.prompt, req.stop);  // holds back what may become a stop string
  bool client_gone = false;
  auto deliver = [&](const std::string& piece) {
    if (piece.empty() || client_gone) return;
    out.text += piece;
    if (!on_text(piece)) client_gone = true;
  };
  // The engine is this request's while it holds a turn: from the prompt's forward to the end
  // of each token's forward. Between tokens the turn is let go (and the text sent), so other
  // requests' tokens and, when none waits, a training step run in between. A Turn is made
  // in place (new Turn(prvalue)), so it need not be movable.
  std::unique_ptr<EngineTurns::Turn> turn(new EngineTurns::Turn(turns.serve()));
  auto on_token = [&](int32_t id, std::span<const float>) {
    const std::string piece = text.push(id);
    turn.reset();
    deliver(piece);
    if (text.stopped() || client_gone) return false;
    turn.reset(new EngineTurns::Turn(turns.serve()));
    return true;
  };
  const GenerateResult res = generate(dec, sampler, req.prompt, gopt, on_token);
  turn.reset();
  deliver(text.finish());
  out.prompt_tokens = static_cast<int64_t>(req.prompt.size());
  out.completion_tokens = static_cast<int64_t>(res.ids.size());
  out.finish_reason = res.stopped_on_token || text.stopped() ? "stop" : "length";
  return out;
}

}  // namespace nl::serve
