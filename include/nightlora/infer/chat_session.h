// A multi-turn chat on one decoder: each turn renders the whole conversation with the
// model's chat template (tokenizer/chat_template.h), exactly as training and the reference
// Jinja templates do, and feeds the model only what its KV cache does not hold yet.
//
// The session keeps the tokens in the cache. A new turn tokenizes the rendered conversation,
// keeps the longest common prefix with the cached tokens (Decoder::truncate at the first
// token that differs) and prefills the rest: normally the end of the previous reply's turn,
// the new user message and the assistant header. The prefix can end early when the
// template renders an earlier turn differently once it is history (Qwen3 drops the <think>
// block of past replies) or when the reply's text tokenizes differently from the tokens
// that were sampled; the cache then recomputes from there, and the conversation stays
// exactly the template's text. The CLI (`nightlora chat`) is a thin loop over this class,
// as a C API or a server would be.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "nightlora/infer/decoder.h"
#include "nightlora/infer/generate.h"
#include "nightlora/infer/sampler.h"
#include "nightlora/tokenizer/chat_template.h"

namespace nl {

class Tokenizer;

struct ChatOptions {
  std::string system;  // the system message ("": none; templates with a default insert theirs)
  // Per reply: max_new_tokens, stop ids (empty: default_stop_ids of the tokenizer, which
  // hold the template's end-of-turn token) and the vocabulary limit (0: the tokenizer's).
  GenerateOptions generate;
  std::vector<std::string> stop_strings;  // end a reply at any of these (not kept in it)
};

struct ChatTurn {
  std::string reply;        // the assistant's text, as kept in the conversation
  std::string prompt_text;  // the conversation rendered for this turn, up to the assistant header
  int64_t prompt_tokens = 0;     // tokens of prompt_text
  int64_t reused_tokens = 0;     // of them, already in the KV cache (kept from earlier turns)
  int64_t prefilled_tokens = 0;  // fed to the model this turn: prompt_tokens - reused_tokens
  bool stopped_on_string = false;
  GenerateResult generation;
};

class ChatSession {
 public:
  // `decoder` and `tok` must outlive the session; the session owns the decoder's cache.
  ChatSession(Decoder& decoder, const Tokenizer& tok, ChatFormat format, ChatOptions opt = {});

  // Adds a user message and generates the assistant's reply, passing its text to `on_text`
  // piece by piece as it is produced (return false to stop the reply there). Throws
  // nl::Error when the conversation no longer fits the decoder's context (reset() and go
  // on). The reply is added to the conversation.
  ChatTurn send(const std::string& user_text, Sampler& sampler,
                const std::function<bool(const std::string& piece)>& on_text = {});

  // Forgets the conversation (the system message stays). The cache is kept: the next
  // turn reuses what still matches, e.g. the system message.
  void reset();

  const std::vector<ChatMessage>& messages() const { return messages_; }
  // The tokens the decoder's KV cache holds, in order.
  std::span<const int32_t> cached_tokens() const { return cached_; }
  ChatFormat format() const { return format_; }

 private:
  Decoder& decoder_;
  const Tokenizer& tok_;
  ChatFormat format_;
  ChatOptions opt_;
  std::vector<ChatMessage> messages_;
  std::vector<int32_t> cached_;
};

// Tokens of a rendered chat text: special tokens parsed, BOS prepended when the tokenizer
// asks for it unless the text already starts with it (Llama 3 templates write it).
std::vector<int32_t> encode_chat_text(const Tokenizer& tok, const std::string& text);

// `text` with every invalid UTF-8 sequence replaced by U+FFFD (as Hugging Face decodes with
// errors="replace"): a reply cut inside a character, or bytes a model put in no valid
// order, stays text a template and a terminal can take.
std::string valid_utf8(const std::string& text);

}  // namespace nl
