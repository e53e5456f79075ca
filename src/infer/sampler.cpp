#include "nightlora/infer/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <unordered_set>

#include "nightlora/util/error.h"

namespace nl {

Sampler::Sampler(const SamplerOptions& opt) : opt_(opt), rng_(opt.seed) {
  if (std::isnan(opt.temperature)) fail("sampler", "temperature is NaN");
  if (!(opt.top_p > 0)) fail("sampler", "top-p must be in (0, 1]", "use e.g. --top-p 0.95, or 1 to disable it");
  if (!(opt.min_p >= 0 && opt.min_p <= 1)) fail("sampler", "min-p must be in [0, 1]", "use e.g. --min-p 0.05, or 0 to disable it");
  if (!(opt.repeat_penalty > 0) || std::isinf(opt.repeat_penalty))
    fail("sampler", "the repetition penalty must be a positive number", "use e.g. --repeat-penalty 1.1, or 1 to disable it");
  if (opt.repeat_last_n < -1)
    fail("sampler", "repeat-last-n must be -1 (the whole context), 0 (off) or a window length",
         "use e.g. --repeat-last-n 64");
}

int32_t Sampler::argmax(std::span<const float> logits) {
  if (logits.empty()) fail("sampler", "no logits to choose from");
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[static_cast<size_t>(best)]) best = static_cast<int32_t>(i);
  return best;
}

void Sampler::accept(int32_t id) {
  if (!penalty_on()) return;
  history_.push_back(id);
  if (opt_.repeat_last_n > 0 && history_.size() > static_cast<size_t>(opt_.repeat_last_n)) history_.pop_front();
}

void Sampler::accept(std::span<const int32_t> ids) {
  for (int32_t id : ids) accept(id);
}

void Sampler::clear_history() { history_.clear(); }

std::vector<float> Sampler::penalized(std::span<const float> logits) const {
  std::vector<float> out(logits.begin(), logits.end());
  if (!penalty_on()) return out;
  // Each distinct token once, as llama.cpp and Hugging Face do (a token seen five times is
  // penalised as much as one seen once: that is what frequency penalties are for).
  std::unordered_set<int32_t> seen;
  for (int32_t id : history_) {
    if (id < 0 || static_cast<size_t>(id) >= out.size() || !seen.insert(id).second) continue;
    float& l = out[static_cast<size_t>(id)];
    l = l > 0 ? l / opt_.repeat_penalty : l * opt_.repeat_penalty;
  }
  return out;
}

std::vector<std::pair<int32_t, float>> Sampler::candidates(std::span<const float> raw_logits) const {
  std::vector<float> penalised;
  std::span<const float> logits = raw_logits;
  if (penalty_on()) logits = penalised = penalized(raw_logits);
  if (opt_.temperature <= 0) return {{argmax(logits), 1.0f}};
  const int32_t n = static_cast<int32_t>(logits.size());
  std::vector<int32_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  // NaN logits (from a damaged model) count as -inf, so the order stays a strict weak order.
  auto value = [&](int32_t i) { return std::isnan(logits[i]) ? -INFINITY : logits[i]; };
  auto more_likely = [&](int32_t a, int32_t b) { return value(a) > value(b) || (value(a) == value(b) && a < b); };
  int32_t keep = opt_.top_k > 0 ? std::min(opt_.top_k, n) : n;
  std::partial_sort(order.begin(), order.begin() + keep, order.end(), more_likely);
  order.resize(static_cast<size_t>(keep));

  // Softmax of logits / temperature over the top-k, in double so tiny probabilities survive.
  const double mx = value(order[0]);
  if (std::isinf(mx)) return {{order[0], 1.0f}};  // nothing has a finite logit: no distribution to draw from
  std::vector<double> p(order.size());
  double sum = 0;
  for (size_t i = 0; i < order.size(); ++i) sum += p[i] = std::exp((value(order[i]) - mx) / opt_.temperature);

  // Nucleus: the smallest prefix whose probability reaches top_p (at least one token).
  size_t cut = order.size();
  if (opt_.top_p < 1) {
    double cum = 0;
    for (size_t i = 0; i < order.size(); ++i) {
      cum += p[i] / sum;
      if (cum >= opt_.top_p) {
        cut = i + 1;
        break;
      }
    }
  }
  // Min-p: a token stays when its probability is at least min_p times the top one's (p[0],
  // the most likely; the ratio needs no normalisation).
  if (opt_.min_p > 0)
    while (cut > 1 && p[cut - 1] < static_cast<double>(opt_.min_p) * p[0]) --cut;
  while (cut > 1 && p[cut - 1] == 0) --cut;  // tokens that cannot be drawn (e.g. -inf logits)
  double kept = 0;
  for (size_t i = 0; i < cut; ++i) kept += p[i];
  std::vector<std::pair<int32_t, float>> out(cut);
  for (size_t i = 0; i < cut; ++i) out[i] = {order[i], static_cast<float>(p[i] / kept)};
  return out;
}

int32_t Sampler::sample(std::span<const float> logits) {
  if (opt_.temperature <= 0) return penalty_on() ? argmax(penalized(logits)) : argmax(logits);
  const auto cand = candidates(logits);
  // 53 random bits -> a double in [0, 1), identical on every platform for a given seed.
  const double r = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
  double cum = 0;
  for (const auto& [id, prob] : cand) {
    cum += prob;
    if (r < cum) return id;
  }
  return cand.back().first;  // rounding left r just above the last cumulative sum
}

}  // namespace nl
