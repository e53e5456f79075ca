// The reference decoder: the original row-by-row inference path, kept as the oracle the
// engine-backed Decoder (decoder.h) is tested against. Every product re-expands each weight
// row to f32 through nl::dequantize_row, straight from the (possibly quantized) mapped file,
// and takes plain dot products; the KV cache is f32. Same forward pass, same API as Decoder
// (llama / qwen2 / qwen3, RoPE variants, GQA, SwiGLU, QKV bias, Q/K norm, tied head, LoRA
// on the fly), but slow: use it in tests, never in a product path.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "nightlora/infer/decoder.h"
#include "nightlora/modelio/model.h"

namespace nl {

struct LoraAdapter;

class ReferenceDecoder {
 public:
  // Uses opt.threads and opt.max_context; precision, kv_type and backend do not apply
  // (always f32 products and an f32 cache). `model` (and the adapter) must outlive it.
  explicit ReferenceDecoder(const Model& model, const DecoderOptions& opt = {});
  ~ReferenceDecoder();
  ReferenceDecoder(const ReferenceDecoder&) = delete;
  ReferenceDecoder& operator=(const ReferenceDecoder&) = delete;

  // As Decoder's.
  void set_adapter(const LoraAdapter* adapter);
  std::vector<float> forward(std::span<const int32_t> tokens, bool all_logits = false);
  int64_t n_past() const;
  int64_t max_context() const;
  void reset();
  void truncate(int64_t n);
  const Model& model() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nl
