// `nightlora generate --model M [--adapter A[:S] ...] [--prompt P | --prompt-file F|-] [--chat]
// [-n N] [--temp T] ...`: runs the model on a prompt and streams the generated text (alone)
// to stdout. Greedy with --temp 0; starts from BOS when there is no prompt; stops on
// EOS/end-of-generation tokens, on BOS and on --stop strings (not printed). Sampling options
// and their defaults are llama.cpp's (sampling_options.h).
// The model runs on the frozen engine (int8 products and an f16 KV cache by default;
// `--precision f32 --kv-type f32` is the exact path). A summary line goes to stderr, as
// llama.cpp prints one: load time, prompt tokens/s, decode tokens/s (--quiet: none).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "command.h"
#include "nightlora/host/adapter_spec.h"
#include "nightlora/host/lora.h"
#include "nightlora/infer/chat_session.h"
#include "nightlora/infer/decoder.h"
#include "nightlora/infer/generate.h"
#include "nightlora/infer/inference_memory.h"
#include "nightlora/infer/sampler.h"
#include "nightlora/modelio/model.h"
#include "nightlora/tokenizer/chat_template.h"
#include "nightlora/tokenizer/tokenizer.h"
#include "nightlora/util/error.h"
#include "sampling_options.h"

namespace {

struct GenerateArgs {
  std::string model;
  std::string prompt;
  std::string prompt_file;
  std::string prompt_ids;
  std::string system;
  bool chat = false;
  std::string chat_format;
  int64_t n = 256;
  std::shared_ptr<nlcli::SamplingArgs> sampling = std::make_shared<nlcli::SamplingArgs>();
  std::vector<std::string> adapters;
  int threads = 0;
  bool print_ids = false;
  std::string logits_json;
  std::string precision = "int8";
  std::string kv_type = "f16";
  bool quiet = false;
};

std::vector<int32_t> parse_ids(const std::string& s) {
  std::vector<int32_t> ids;
  std::istringstream in(s);
  std::string tok;
  while (in >> tok) {
    size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(tok, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != tok.size() || v < 0 || v > INT32_MAX)
      nl::fail("--prompt-ids", "'" + tok + "' is not a token id", "give non-negative integers separated by spaces");
    ids.push_back(static_cast<int32_t>(v));
  }
  return ids;
}

std::vector<int32_t> prompt_tokens(const GenerateArgs& a, const nl::Model& m) {
  if (!a.prompt_ids.empty()) {
    std::vector<int32_t> ids = parse_ids(a.prompt_ids);
    for (int32_t id : ids)
      if (id >= m.config.vocab)
        nl::fail("--prompt-ids", "token id " + std::to_string(id) + " is outside the vocabulary (0.." +
                                     std::to_string(m.config.vocab - 1) + ")");
    return ids;
  }
  const nl::Tokenizer& tok = *m.tokenizer;
  std::string text = a.prompt;
  if (a.chat) {
    const nl::ChatFormat fmt = a.chat_format.empty() ? nl::detect_chat_format(tok.chat_template(), m.source_path)
                                                     : nl::parse_chat_format(a.chat_format);
    std::vector<nl::ChatMessage> msgs;
    if (!a.system.empty()) msgs.push_back({"system", a.system});
    msgs.push_back({"user", a.prompt});
    text = nl::render_chat_text(fmt, msgs, /*add_generation_prompt=*/true);
  }
  if (text.empty()) {
    if (tok.bos() < 0) nl::fail(m.source_path, "this model has no BOS token to start from", "give a --prompt");
    return {tok.bos()};
  }
  if (a.chat) return nl::encode_chat_text(tok, text);
  return tok.encode(text, tok.add_bos_default(), /*parse_special=*/false);
}

// The text of --prompt-file (`-`: standard input), less one trailing newline, as llama.cpp's
// -f reads a prompt (a file saved by an editor ends with one the prompt did not mean).
std::string read_prompt_file(const std::string& path) {
  std::ostringstream buf;
  if (path == "-") {
    buf << std::cin.rdbuf();
  } else {
    std::ifstream in(path, std::ios::binary);
    if (!in) nl::fail(path, "cannot read the prompt file", "check the path (or give - to read standard input)");
    buf << in.rdbuf();
  }
  std::string text = buf.str();
  if (!text.empty() && text.back() == '\n') text.pop_back();
  if (!text.empty() && text.back() == '\r') text.pop_back();
  return text;
}

int run_generate(const GenerateArgs& a) {
  const auto t_load = std::chrono::steady_clock::now();
  nl::DecoderOptions dopt;
  dopt.threads = a.threads;
  dopt.precision = nl::parse_precision(a.precision);
  dopt.kv_type = nl::parse_kv_type(a.kv_type);
  std::unique_ptr<nl::Model> model = nl::Model::load(a.model);
  if (!model->tokenizer && a.prompt_ids.empty() && !a.print_ids)
    nl::fail(a.model, "the model has no tokenizer", "use --prompt-ids and --print-ids");
  const std::vector<int32_t> prompt = prompt_tokens(a, *model);
  // The KV cache is sized for this prompt and -n (within the model's context).
  dopt.max_context = std::min<int64_t>(model->config.context, static_cast<int64_t>(prompt.size()) + std::max<int64_t>(a.n, 1));

  nl::Decoder decoder(*model, dopt);
  // Several adapters apply as one, their ranks stacked (adapter_spec.h): exactly the sum of
  // their scaled products, what `nightlora merge` folds into the weights.
  nl::LoraAdapter adapter;
  if (!a.adapters.empty()) {
    std::vector<nl::AdapterSpec> specs;
    for (const std::string& s : a.adapters) specs.push_back(nl::parse_adapter_spec(s));
    adapter = nl::stack_adapters(nl::load_scaled_adapters(specs, *model));
    decoder.set_adapter(&adapter);
  }
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count();

  const nl::SamplerOptions sopt = a.sampling->resolved();
  nl::Sampler sampler(sopt);

  nl::GenerateOptions gopt;
  gopt.max_new_tokens = a.n;
  if (model->tokenizer) {
    gopt.stop_ids = nl::default_stop_ids(*model->tokenizer);
    gopt.vocab_limit = model->tokenizer->vocab_size();
  }

  std::unique_ptr<nl::TextStream> stream;
  if (!a.print_ids) stream = std::make_unique<nl::TextStream>(*model->tokenizer, prompt, a.sampling->stop);
  nlohmann::json steps = nlohmann::json::array();
  std::vector<float> first_logits;

  auto on_token = [&](int32_t id, std::span<const float> logits) {
    if (!a.logits_json.empty()) {
      if (first_logits.empty()) first_logits.assign(logits.begin(), logits.end());
      std::vector<int32_t> order(logits.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
      const size_t k = std::min<size_t>(10, order.size());
      std::partial_sort(order.begin(), order.begin() + k, order.end(),
                        [&](int32_t x, int32_t y) { return logits[x] > logits[y] || (logits[x] == logits[y] && x < y); });
      nlohmann::json top = nlohmann::json::array();
      for (size_t i = 0; i < k; ++i) top.push_back({order[i], logits[order[i]]});
      steps.push_back({{"id", id}, {"top10", top}});
    }
    if (stream) {
      const std::string piece = stream->push(id);
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
      if (stream->stopped()) return false;
    }
    return true;
  };
  const nl::GenerateResult res = nl::generate(decoder, sampler, prompt, gopt, on_token);

  if (stream) {
    const std::string rest = stream->finish();
    std::fwrite(rest.data(), 1, rest.size(), stdout);
    std::fputs("\n", stdout);  // as llama2.c's run.c ends its output
  } else {
    for (size_t i = 0; i < res.ids.size(); ++i) std::printf(i ? " %d" : "%d", res.ids[i]);
    std::printf("\n");
  }
  std::fflush(stdout);
  if (!a.quiet) {
    auto rate = [](int64_t n, double s) { return s > 0 ? static_cast<double>(n) / s : 0.0; };
    std::fprintf(stderr,
                 "load %.2f s | prompt %lld tokens in %.2f s, %.1f tokens/s | decode %lld tokens in %.2f s, %.1f "
                 "tokens/s | %s, kv %s, %d threads, %s engine, seed %llu\n",
                 load_s, static_cast<long long>(res.prompt_tokens), res.prompt_s, rate(res.prompt_tokens, res.prompt_s),
                 static_cast<long long>(res.decoded_tokens), res.decode_s, rate(res.decoded_tokens, res.decode_s),
                 nl::precision_name(dopt.precision), nl::kv_type_name(dopt.kv_type), decoder.engine().threads(),
                 decoder.engine().backend().c_str(), static_cast<unsigned long long>(sopt.seed));
    std::fprintf(stderr, "%s\n", nl::describe_inference_memory(decoder).c_str());
  }

  if (!a.logits_json.empty()) {
    nlohmann::json j = {{"model", a.model},
                        {"prompt_ids", prompt},
                        {"ids", res.ids},
                        {"stopped_on_token", res.stopped_on_token},
                        {"first_logits", first_logits},
                        {"steps", steps}};
    std::ofstream out(a.logits_json);
    out << j.dump() << "\n";
    if (!out) nl::fail(a.logits_json, "cannot write the logits file");
  }
  return 0;
}

nlcli::Register reg_generate(
    "generate", "Generate text with a model (and LoRA adapters); the text alone goes to stdout",
    [](CLI::App& sub) -> nlcli::Run {
      auto a = std::make_shared<GenerateArgs>();
      sub.add_option("-m,--model", a->model, "GGUF file or Hugging Face folder")->required();
      sub.add_option("-p,--prompt", a->prompt, "prompt text (default: start from BOS)");
      sub.add_option("-f,--prompt-file", a->prompt_file, "read the prompt text from this file (- : standard input)");
      sub.add_option("--prompt-ids", a->prompt_ids, "prompt as token ids separated by spaces (instead of --prompt)");
      sub.add_flag("--chat", a->chat, "render the prompt as a user message with the model's chat template");
      sub.add_option("--chat-format", a->chat_format, "chat template to use instead of detecting it: chatml, qwen2, qwen2.5, qwen3, llama3, llama3.1");
      sub.add_option("--system", a->system, "system message for --chat");
      sub.add_option("-n,--n-tokens", a->n, "maximum number of new tokens")
          ->check(CLI::Range(int64_t{0}, int64_t{1} << 30))
          ->capture_default_str();
      nlcli::add_sampling_options(sub, a->sampling);
      sub.add_option("--adapter,--lora", a->adapters,
                     "LoRA adapter to apply, PATH[:SCALE] (PEFT folder or llama.cpp LoRA GGUF; repeatable, the adapters "
                     "add up)");
      sub.add_option("-t,--threads", a->threads, "threads (0 = all cores)")->check(CLI::NonNegativeNumber);
      sub.add_flag("--print-ids", a->print_ids, "print the generated token ids instead of text");
      sub.add_option("--logits-json", a->logits_json, "write prompt ids, generated ids and logits to this JSON file");
      sub.add_option("--precision", a->precision,
                     "numeric mode of the engine's products: int8 (fast, the default) or f32 (exact)")
          ->check(CLI::IsMember({"int8", "f32"}));
      sub.add_option("--kv-type", a->kv_type, "KV cache element type: f16 (the default) or f32")
          ->check(CLI::IsMember({"f16", "f32"}));
      sub.add_flag("-q,--quiet", a->quiet, "no summary line (load time, prompt and decode tokens/s) on stderr");
      return [a]() {
        if ((!a->prompt.empty()) + (!a->prompt_file.empty()) + (!a->prompt_ids.empty()) > 1)
          nl::fail("generate", "give one of --prompt, --prompt-file and --prompt-ids");
        if (!a->prompt_file.empty()) {
          a->prompt = read_prompt_file(a->prompt_file);
          if (a->prompt.empty() && !a->chat)
            nl::fail(a->prompt_file, "the prompt file is empty", "give a prompt, or leave the option out to start from BOS");
        }
        if (!a->sampling->stop.empty() && a->print_ids)
          nl::fail("generate", "--stop matches text, and --print-ids prints ids", "leave one of them out");
        if (a->chat && !a->prompt_ids.empty()) nl::fail("generate", "--chat needs --prompt text, not --prompt-ids");
        return run_generate(*a);
      };
    });

}  // namespace
