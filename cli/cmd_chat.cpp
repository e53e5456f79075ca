// `nightlora chat --model M [--adapter A[:S] ...] [--system TEXT]`: a multi-turn chat with the
// model's chat template, llama-cli -cnv style. Each line on standard input is a user turn;
// the reply streams to stdout as it is generated. /reset forgets the conversation, /quit
// (or end of input) ends. At a terminal it shows a "> " prompt; otherwise (a pipe, a file)
// it reads turns silently, so a chat can be scripted: stdout then holds the replies alone,
// one per turn, each ended by a newline. The conversation stays in the KV cache: each turn
// feeds the model only the new text (infer/chat_session.h). --transcript-json writes every
// turn (the rendered template text, tokens reused and prefilled) for scripts and tests.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "command.h"
#include "nightlora/host/adapter_spec.h"
#include "nightlora/host/lora.h"
#include "nightlora/infer/chat_session.h"
#include "nightlora/infer/decoder.h"
#include "nightlora/infer/inference_memory.h"
#include "nightlora/modelio/model.h"
#include "nightlora/tokenizer/chat_template.h"
#include "nightlora/tokenizer/tokenizer.h"
#include "nightlora/util/error.h"
#include "sampling_options.h"

namespace {

struct ChatArgs {
  std::string model, system, chat_format, transcript_json;
  std::vector<std::string> adapters;
  std::shared_ptr<nlcli::SamplingArgs> sampling = std::make_shared<nlcli::SamplingArgs>();
  int64_t n = 512;
  int64_t ctx_size = 4096;
  int threads = 0;
  std::string precision = "int8";
  std::string kv_type = "f16";
  bool quiet = false;
};

int run_chat(const ChatArgs& a) {
  std::unique_ptr<nl::Model> model = nl::Model::load(a.model);
  if (!model->tokenizer) nl::fail(a.model, "the model has no tokenizer", "chat needs one to read and write text");
  const nl::Tokenizer& tok = *model->tokenizer;
  const nl::ChatFormat format = a.chat_format.empty() ? nl::detect_chat_format(tok.chat_template(), a.model)
                                                      : nl::parse_chat_format(a.chat_format);

  nl::DecoderOptions dopt;
  dopt.threads = a.threads;
  dopt.precision = nl::parse_precision(a.precision);
  dopt.kv_type = nl::parse_kv_type(a.kv_type);
  dopt.max_context = a.ctx_size > 0 ? std::min<int64_t>(a.ctx_size, model->config.context) : model->config.context;
  nl::Decoder decoder(*model, dopt);
  nl::LoraAdapter adapter;
  if (!a.adapters.empty()) {
    std::vector<nl::AdapterSpec> specs;
    for (const std::string& s : a.adapters) specs.push_back(nl::parse_adapter_spec(s));
    adapter = nl::stack_adapters(nl::load_scaled_adapters(specs, *model));
    decoder.set_adapter(&adapter);
  }
  if (!a.quiet) std::fprintf(stderr, "%s\n", nl::describe_inference_memory(decoder).c_str());

  const nl::SamplerOptions sopt = a.sampling->resolved();
  nl::Sampler sampler(sopt);
  nl::ChatOptions copt;
  copt.system = a.system;
  copt.generate.max_new_tokens = a.n;
  copt.stop_strings = a.sampling->stop;
  nl::ChatSession session(decoder, tok, format, copt);

  const bool interactive = isatty(STDIN_FILENO) != 0;
  if (interactive && !a.quiet)
    std::fprintf(stderr, "chat with %s (%s template); /reset forgets the conversation, /quit ends\n", a.model.c_str(),
                 nl::chat_format_name(format));
  nlohmann::json transcript = nlohmann::json::array();
  int64_t prefilled = 0, generated = 0;
  double prefill_s = 0, decode_s = 0;
  std::string line;
  while (true) {
    if (interactive) {
      std::fputs("> ", stdout);
      std::fflush(stdout);
    }
    if (!std::getline(std::cin, line)) break;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    if (line == "/quit" || line == "/exit") break;
    if (line == "/reset") {
      session.reset();
      transcript.push_back({{"command", "/reset"}});
      if (interactive) std::fputs("(conversation forgotten)\n", stdout);
      continue;
    }
    const nl::ChatTurn turn = session.send(line, sampler, [](const std::string& piece) {
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
      return true;
    });
    std::fputs("\n", stdout);
    std::fflush(stdout);
    prefilled += turn.prefilled_tokens;
    generated += static_cast<int64_t>(turn.generation.ids.size());
    prefill_s += turn.generation.prompt_s;
    decode_s += turn.generation.decode_s;
    transcript.push_back({{"user", line},
                          {"reply", turn.reply},
                          {"prompt_text", turn.prompt_text},
                          {"prompt_tokens", turn.prompt_tokens},
                          {"reused_tokens", turn.reused_tokens},
                          {"prefilled_tokens", turn.prefilled_tokens},
                          {"generated_tokens", turn.generation.ids.size()},
                          {"stopped_on_token", turn.generation.stopped_on_token},
                          {"stopped_on_string", turn.stopped_on_string}});
  }
  if (!a.transcript_json.empty()) {
    const nlohmann::json j = {{"model", a.model},
                              {"format", nl::chat_format_name(format)},
                              {"system", a.system},
                              {"seed", sopt.seed},
                              {"turns", transcript}};
    std::ofstream out(a.transcript_json);
    // Text read from stdin need not be valid UTF-8: write what cannot be encoded as U+FFFD.
    out << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    if (!out) nl::fail(a.transcript_json, "cannot write the transcript");
  }
  if (!a.quiet && prefilled > 0) {
    auto rate = [](int64_t n, double s) { return s > 0 ? static_cast<double>(n) / s : 0.0; };
    std::fprintf(stderr, "prefilled %lld tokens, %.1f tokens/s | generated %lld tokens, %.1f tokens/s | seed %llu\n",
                 static_cast<long long>(prefilled), rate(prefilled, prefill_s), static_cast<long long>(generated),
                 rate(generated, decode_s), static_cast<unsigned long long>(sopt.seed));
  }
  return 0;
}

nlcli::Register reg_chat(
    "chat", "Chat with a model (and adapters) using its chat template; reads turns from stdin, /reset, /quit",
    [](CLI::App& sub) -> nlcli::Run {
      auto a = std::make_shared<ChatArgs>();
      sub.add_option("-m,--model", a->model, "GGUF file or Hugging Face folder")->required();
      sub.add_option("--adapter,--lora", a->adapters,
                     "LoRA adapter to apply, PATH[:SCALE] (repeatable; the adapters add up)");
      sub.add_option("--system", a->system, "system message");
      sub.add_option("--chat-format", a->chat_format,
                     "chat template to use instead of detecting it: chatml, qwen2, qwen2.5, qwen3, llama3, llama3.1");
      sub.add_option("-n,--n-tokens", a->n, "maximum tokens per reply")
          ->check(CLI::Range(int64_t{1}, int64_t{1} << 30))
          ->capture_default_str();
      sub.add_option("-c,--ctx-size", a->ctx_size, "context (KV cache) length for the whole conversation (0 = the model's)")
          ->check(CLI::NonNegativeNumber)
          ->capture_default_str();
      nlcli::add_sampling_options(sub, a->sampling);
      sub.add_option("-t,--threads", a->threads, "threads (0 = all cores)")->check(CLI::NonNegativeNumber);
      sub.add_option("--precision", a->precision, "numeric mode of the engine's products: int8 (fast) or f32 (exact)")
          ->check(CLI::IsMember({"int8", "f32"}))
          ->capture_default_str();
      sub.add_option("--kv-type", a->kv_type, "KV cache element type: f16 or f32")
          ->check(CLI::IsMember({"f16", "f32"}))
          ->capture_default_str();
      sub.add_option("--transcript-json", a->transcript_json,
                     "at the end, write every turn (rendered template text, tokens reused and prefilled) to this file");
      sub.add_flag("-q,--quiet", a->quiet, "no banner and no summary line on stderr");
      return [a]() { return run_chat(*a); };
    });

}  // namespace
