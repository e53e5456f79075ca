// Choosing the next token from logits: greedy (temperature 0) or sampled. The steps, in
// Hugging Face generate()'s order:
//   1. repetition penalty over a window of recent tokens (llama.cpp's repeat_penalty /
//      repeat_last_n, HF's repetition_penalty): a token seen in the window has a positive
//      logit divided by the penalty and a negative one multiplied by it (each token once,
//      however often it appears). It applies to greedy decoding too.
//   2. scale by 1/temperature,
//   3. top-k: keep the k most likely,
//   4. top-p (nucleus): the smallest set whose probability reaches p,
//   5. min-p: drop tokens less likely than min_p times the most likely one,
//   6. draw from what is left, renormalised.
// llama.cpp's default chain applies the temperature last instead (after top-k/top-p/min-p),
// so with temperature != 1 its top-p and min-p cut a slightly different set; the option
// names and defaults are llama.cpp's (common/common.h): temp 0.8, top-k 40, top-p 0.95,
// min-p 0.05, repeat-penalty 1.0 (off), repeat-last-n 64.
// Sampling is deterministic for a seed: the random stream is our own (mt19937_64 bits
// mapped to [0, 1)), not a library distribution that may differ by platform.
#pragma once
#include <cstdint>
#include <deque>
#include <random>
#include <span>
#include <utility>
#include <vector>

namespace nl {

struct SamplerOptions {
  float temperature = 0.8f;     // <= 0: greedy
  int top_k = 40;               // <= 0: no limit
  float top_p = 0.95f;          // >= 1: no limit
  float min_p = 0.05f;          // <= 0: no limit
  float repeat_penalty = 1.0f;  // 1: off
  int repeat_last_n = 64;       // window of the penalty in tokens; 0: off, -1: the whole context
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(const SamplerOptions& opt);

  // The next token. Greedy picks the highest (penalised) logit, the lowest id among ties.
  // Does not add the token to the history: the caller accepts what it keeps.
  int32_t sample(std::span<const float> logits);

  // The candidates sampling would draw from, with their probabilities (summing to 1), most
  // likely first (ties: lower id first). Greedy gives the argmax with probability 1.
  std::vector<std::pair<int32_t, float>> candidates(std::span<const float> logits) const;

  // The token history the repetition penalty looks at (as llama.cpp's common_sampler_accept):
  // the prompt's tokens and each token generated after them. Only the last repeat_last_n
  // are kept.
  void accept(int32_t id);
  void accept(std::span<const int32_t> ids);
  void clear_history();

  // `logits` with the repetition penalty applied for the current history (a copy when the
  // penalty is on, the input otherwise).
  std::vector<float> penalized(std::span<const float> logits) const;

  const SamplerOptions& options() const { return opt_; }
  static int32_t argmax(std::span<const float> logits);

 private:
  bool penalty_on() const { return opt_.repeat_penalty != 1.0f && opt_.repeat_last_n != 0; }
  SamplerOptions opt_;
  std::mt19937_64 rng_;
  std::deque<int32_t> history_;
};

}  // namespace nl
