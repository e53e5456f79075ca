// nl_generate and nl_chat: `nightlora generate` on the resident model. The prompt is made as
// the CLI makes it (cli/cmd_generate.cpp: BOS when the tokenizer adds one, the chat template
// with the assistant header, special tokens parsed in a chat), the decoder borrows the
// model's engine, and each forward pass runs under a serving turn: between tokens the engine
// is free for other generations and for a training job's steps, and the caller's token
// callback runs outside the turn.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "capi/objects.h"
#include "nightlora/engine/engine_turns.h"
#include "nightlora/infer/chat_session.h"
#include "nightlora/infer/decoder.h"
#include "nightlora/infer/generate.h"
#include "nightlora/infer/sampler.h"
#include "nightlora/modelio/model.h"
#include "nightlora/tokenizer/chat_template.h"
#include "nightlora/tokenizer/tokenizer.h"

using namespace nl::capi;

namespace {

const size_t kGenerateOptionsV1 = sizeof(nl_generate_options);

std::string text_or_empty(const char* s) { return s ? std::string(s) : std::string(); }

// The prompt's tokens, as `nightlora generate` makes them from --prompt (chat: false) or
// from a rendered conversation (chat: true).
std::vector<int32_t> prompt_tokens(const nl::Model& m, const std::string& text, bool chat) {
  const nl::Tokenizer& tok = *m.tokenizer;
  if (text.empty()) {
    if (tok.bos() < 0) nl::fail(m.source_path, "this model has no BOS token to start from", "give a prompt");
    return {tok.bos()};
  }
  if (chat) return nl::encode_chat_text(tok, text);
  return tok.encode(text, tok.add_bos_default(), /*parse_special=*/false);
}

// Copies s into a malloc'd, NUL-terminated buffer (what nl_generation_free releases).
char* malloc_copy(const std::string& s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (!p) throw std::bad_alloc();
  std::memcpy(p, s.data(), s.size());
  p[s.size()] = '\0';
  return p;
}

// The engine's serving turn, released while the caller's callback runs. EngineTurns::Turn is
// RAII; it lives in a unique_ptr so it can be given back and taken again.
class ServingTurn {
 public:
  explicit ServingTurn(nl::EngineTurns& turns) : turns_(turns) { take(); }
  void take() { turn_ = std::make_unique<nl::EngineTurns::Turn>(turns_.serve()); }
  void give_back() { turn_.reset(); }

 private:
  nl::EngineTurns& turns_;
  std::unique_ptr<nl::EngineTurns::Turn> turn_;
};

void run_generation(nl_model* model, const std::string& text, bool chat, const nl_generate_options* options,
                    nl_generation* out, const char* function) {
  std::shared_ptr<nl_model> m = models().get(model, function);
  require(out, function, "out");
  std::memset(out, 0, sizeof(*out));
  const nl_generate_options o = options_or_defaults(options, nl_generate_options_init, kGenerateOptionsV1, function);
  std::vector<std::shared_ptr<nl_adapter>> held = held_adapters(o.adapters, o.n_adapters, model, function);

  nl::ResidentModel& rm = *m->resident;
  const nl::Model& mm = rm.model();
  if (!mm.tokenizer) nl::fail(rm.path(), "the model has no tokenizer", "generation from text needs one");
  // The CLI's checks of these options (cmd_generate.cpp).
  if (o.max_tokens < 0) nl::fail(function, "max_tokens must be 0 or more");
  if (!(o.temperature >= 0.0f && o.temperature <= 100.0f)) nl::fail(function, "temperature must be in [0, 100]");
  if (o.top_k < 0) nl::fail(function, "top_k must be 0 (all) or more");
  if (!(o.top_p >= 0.0f && o.top_p <= 1.0f)) nl::fail(function, "top_p must be in [0, 1]");
  if (!(o.min_p >= 0.0f && o.min_p <= 1.0f)) nl::fail(function, "min_p must be in [0, 1]");
  if (!(o.repeat_penalty >= 0.0f && o.repeat_penalty <= 100.0f)) nl::fail(function, "repeat_penalty must be in [0, 100]");
  if (o.repeat_last_n < -1) nl::fail(function, "repeat_last_n must be -1 (the whole context), 0 (off) or more");
  if (o.n_stop > 0 && !o.stop) misuse(function, "stop is NULL but n_stop is " + std::to_string(o.n_stop));
  std::vector<std::string> stop_strings;
  for (size_t i = 0; i < o.n_stop; ++i) {
    if (!o.stop[i]) misuse(function, "stop string " + std::to_string(i) + " is NULL");
    stop_strings.emplace_back(o.stop[i]);
  }
  const std::string precision = text_or_empty(o.precision), kv_type = text_or_empty(o.kv_type);
  if (precision != "int8" && precision != "f32")
    nl::fail(function, "precision '" + precision + "' is not one of int8, f32");

  const std::vector<int32_t> prompt = prompt_tokens(mm, text, chat);

  nl::DecoderOptions dopt;
  dopt.precision = nl::parse_precision(precision);
  dopt.kv_type = nl::parse_kv_type(kv_type);
  // The KV cache is sized for this prompt and max_tokens (within the model's context), as the CLI sizes it.
  dopt.max_context = std::min<int64_t>(mm.config.context,
                                       static_cast<int64_t>(prompt.size()) + std::max<int64_t>(o.max_tokens, 1));

  // The adapters as one, their ranks stacked, as the CLI applies its --adapter options.
  std::optional<nl::LoraAdapter> combined;
  if (!held.empty()) combined = stacked(held);

  nl::SamplerOptions sopt;
  sopt.temperature = o.temperature;
  sopt.top_k = o.top_k;
  sopt.top_p = o.top_p;
  sopt.min_p = o.min_p;
  sopt.repeat_penalty = o.repeat_penalty;
  sopt.repeat_last_n = o.repeat_last_n;
  sopt.seed = o.seed == NL_SEED_RANDOM ? std::random_device{}() : o.seed;
  nl::Sampler sampler(sopt);
  nl::GenerateOptions gopt;
  gopt.max_new_tokens = o.max_tokens;
  gopt.stop_ids = nl::default_stop_ids(*mm.tokenizer);
  gopt.vocab_limit = mm.tokenizer->vocab_size();

  nl::TextStream stream(*mm.tokenizer, prompt, stop_strings);
  std::string generated;
  bool stopped_by_callback = false;
  ServingTurn turn(rm.turns());
  nl::Decoder decoder(mm, rm.engine(), dopt);
  decoder.set_adapter(combined ? &*combined : nullptr);
  auto on_token = [&](int32_t id, std::span<const float>) {
    const std::string piece = stream.push(id);
    generated += piece;
    if (stream.stopped()) return false;  // a stop string: the text ends before it
    if (!o.on_token) return true;
    turn.give_back();
    const int stop = o.on_token(o.user_data, id, piece.c_str(), piece.size());
    turn.take();
    stopped_by_callback = stop != 0;
    return !stopped_by_callback;
  };
  // (The decoder goes before the turn: it is declared after it.)
  const nl::GenerateResult res = nl::generate(decoder, sampler, prompt, gopt, on_token);
  generated += stream.finish();

  out->text = malloc_copy(generated);
  out->prompt_tokens = res.prompt_tokens;
  out->new_tokens = static_cast<int64_t>(res.ids.size());
  out->stop_reason = res.stopped_on_token      ? NL_STOP_TOKEN
                    : stream.stopped()        ? NL_STOP_STRING
                    : stopped_by_callback     ? NL_STOP_CALLBACK
                                              : NL_STOP_LENGTH;
  out->prompt_seconds = res.prompt_s;
  out->decode_seconds = res.decode_s;
}

}  // namespace

extern "C" {

NL_API void nl_generate_options_init(nl_generate_options* o) {
  if (!o) return;
  std::memset(o, 0, sizeof(*o));
  o->struct_size = sizeof(*o);
  // `nightlora generate`'s defaults.
  o->max_tokens = 256;
  o->temperature = 0.8f;
  o->top_k = 40;
  o->top_p = 0.95f;
  o->min_p = 0.05f;
  o->repeat_penalty = 1.0f;
  o->repeat_last_n = 64;
  o->seed = NL_SEED_RANDOM;
  o->precision = "int8";
  o->kv_type = "f16";
  o->chat_format = nullptr;
}

NL_API nl_status nl_generate(nl_model* model, const char* prompt, const nl_generate_options* options,
                             nl_generation* out) {
  return api_call([&] { run_generation(model, text_or_empty(prompt), /*chat=*/false, options, out, "nl_generate"); });
}

NL_API nl_status nl_chat(nl_model* model, const nl_chat_message* messages, size_t n_messages,
                         const nl_generate_options* options, nl_generation* out) {
  return api_call([&] {
    const char* fn = "nl_chat";
    std::shared_ptr<nl_model> m = models().get(model, fn);
    if (n_messages > 0) require(messages, fn, "messages");
    std::vector<nl::ChatMessage> msgs;
    for (size_t i = 0; i < n_messages; ++i) {
      if (!messages[i].role || !messages[i].content)
        misuse(fn, "message " + std::to_string(i) + " has a NULL role or content");
      const std::string role = messages[i].role;
      if (role != "system" && role != "user" && role != "assistant")
        nl::fail(fn, "message " + std::to_string(i) + " has the role '" + role + "'",
                 "use system, user or assistant");
      msgs.push_back({role, messages[i].content});
    }
    if (msgs.empty()) nl::fail(fn, "no messages", "give at least one user message");
    const nl::Model& mm = m->resident->model();
    if (!mm.tokenizer) nl::fail(m->resident->path(), "the model has no tokenizer", "chat needs one");
    const nl_generate_options o = options_or_defaults(options, nl_generate_options_init, kGenerateOptionsV1, fn);
    const nl::ChatFormat fmt = o.chat_format ? nl::parse_chat_format(o.chat_format)
                                      : nl::detect_chat_format(mm.tokenizer->chat_template(), mm.source_path);
    const std::string text = nl::render_chat_text(fmt, msgs, /*add_generation_prompt=*/true);
    run_generation(model, text, /*chat=*/true, options, out, fn);
  });
}

NL_API void nl_generation_free(nl_generation* g) {
  if (!g) return;
  std::free(g->text);
  std::memset(g, 0, sizeof(*g));
}

}  // extern "C"
