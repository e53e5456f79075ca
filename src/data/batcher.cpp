#include "nightlora/data/batcher.h"

#include <algorithm>

#include "nightlora/util/error.h"

namespace nl {

uint64_t ShuffleRng::next() {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t ShuffleRng::below(uint64_t n) {
  // Rejection sampling: drop the top partial range so every residue is equally likely.
  uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  for (;;) {
    uint64_t r = next();
    if (r < limit) return r % n;
  }
}

DataOrder::DataOrder(int64_t n_examples, uint64_t seed, bool shuffle) : n_(n_examples), seed_(seed), shuffle_(shuffle) {
  if (n_ <= 0) fail("data", "cannot order an empty data set");
}

int64_t DataOrder::at(int64_t pos) {
  int64_t epoch = pos / n_;
  if (epoch != cached_epoch_) {
    perm_.resize(static_cast<size_t>(n_));
    for (int64_t i = 0; i < n_; ++i) perm_[static_cast<size_t>(i)] = i;
    if (shuffle_) {
      ShuffleRng rng(seed_ * 0x100000001B3ull + static_cast<uint64_t>(epoch) + 1);
      for (int64_t i = n_ - 1; i > 0; --i)
        std::swap(perm_[static_cast<size_t>(i)], perm_[rng.below(static_cast<uint64_t>(i) + 1)]);
    }
    cached_epoch_ = epoch;
  }
  return perm_[static_cast<size_t>(pos % n_)];
}

Batch pack_batch(const std::vector<Example>& examples, const std::vector<int64_t>& indices) {
  Batch b;
  b.seq_start.push_back(0);
  for (int64_t i : indices) {
    const Example& e = examples.at(static_cast<size_t>(i));
    size_t n = e.tokens.size();
    for (size_t t = 0; t < n; ++t) {
      b.tokens.push_back(e.tokens[t]);
      bool next_supervised = t + 1 < n && e.supervised[t + 1];
      b.labels.push_back(next_supervised ? e.tokens[t + 1] : -1);
    }
    b.seq_start.push_back(static_cast<int64_t>(b.tokens.size()));
  }
  return b;
}

std::vector<Batch> batches_in_order(const Dataset& ds, int64_t batch_size) {
  std::vector<Batch> out;
  int64_t n = static_cast<int64_t>(ds.examples.size());
  for (int64_t s = 0; s < n; s += batch_size) {
    std::vector<int64_t> idx;
    for (int64_t i = s; i < std::min(n, s + batch_size); ++i) idx.push_back(i);
    out.push_back(pack_batch(ds.examples, idx));
  }
  return out;
}

}  // namespace nl
