// Choosing the next token from logits: greedy (temperature 0) or sampled with temperature,
// top-k and top-p (nucleus), applied in that order as Hugging Face's generate() does
// (scale by 1/temperature, keep the k most likely, then the smallest set whose probability
// reaches p). Sampling is deterministic for a seed: the random stream is our own
// (mt19937_64 bits mapped to [0, 1)), not a library distribution that may differ by platform.
#pragma once
#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

namespace nl {

struct SamplerOptions {
  float temperature = 0.8f;  // <= 0: greedy
  int top_k = 40;            // <= 0: no limit
  float top_p = 0.95f;       // >= 1: no limit
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(const SamplerOptions& opt);

  // The next token. Greedy picks the highest logit (the lowest id among ties).
  int32_t sample(std::span<const float> logits);

  // The candidates sampling would draw from, with their probabilities (summing to 1), most
  // likely first (ties: lower id first). Greedy gives the argmax with probability 1.
  std::vector<std::pair<int32_t, float>> candidates(std::span<const float> logits) const;

  static int32_t argmax(std::span<const float> logits);

 private:
  SamplerOptions opt_;
  std::mt19937_64 rng_;
};

}  // namespace nl
