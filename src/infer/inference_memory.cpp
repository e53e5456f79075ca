// Memory sizes of inference (inference_memory.h): one rule for the decoder's allocation, the
// line generate and chat print, and serve's request budget.
#include "nightlora/infer/inference_memory.h"

#include <algorithm>
#include <cstdio>

#include "nightlora/host/memory_plan.h"

namespace nl {

size_t kv_cache_bytes(const ModelConfig& c, int64_t positions, KvType type) {
  const size_t elem = type == KvType::F16 ? 2 : 4;
  return static_cast<size_t>(std::max<int64_t>(positions, 0) * c.kv_dim() * c.n_layer) * 2 * elem;
}

size_t decoder_activation_bytes(const ModelConfig& c, int64_t tokens) {
  const int64_t per_token = 3 * c.d_model + 2 * c.q_dim() + 2 * c.kv_dim() + 2 * c.d_ff + 64;
  return static_cast<size_t>(tokens * per_token + 2 * c.vocab) * sizeof(float);
}

size_t inference_request_bytes(const ModelConfig& c, int64_t positions, KvType type, int64_t chunk) {
  const int64_t p = std::min<int64_t>(c.context, positions);
  return kv_cache_bytes(c, p, type) + decoder_activation_bytes(c, std::min(chunk, std::max<int64_t>(p, 1)));
}

namespace {
// "48.0 MiB", or "320.0 KiB" under a MiB (the tiny models' caches).
std::string size_text(size_t bytes) {
  if (bytes >= (size_t{1} << 20)) return format_mib(bytes);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(bytes) / 1024.0);
  return buf;
}
}  // namespace

std::string describe_inference_memory(Decoder& d) {
  const ModelConfig& c = d.model().config;
  const DecoderOptions& o = d.options();
  const int64_t positions = d.kv_cache_positions(), chunk = std::min(o.prefill_chunk, d.max_context());
  std::string s = "memory: model " + size_text(d.engine().resident_bytes()) + " in the " + d.engine().backend() +
                  " engine (" + precision_name(o.precision) + " products, " + std::to_string(d.engine().threads()) +
                  (d.engine().threads() == 1 ? " thread" : " threads") + "); KV cache " + kv_type_name(o.kv_type) + " " + size_text(d.kv_cache_bytes()) + " for " +
                  std::to_string(positions) + " positions (" + std::to_string(c.n_layer) + " layers x " +
                  std::to_string(c.kv_dim()) + " values x K,V)";
  if (positions < d.max_context())
    s += ", growing to " + size_text(kv_cache_bytes(c, d.max_context(), o.kv_type)) + " at " +
         std::to_string(d.max_context()) + " positions";
  s += "; activations up to " + size_text(decoder_activation_bytes(c, chunk)) + " per " + std::to_string(chunk) +
       "-token chunk";
  return s;
}

}  // namespace nl
