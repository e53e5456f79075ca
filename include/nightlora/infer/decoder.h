// Incremental inference: the decoder forward pass over new tokens, with a KV cache, for
// llama / qwen2 / qwen3 models (RMSNorm, RoPE in the model's pairing with frequency factors
// or llama3 scaling, grouped-query causal attention, SwiGLU, QKV bias, Q/K norm, tied or
// untied output head). Weight matrices are read row by row through nl::dequantize_row,
// straight from the (possibly quantized) mapped file: no dequantized copy of a matrix is
// ever made. An optional LoRA adapter adds scale·(x·Aᵀ)·Bᵀ to each enabled projection, so
// an adapter can be tried without merging it into the weights.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "nightlora/modelio/model.h"

namespace nl {

struct LoraAdapter;

struct DecoderOptions {
  int threads = 0;          // 0: all hardware threads
  int64_t max_context = 0;  // 0: the model's context length
};

class Decoder {
 public:
  // `model` (and the adapter, when set) must outlive the decoder.
  explicit Decoder(const Model& model, const DecoderOptions& opt = {});
  ~Decoder();
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;

  // Uses `adapter` (nullptr: none) from the next forward on. Throws nl::Error when its
  // layer count or any enabled pair's shapes do not fit the model.
  void set_adapter(const LoraAdapter* adapter);

  // Runs `tokens` at positions n_past() .. n_past() + size - 1, appending them to the KV
  // cache. Returns the logits of the last token (vocab values), or of every new token
  // (size x vocab, row-major) when all_logits. Throws nl::Error for a token id outside the
  // vocabulary or when the context would overflow.
  std::vector<float> forward(std::span<const int32_t> tokens, bool all_logits = false);

  int64_t n_past() const;
  int64_t max_context() const;
  // Forgets the cached context: the next forward starts at position 0.
  void reset();
  // Keeps only the first n cached positions (0 <= n <= n_past()): the next forward continues
  // at position n. Lets several continuations of one prompt be run without recomputing it.
  // Throws nl::Error for n outside that range.
  void truncate(int64_t n);

  const Model& model() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nl
