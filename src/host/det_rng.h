// Deterministic random numbers for the host: a SplitMix64 stream for initialisation and a
// counter-based hash for dropout masks (so the mask of element (layer, proj, t, c) can be
// regenerated during recomputation without storing it). Same results on every platform.
#pragma once
#include <cstdint>

namespace nl {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Combines values into one well-mixed 64-bit key.
inline uint64_t hash_combine(uint64_t h, uint64_t v) { return splitmix64(h ^ splitmix64(v + 0x632BE59BD9B4E019ull)); }

// Uniform in [0, 1) with 24 bits, exactly representable as a float.
inline float uniform01(uint64_t bits) { return static_cast<float>(bits >> 40) * (1.0f / 16777216.0f); }

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    state_ += 0x9E3779B97F4A7C15ull;
    uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  float uniform() { return uniform01(next()); }

 private:
  uint64_t state_;
};

}  // namespace nl
