// The memory inference holds, sized from the model's shapes: the KV cache (K and V after
// RoPE, n_layer x kv_dim values per position, f16 or f32), the activations of one block of
// new tokens, and for a running decoder the one line generate and chat print (the model in
// the engine, the cache, the activations). The decoder sizes its cache with kv_cache_bytes,
// and serve's request budget (serve_memory_budget) is built on inference_request_bytes, so
// the printed figures, the allocation and the budget are one rule
// (tests/infer/inference_memory_test.cpp checks them against the bytes really allocated).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "nightlora/infer/decoder.h"
#include "nightlora/modelio/model.h"

namespace nl {

// Bytes of a KV cache holding `positions` positions: K and V, n_layer x kv_dim values each,
// 2 bytes (f16) or 4 (f32).
size_t kv_cache_bytes(const ModelConfig& c, int64_t positions, KvType type);

// A bound on the activations of one block of `tokens` new tokens (a prompt chunk): the
// block's rows of every layer's inputs and outputs (3 d_model + 2 q_dim + 2 kv_dim + 2 d_ff +
// 64 floats per token) and two rows of logits.
size_t decoder_activation_bytes(const ModelConfig& c, int64_t tokens);

// One request of `positions` positions (prompt + new tokens, at most the model's context):
// its KV cache and the activations of one prompt chunk of `chunk` tokens.
size_t inference_request_bytes(const ModelConfig& c, int64_t positions, KvType type, int64_t chunk = 256);

// "memory: model 267.5 MiB in the cpu engine (int8 products, 2 threads); KV cache f16
// 6.0 MiB for 512 positions (24 layers x 128 values x K,V); activations up to 5.1 MiB per
// 256-token chunk": the decoder's figures now (the cache as allocated: sized for
// max_context when given, else grown to what the context reached so far).
std::string describe_inference_memory(Decoder& decoder);

}  // namespace nl
