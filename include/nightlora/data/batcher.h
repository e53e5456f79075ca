// From examples to batches: a deterministic per-epoch shuffle and padding-free packing.
#pragma once
#include <cstdint>
#include <vector>

#include "nightlora/data/batch.h"
#include "nightlora/data/dataset.h"

namespace nl {

// ShuffleRng (the SplitMix64 generator): a tiny, fully specified generator, so data order is the same on every
// platform and standard library (std::shuffle and the std distributions are not).
struct ShuffleRng {
  uint64_t state;
  explicit ShuffleRng(uint64_t seed) : state(seed) {}
  uint64_t next();
  uint64_t below(uint64_t n);  // uniform in [0, n), unbiased
};

// The order in which a training run visits its examples: an endless stream of epochs, each
// a fresh permutation of 0..n-1 drawn from (seed, epoch). Position p of the stream is
// example at(p); it depends only on (n, seed, p), so a resumed run continues the same order.
class DataOrder {
 public:
  DataOrder(int64_t n_examples, uint64_t seed, bool shuffle = true);
  int64_t at(int64_t pos);
  int64_t epoch_of(int64_t pos) const { return pos / n_; }
  int64_t size() const { return n_; }

 private:
  int64_t n_;
  uint64_t seed_;
  bool shuffle_;
  int64_t cached_epoch_ = -1;
  std::vector<int64_t> perm_;
};

// Packs the given examples back to back (no padding) into one Batch; labels follow the
// examples' supervision masks and never cross a sequence boundary.
Batch pack_batch(const std::vector<Example>& examples, const std::vector<int64_t>& indices);

// The whole data set in file order, `batch_size` sequences per batch (for validation).
std::vector<Batch> batches_in_order(const Dataset& ds, int64_t batch_size);

}  // namespace nl
