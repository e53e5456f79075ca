// Incremental inference on the frozen engine: the decoder forward pass over new tokens, with
// a KV cache, for llama / qwen2 / qwen3 models (RMSNorm, RoPE in the model's pairing with
// frequency factors or llama3 scaling, grouped-query causal attention, SwiGLU, QKV bias,
// Q/K norm, tied or untied output head).
//
// Every projection and the output head are products of the frozen engine
// (engine/frozen_engine.h): the same resident tiles training uses, no second copy of the
// weights. A prompt runs in chunks of `prefill_chunk` tokens, each one engine product per
// projection; one new token is a one-token product, which the cpu engine runs through its
// matrix-vector kernels (src/engine/kernels_matvec*). The host ops (norms, RoPE, attention
// over the cache, SwiGLU, biases, the LoRA branch) run on the decoder's thread pool.
// An optional LoRA adapter adds scale·(x·Aᵀ)·Bᵀ to each enabled projection on the fly, so an
// adapter can be tried without merging it into the weights.
//
// Numbers: `precision` is the engine's mode of every product. Int8 (the default: activations
// quantized per 32 values, integer dot products, as llama.cpp runs Q4_0/Q8_0) moves logits
// a little; F32 is the exact path the tests compare with PyTorch, llama.cpp's dequantized
// runs and the reference decoder (reference_decoder.h). The KV cache holds keys and values
// as f16 by default (half the memory), f32 on request. How far each moves the logits of
// the tiny real models is measured in docs/ARCHITECTURE.md (Inference).
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "nightlora/engine/frozen_engine.h"
#include "nightlora/modelio/model.h"

namespace nl {

struct LoraAdapter;
struct DecoderWorkspace;
class DecodeBatch;

// Element type of the KV cache.
enum class KvType : uint8_t { F16 = 0, F32 = 1 };
const char* kv_type_name(KvType t);          // "f16" | "f32"
KvType parse_kv_type(const std::string& s);  // throws nl::Error naming the accepted values

struct DecoderOptions {
  int threads = 0;          // 0: all hardware threads (a borrowed engine: its threads)
  int64_t max_context = 0;  // 0: the model's context length
  // Numeric mode of every engine product (see Precision): Int8 is the fast one; F32 keeps
  // the exact path (tests comparing with PyTorch / llama.cpp / golden files use it).
  Precision precision = Precision::Int8;
  KvType kv_type = KvType::F16;
  // Engine backend when the decoder makes its own engine ("cpu", "vulkan", "auto").
  std::string backend = "cpu";
  // Prompt tokens per engine product: a longer prompt runs in chunks of this many.
  int64_t prefill_chunk = 256;

  // f32 products and an f32 cache: the numbers the exactness tests compare.
  static DecoderOptions exact(int threads = 0) {
    DecoderOptions o;
    o.threads = threads;
    o.precision = Precision::F32;
    o.kv_type = KvType::F32;
    return o;
  }
};

class Decoder {
 public:
  // Makes and owns an engine for `model` (EngineOptions from opt: backend, threads).
  // `model` (and the adapter, when set) must outlive the decoder.
  explicit Decoder(const Model& model, const DecoderOptions& opt = {});
  // Borrows `engine`, made for `model` (training, serve or a C API share one resident
  // model): it must outlive the decoder, and nobody else may submit to it while a forward
  // runs. opt.threads = 0 takes the engine's thread count for the host ops; opt.backend is
  // not used.
  Decoder(const Model& model, FrozenEngine& engine, const DecoderOptions& opt = {});
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

  // Runs a tree of continuations of the cached context in one block: token i's parent is
  // tokens[parent[i]] (parent[i] < i), or the cached context when parent[i] is -1; it sits at
  // position n_past() + its depth (0 for a child of the context) and attends to the cached
  // positions, its ancestors and itself. So each root-to-token path gets the logits a forward
  // of that path after the cache would give; every projection is one engine product over all
  // the tree's tokens (the candidates of a tag scorer at the cost of one prompt block rather
  // than one small forward each). Returns every token's logits (size x vocab, row-major). The
  // cache keeps n_past() positions afterwards (nothing of the tree is kept), but needs room
  // for n_past() + size while the tree runs.
  // Exactness: where the engine's products give a row the same bits whatever rows run with
  // it (the cpu engine in every mode), row i has the bits of the last row of forward(path to
  // i, all_logits) after the same cache. Throws nl::Error for a parent out of range, a token
  // outside the vocabulary or a context without room.
  std::vector<float> forward_tree(std::span<const int32_t> tokens, std::span<const int32_t> parent);

  int64_t n_past() const;
  int64_t max_context() const;
  // Forgets the cached context: the next forward starts at position 0.
  void reset();
  // Keeps only the first n cached positions (0 <= n <= n_past()): the next forward continues
  // at position n. Lets several continuations of one prompt be run without recomputing it.
  // Throws nl::Error for n outside that range.
  void truncate(int64_t n);

  const Model& model() const;
  const DecoderOptions& options() const;
  FrozenEngine& engine();
  // Bytes the KV cache holds now (it is allocated for max_context when that is given,
  // else it grows by doubling up to the model's context): nl::kv_cache_bytes (see
  // inference_memory.h) of kv_cache_positions().
  size_t kv_cache_bytes() const;
  int64_t kv_cache_positions() const;  // positions the cache has room for now

 private:
  friend class DecodeBatch;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One decode step for several sequences at once (a server's concurrent completions): each
// sequence is a Decoder with its own KV cache, position and adapter (none, the same or each
// its own), and advances by one token. Every projection and the output head is one engine
// product of nt = number of sequences rows, so the engine reads each weight once for all of
// them (the cpu engine's matrix-vector kernels take up to 4 tokens per read of a tile);
// attention runs per sequence over its own cache, and each sequence's LoRA branch on its own
// row.
//
// Exactness: row i of a step's logits has the bits sequences[i]->forward({tokens[i]}) would
// return, in every precision: the products run in the mode one decoder's one-token step
// asks for, and the engine's products give each row the same bits whatever rows it is
// multiplied with (kernels_matvec.h); every other op is per row or per sequence. So a
// sequence's greedy tokens do not depend on which others share its steps
// (tests/infer/decode_batch_test.cpp).
class DecodeBatch {
 public:
  // The batch's host ops run on its own pool of `threads` (0: the engine's thread count).
  explicit DecodeBatch(FrozenEngine& engine, int threads = 0);
  ~DecodeBatch();
  DecodeBatch(const DecodeBatch&) = delete;
  DecodeBatch& operator=(const DecodeBatch&) = delete;

  // Feeds tokens[i] to sequences[i] at its n_past() (which then grows by one) and returns
  // the next-token logits of each, sequences.size() x vocab, row-major. The decoders must be
  // distinct, on this batch's engine and one nl::Model object, made with the same precision
  // (their KV types may differ). As Decoder::forward, nobody else may submit
  // to the engine meanwhile. Throws nl::Error for a decoder that does not fit, a token outside
  // the vocabulary or a full context (before any sequence has moved).
  std::vector<float> step(std::span<Decoder* const> sequences, std::span<const int32_t> tokens);

  int threads() const;

 private:
  FrozenEngine& engine_;
  std::unique_ptr<DecoderWorkspace> ws_;
};

}  // namespace nl
