#include "serve/completions.h"

#include <algorithm>
#include <memory>

#include "nightlora/engine/engine_turns.h"
#include "nightlora/infer/chat_session.h"
#include "nightlora/infer/generate.h"
#include "nightlora/serve/server.h"
#include "nightlora/tokenizer/tokenizer.h"
#include "nightlora/train/resident_model.h"
#include "nightlora/util/error.h"
#include "serve/api_error.h"
#include "serve/completion_fields.h"
#include "serve/decode_scheduler.h"

namespace nl::serve {

Completions::Completions(ResidentModel& resident, const AdapterRegistry& registry, const ServeLimits& limits,
                         const DecoderOptions& decoder, const std::string& chat_format)
    : resident_(resident),
      registry_(registry),
      limits_(limits),
      decoder_(decoder),
      scheduler_(std::make_unique<DecodeScheduler>(resident.engine(), resident.turns(), decoder.threads)) {
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

Completions::~Completions() = default;

int64_t Completions::decode_steps() const { return scheduler_->steps(); }
int64_t Completions::decode_tokens() const { return scheduler_->tokens_advanced(); }

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

CompletionRequest Completions::parse(const nlohmann::json& body, bool chat) const {
  const CompletionFields f = read_completion_fields(body, chat);
  CompletionRequest r;
  r.chat = chat;
  r.target = registry_.find(f.model);
  r.stream = f.stream;
  r.include_usage = f.include_usage;
  r.sampling = f.sampling;
  r.stop = f.stop;

  // The prompt, as `nightlora generate` makes it.
  if (!chat) {
    r.prompt = tokenize(f.prompt, /*chat_template=*/false);
  } else if (has_chat_format_) {
    r.prompt = tokenize(render_chat_text(chat_format_, f.messages, /*add_generation_prompt=*/true), /*chat_template=*/true);
  } else {
    std::string text;
    for (size_t i = 0; i < f.messages.size(); ++i) text += (i ? "\n" : "") + f.messages[i].content;
    r.prompt = tokenize(text, /*chat_template=*/false);
  }
  const int64_t context = resident_.model().config.context;
  const int64_t prompt_n = static_cast<int64_t>(r.prompt.size());
  const char* prompt_param = chat ? "messages" : "prompt";
  if (prompt_n > limits_.max_prompt_tokens)
    bad_request("the prompt has " + std::to_string(prompt_n) + " tokens; this server takes at most " +
                    std::to_string(limits_.max_prompt_tokens),
                prompt_param, "context_length_exceeded");

  // How much to generate.
  const std::optional<int64_t> max = f.max_tokens;
  const std::string& max_name = f.max_tokens_name;
  if (max && *max > limits_.max_output_tokens)
    bad_request("'" + max_name + "' is " + std::to_string(*max) + "; this server generates at most " +
                    std::to_string(limits_.max_output_tokens) + " tokens per request",
                max_name, "invalid_value");
  if (prompt_n >= context)
    bad_request("the prompt has " + std::to_string(prompt_n) + " tokens; the model's context is " +
                    std::to_string(context),
                prompt_param, "context_length_exceeded");
  if (max && prompt_n + *max > context)
    bad_request("the prompt (" + std::to_string(prompt_n) + " tokens) and " + max_name + " (" + std::to_string(*max) +
                    ") exceed the model's context of " + std::to_string(context) + " tokens",
                max_name, "context_length_exceeded");
  r.max_tokens = max ? *max : std::min(limits_.max_output_tokens, context - prompt_n);
  return r;
}

CompletionOutcome Completions::run(const CompletionRequest& req,
                                   const std::function<bool(const std::string&)>& on_text) const {
  const Model& m = resident_.model();
  const Tokenizer& tok = *m.tokenizer;

  DecoderOptions dopt = decoder_;
  dopt.max_context = std::min<int64_t>(m.config.context, static_cast<int64_t>(req.prompt.size()) + req.max_tokens);
  auto dec = std::make_unique<Decoder>(m, resident_.engine(), dopt);
  dec->set_adapter(req.target.adapter.get());
  Sampler sampler(req.sampling);
  sampler.accept(req.prompt);  // the repetition penalty's history starts as the prompt (as generate())
  GenerateOptions gopt;
  gopt.max_new_tokens = req.max_tokens;
  gopt.stop_ids = default_stop_ids(tok);
  gopt.vocab_limit = tok.vocab_size();

  // The prompt runs alone, under a serving turn; then the sequence joins the decode loop,
  // which advances it with the other running completions, one token per step.
  std::vector<float> logits;
  {
    const EngineTurns::Turn turn = resident_.turns().serve();
    logits = dec->forward(req.prompt);
  }
  const std::shared_ptr<TokenStream> stream = scheduler_->join(std::move(dec), std::move(sampler), std::move(logits), gopt);
  struct CancelOnExit {  // however this ends (a throwing on_text too), the loop stops generating for it
    TokenStream& s;
    ~CancelOnExit() { s.cancel(); }
  } cancel_on_exit{*stream};

  CompletionOutcome out;
  TextStream text(tok, req.prompt, req.stop);  // holds back what may become a stop string
  bool client_gone = false;
  auto deliver = [&](const std::string& piece) {
    if (piece.empty() || client_gone) return;
    out.text += piece;
    if (!on_text(piece)) client_gone = true;
  };
  // The text is made and sent here, on the request's thread, while the loop goes on: a
  // slow client delays nobody. A stop string or a client gone cancels the sequence.
  while (const std::optional<int32_t> id = stream->next()) {
    ++out.completion_tokens;
    deliver(text.push(*id));
    if (text.stopped() || client_gone) break;  // cancelled on the way out
  }
  deliver(text.finish());
  out.prompt_tokens = static_cast<int64_t>(req.prompt.size());
  out.finish_reason = stream->stopped_on_token() || text.stopped() ? "stop" : "length";
  return out;
}

}  // namespace nl::serve
