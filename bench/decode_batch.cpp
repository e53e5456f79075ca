// nl_bench_decode_batch: decoding several sequences at once (nl::DecodeBatch, what `serve`
// runs for its concurrent completions) against one by one (each sequence's own one-token
// Decoder::forward, what serve ran before: every weight read once per sequence per token).
//
//   nl_bench_decode_batch --model M.gguf [--seqs 1,2,4] [-n 32] [--prompt-tokens 32]
//                         [--threads 2] [--reps 5] [--precision default]
//
// Per rep, interleaved (for each sequence count S: one by one, then batched, on one engine):
// S decoders each run their own prompt (different windows of a fixed English text; not
// timed), then n greedy tokens each are decoded, timed. Printed per rep and S and way, and
// as medians: decode tokens/s over all S sequences (wall clock), CPU time per decoded token
// (this process's CPU time over the S*n tokens: the machine may be shared, CPU time is what
// the work costs) and batched over one-by-one ratios. Both ways must give the same greedy
// tokens (checked: the batch is exact), or the program fails.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "nightlora/engine/frozen_engine.h"
#include "nightlora/infer/decoder.h"
#include "nightlora/modelio/model.h"
#include "nightlora/tokenizer/tokenizer.h"
#include "nightlora/util/error.h"

namespace bench_decode_batch {

using Clock = std::chrono::steady_clock;

double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

constexpr const char* kText =
    "Once upon a time, in a small town by the sea, there lived an old clockmaker who repaired the clocks of "
    "everyone in the valley. Every morning he opened his shop, wound the great clock on the wall, and listened "
    "to the ticking of a hundred small machines. Children came after school to watch him work, and he told them "
    "stories about the ships that sailed past the harbour, the storms of the winter and the stars that guided "
    "the sailors home. ";

// Sequence s's prompt: BOS (when the tokenizer adds one) and a window of the text's tokens
// starting 5*s tokens in, repeated as needed.
std::vector<int32_t> prompt_for(const nl::Model& m, int s, int64_t n) {
  if (!m.tokenizer) nl::fail(m.source_path, "the model has no tokenizer", "give a model with its tokenizer");
  const nl::Tokenizer& tok = *m.tokenizer;
  const std::vector<int32_t> text = tok.encode(kText, false, false);
  if (text.empty()) nl::fail(m.source_path, "the tokenizer makes no token of the text");
  std::vector<int32_t> ids;
  if (tok.add_bos_default() && tok.bos() >= 0) ids.push_back(tok.bos());
  for (size_t i = static_cast<size_t>(5 * s); static_cast<int64_t>(ids.size()) < n; ++i) ids.push_back(text[i % text.size()]);
  return ids;
}

int32_t pick(const float* logits, int64_t vocab) {
  return static_cast<int32_t>(std::max_element(logits, logits + vocab) - logits);
}

struct Timed {
  double wall = 0, cpu = 0;
  std::vector<std::vector<int32_t>> tokens;  // per sequence
};

// S sequences, n greedy tokens each after their prompts; batched or one by one.
Timed run(const nl::Model& m, nl::FrozenEngine& engine, const nl::DecoderOptions& o, int S, int64_t n,
          int64_t prompt_tokens, bool batched) {
  const int64_t V = m.config.vocab;
  std::vector<std::unique_ptr<nl::Decoder>> decs;
  std::vector<std::vector<float>> logits;
  Timed t;
  t.tokens.resize(static_cast<size_t>(S));
  for (int s = 0; s < S; ++s) {
    decs.push_back(std::make_unique<nl::Decoder>(m, engine, o));
    logits.push_back(decs.back()->forward(prompt_for(m, s, prompt_tokens)));
  }
  nl::DecodeBatch batch(engine, o.threads);
  std::vector<nl::Decoder*> seqs;
  for (auto& d : decs) seqs.push_back(d.get());
  std::vector<int32_t> ids(static_cast<size_t>(S));
  const double c0 = cpu_seconds();
  const Clock::time_point w0 = Clock::now();
  for (int64_t i = 0; i < n; ++i) {
    for (int s = 0; s < S; ++s) {
      ids[static_cast<size_t>(s)] = pick(logits[static_cast<size_t>(s)].data(), V);
      t.tokens[static_cast<size_t>(s)].push_back(ids[static_cast<size_t>(s)]);
    }
    if (batched) {
      const std::vector<float> all = batch.step(seqs, ids);
      for (int s = 0; s < S; ++s)
        logits[static_cast<size_t>(s)].assign(all.begin() + s * V, all.begin() + (s + 1) * V);
    } else {
      for (int s = 0; s < S; ++s)
        logits[static_cast<size_t>(s)] = decs[static_cast<size_t>(s)]->forward(std::vector<int32_t>{ids[static_cast<size_t>(s)]});
    }
  }
  t.wall = std::chrono::duration<double>(Clock::now() - w0).count();
  t.cpu = cpu_seconds() - c0;
  return t;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace bench_decode_batch

int bench_decode_batch_main(int argc, char** argv) {
  using namespace bench_decode_batch;
  CLI::App app{"decode tokens/s of several sequences: batched (nl::DecodeBatch) vs one by one"};
  std::string model_path, seqs_arg = "1,2,4", precision = "default";
  int64_t n = 32, prompt_tokens = 32;
  int threads = 2, reps = 5;
  app.add_option("--model", model_path, "GGUF file or Hugging Face folder")->required();
  app.add_option("--seqs", seqs_arg, "sequence counts, comma-separated");
  app.add_option("-n", n, "decoded tokens per sequence");
  app.add_option("--prompt-tokens", prompt_tokens, "prompt tokens per sequence (not timed)");
  app.add_option("--threads", threads, "engine threads");
  app.add_option("--reps", reps, "interleaved repetitions (medians)");
  app.add_option("--precision", precision, "default (int8), f32");
  CLI11_PARSE(app, argc, argv);
  try {
    std::vector<int> counts;
    std::stringstream ss(seqs_arg);
    for (std::string x; std::getline(ss, x, ',');) counts.push_back(std::stoi(x));
    auto model = nl::Model::load(model_path);
    nl::DecoderOptions o;
    if (precision == "f32") o = nl::DecoderOptions::exact();
    else if (precision != "default") nl::fail("--precision", "'" + precision + "'", "use default or f32");
    o.threads = threads;
    nl::EngineOptions eo;
    eo.threads = threads;
    auto engine = nl::make_engine(*model, eo);
    std::printf("model %s, engine %s, %d threads, precision %s, kv %s, prompt %lld tokens, %lld decoded per sequence, %d reps\n",
                model_path.c_str(), engine->isa().c_str(), threads, nl::precision_name(o.precision),
                nl::kv_type_name(o.kv_type), static_cast<long long>(prompt_tokens), static_cast<long long>(n), reps);
    // Warm-up (untimed): caches, page faults, thread start.
    run(*model, *engine, o, counts.back(), 4, prompt_tokens, true);
    run(*model, *engine, o, counts.back(), 4, prompt_tokens, false);
    struct Series {
      std::vector<double> tps[2], cpu_ms[2], ratio_cpu, ratio_tps;
    };
    std::vector<Series> series(counts.size());
    for (int r = 0; r < reps; ++r)
      for (size_t ci = 0; ci < counts.size(); ++ci) {
        const int S = counts[ci];
        const Timed one = run(*model, *engine, o, S, n, prompt_tokens, false);
        const Timed bat = run(*model, *engine, o, S, n, prompt_tokens, true);
        if (one.tokens != bat.tokens) nl::fail("bench", "batched greedy tokens differ from one by one's (S=" + std::to_string(S) + ")");
        const double tokens = static_cast<double>(S * n);
        Series& sr = series[ci];
        for (int b = 0; b < 2; ++b) {
          const Timed& t = b ? bat : one;
          sr.tps[b].push_back(tokens / t.wall);
          sr.cpu_ms[b].push_back(1e3 * t.cpu / tokens);
          std::printf("{\"rep\":%d,\"seqs\":%d,\"way\":\"%s\",\"tokens\":%lld,\"wall_s\":%.4f,\"cpu_s\":%.4f,"
                      "\"tokens_per_s\":%.2f,\"cpu_ms_per_token\":%.4f}\n",
                      r, S, b ? "batched" : "one-by-one", static_cast<long long>(tokens), t.wall, t.cpu, tokens / t.wall,
                      1e3 * t.cpu / tokens);
        }
        sr.ratio_cpu.push_back(sr.cpu_ms[0].back() / sr.cpu_ms[1].back());
        sr.ratio_tps.push_back(sr.tps[1].back() / sr.tps[0].back());
        std::fflush(stdout);
      }
    std::printf("\nmedians of %d reps (same greedy tokens both ways in every rep)\n", reps);
    std::printf("| sequences | one-by-one tok/s | batched tok/s | tok/s ratio | one-by-one CPU ms/tok | batched CPU ms/tok | CPU ratio (one-by-one / batched) |\n");
    std::printf("|---|---|---|---|---|---|---|\n");
    for (size_t ci = 0; ci < counts.size(); ++ci) {
      const Series& sr = series[ci];
      std::printf("| %d | %.1f | %.1f | %.2fx | %.3f | %.3f | %.2fx |\n", counts[ci], median(sr.tps[0]), median(sr.tps[1]),
                  median(sr.ratio_tps), median(sr.cpu_ms[0]), median(sr.cpu_ms[1]), median(sr.ratio_cpu));
    }
    return 0;
  } catch (const nl::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
