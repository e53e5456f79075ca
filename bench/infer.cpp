// nl_bench_infer: nightlora's side of the inference benchmark beside llama.cpp
// (bench/run_infer.sh; llama.cpp's side is tools/js/llama_bench_infer.mjs). On the public
// nl::Decoder API, per rep, from an empty KV cache:
//   pp: the whole prompt in one Decoder::forward, then the greedy pick of the first token
//       (forward returns only the last position's logits, as llama.cpp computes);
//   tg: n more tokens, each one Decoder::forward of the previous token and a greedy pick.
// Prompt processing and token generation in tokens/s, named as llama-bench names them, and
// the decode's CPU time per token (all threads: comparable under other load).
//
//   nl_bench_infer --model M.gguf [--prompt-tokens 256] [-n 64] [--threads 2] [--reps 1]
//                  [--warmup 1 (short untimed reps)] [--prompt-ids-file F] [--write-prompt-ids F]
//                  [--precision default] [--kv-type default]
//
// The prompt: a fixed English text, tokenized by the model's tokenizer (BOS first when the
// tokenizer asks for one) and repeated until it has --prompt-tokens tokens; or the ids of
// --prompt-ids-file. --write-prompt-ids writes the ids used, so llama.cpp gets the very same
// tokens. One JSON line per measured rep on stdout.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <time.h>

#include <CLI/CLI.hpp>

#include "nightlora/infer/decoder.h"
#include "nightlora/modelio/model.h"
#include "nightlora/tokenizer/tokenizer.h"
#include "nightlora/util/error.h"

namespace bench_infer {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

constexpr const char* kPromptText =
    "Once upon a time, in a small town by the sea, there lived an old clockmaker who repaired the clocks of "
    "everyone in the valley. Every morning he opened his shop, wound the great clock on the wall, and listened "
    "to the ticking of a hundred small machines. Children came after school to watch him work, and he told them "
    "stories about the ships that sailed past the harbour, the storms of the winter and the stars that guided "
    "the sailors home. ";

std::vector<int32_t> text_prompt(const nl::Model& model, int64_t n_tokens) {
  if (!model.tokenizer) nl::fail(model.source_path, "the model has no tokenizer", "give --prompt-ids-file");
  const nl::Tokenizer& tok = *model.tokenizer;
  std::vector<int32_t> ids;
  if (tok.add_bos_default() && tok.bos() >= 0) ids.push_back(tok.bos());
  const std::vector<int32_t> piece = tok.encode(kPromptText, false, false);
  if (piece.empty()) nl::fail(model.source_path, "the tokenizer makes no token of the prompt text");
  while (static_cast<int64_t>(ids.size()) < n_tokens)
    ids.insert(ids.end(), piece.begin(), piece.begin() + std::min<int64_t>(static_cast<int64_t>(piece.size()),
                                                                           n_tokens - static_cast<int64_t>(ids.size())));
  return ids;
}

std::vector<int32_t> read_ids(const std::string& path) {
  std::ifstream f(path);
  if (!f) nl::fail(path, "cannot open the prompt ids", "check the path");
  std::vector<int32_t> ids;
  std::string word;
  while (f >> word) {
    try {
      size_t used = 0;
      const long v = std::stol(word, &used);
      if (used != word.size() || v < 0 || v > INT32_MAX) throw std::invalid_argument(word);
      ids.push_back(static_cast<int32_t>(v));
    } catch (const std::exception&) {
      nl::fail(path, "'" + word + "' is not a token id", "write non-negative integers separated by spaces");
    }
  }
  if (ids.empty()) nl::fail(path, "no token id", "write the prompt's token ids separated by spaces");
  return ids;
}

int32_t greedy(const std::vector<float>& logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

// CPU seconds of this process (all its threads): the measure that holds on a machine shared
// with other work, where wall time also counts the time the threads waited for a core.
double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct Rep {
  double pp_s = 0, tg_s = 0;
  double tg_cpu_s = 0;  // CPU seconds of the decode (all threads)
};

Rep run_once(nl::Decoder& dec, const std::vector<int32_t>& prompt, int64_t n_gen) {
  dec.reset();  // an empty KV cache: no prompt reuse between reps (llama.cpp's side clears its history too)
  Rep r;
  const Clock::time_point t0 = Clock::now();
  int32_t next = greedy(dec.forward(prompt));
  r.pp_s = seconds_since(t0);
  const Clock::time_point t1 = Clock::now();
  const double cpu1 = process_cpu_seconds();
  for (int64_t i = 0; i < n_gen; ++i) next = greedy(dec.forward(std::vector<int32_t>{next}));
  r.tg_s = seconds_since(t1);
  r.tg_cpu_s = process_cpu_seconds() - cpu1;
  return r;
}

}  // namespace bench_infer

int bench_infer_main(int argc, char** argv) {
  using namespace bench_infer;
  CLI::App app{"Prompt processing (pp) and greedy decode (tg) tokens/s of nl::Decoder on a model"};
  std::string model_path, ids_in, ids_out, precision = "default", kv_type = "default";
  int64_t prompt_tokens = 256, n_gen = 64;
  int threads = 2, reps = 1, warmup = 1;
  app.add_option("--model", model_path, "GGUF file or Hugging Face folder")->required();
  app.add_option("--prompt-tokens", prompt_tokens, "prompt length (text prompt)")->check(CLI::PositiveNumber);
  app.add_option("-n,--gen-tokens", n_gen, "tokens decoded after the prompt")->check(CLI::PositiveNumber);
  app.add_option("--threads", threads, "decoder threads")->check(CLI::PositiveNumber);
  app.add_option("--reps", reps, "measured reps")->check(CLI::NonNegativeNumber);
  app.add_option("--warmup", warmup, "untimed short reps first (16 prompt tokens, 2 decoded)")->check(CLI::NonNegativeNumber);
  app.add_option("--prompt-ids-file", ids_in, "the prompt as token ids (instead of the text prompt)");
  app.add_option("--write-prompt-ids", ids_out, "write the prompt's token ids to this file");
  app.add_option("--precision", precision, "the decoder's numeric mode: default (int8), f32, f16, int8");
  app.add_option("--kv-type", kv_type, "the KV cache's element type: default (f16), f16, f32");
  CLI11_PARSE(app, argc, argv);
  try {
    const Clock::time_point t_load = Clock::now();
    const auto model = nl::Model::load(model_path);
    const std::vector<int32_t> prompt = ids_in.empty() ? text_prompt(*model, prompt_tokens) : read_ids(ids_in);
    for (int32_t id : prompt)
      if (id >= model->config.vocab)
        nl::fail(ids_in, "token id " + std::to_string(id) + " is outside the vocabulary of " +
                             std::to_string(model->config.vocab), "give ids made for this model");
    if (!ids_out.empty()) {
      std::ofstream f(ids_out);
      for (size_t i = 0; i < prompt.size(); ++i) f << (i ? " " : "") << prompt[i];
      f << "\n";
      if (!f) nl::fail(ids_out, "cannot write the prompt ids", "check the folder exists and is writable");
    }

    nl::DecoderOptions dopt;
    dopt.threads = threads;
    dopt.max_context = static_cast<int64_t>(prompt.size()) + n_gen + 16;
    // "default": the decoder's defaults (int8 products, f16 cache).
    if (precision != "default") dopt.precision = nl::parse_precision(precision);
    if (kv_type != "default") dopt.kv_type = nl::parse_kv_type(kv_type);
    nl::Decoder dec(*model, dopt);
    const double load_s = seconds_since(t_load);

    // Warm-up: a short run (16 prompt tokens, 2 decoded) maps every weight page in and
    // starts the threads; llama.cpp's side does the same.
    const std::vector<int32_t> warm(prompt.begin(), prompt.begin() + std::min<size_t>(prompt.size(), 16));
    for (int r = 0; r < warmup; ++r) run_once(dec, warm, 2);
    for (int r = 0; r < reps; ++r) {
      const Rep m = run_once(dec, prompt, n_gen);
      std::printf(
          "{\"side\":\"nightlora\",\"model\":\"%s\",\"threads\":%d,\"precision\":\"%s\",\"kv_type\":\"%s\","
          "\"load_s\":%.4f,\"pp_tokens\":%zu,\"pp_s\":%.6f,\"pp_tps\":%.3f,\"tg_tokens\":%lld,\"tg_s\":%.6f,"
          "\"tg_tps\":%.3f,\"tg_cpu_ms_per_token\":%.3f}\n",
          model_path.c_str(), threads, precision.c_str(), kv_type.c_str(), load_s, prompt.size(), m.pp_s,
          static_cast<double>(prompt.size()) / m.pp_s, static_cast<long long>(n_gen), m.tg_s,
          static_cast<double>(n_gen) / m.tg_s, 1e3 * m.tg_cpu_s / static_cast<double>(n_gen));
      std::fflush(stdout);
    }
  } catch (const nl::Error& e) {
    std::fprintf(stderr, "nl_bench_infer: %s\n", e.what());
    return 1;
  }
  return 0;
}
