// Loads a llama.cpp GGUF model (llama, qwen2, qwen3): the configuration from the `<arch>.*`
// metadata, weight views straight into the memory-mapped file, and the tokenizer from the
// `tokenizer.ggml.*` metadata. Every tensor is checked against the configuration before
// anything uses it, so a damaged or mismatched file fails here with a message naming the
// tensor, instead of crashing later in a matrix product.
#include <cmath>
#include <string>
#include <vector>

#include "loaders.h"
#include "nightlora/util/strformat.h"
#include "nightlora/modelio/gguf.h"
#include "nightlora/tokenizer/tokenizer.h"
#include "nightlora/util/error.h"

namespace nl {
namespace {

Arch parse_arch(const GgufFile& f) {
  std::string a = f.get_str("general.architecture");
  if (a == "llama") return Arch::Llama;
  if (a == "qwen2") return Arch::Qwen2;
  if (a == "qwen3") return Arch::Qwen3;
  fail(f.path(), "architecture '" + a + "' is not supported",
       "nightlora runs llama, qwen2 and qwen3 models (general.architecture)");
}

// A positive integer metadata value that must fit the shapes we allocate.
int64_t positive(const GgufFile& f, const std::string& key, uint64_t limit = (uint64_t{1} << 31)) {
  uint64_t v = f.get_uint(key);
  if (v == 0 || v > limit)
    fail(f.path(), "metadata '" + key + "' = " + std::to_string(v) + " is out of range",
         "the file's model configuration is damaged");
  return static_cast<int64_t>(v);
}

ModelConfig read_config(const GgufFile& f) {
  ModelConfig c;
  c.arch = parse_arch(f);
  const std::string a = arch_name(c.arch);
  c.name = f.get_str("general.name", "");
  c.n_layer = positive(f, a + ".block_count", 4096);
  c.d_model = positive(f, a + ".embedding_length");
  c.n_head = positive(f, a + ".attention.head_count", 65536);
  c.n_kv_head = f.has(a + ".attention.head_count_kv") ? positive(f, a + ".attention.head_count_kv", 65536) : c.n_head;
  c.d_ff = positive(f, a + ".feed_forward_length");
  if (c.n_head % c.n_kv_head != 0)
    fail(f.path(), "attention.head_count " + std::to_string(c.n_head) + " is not a multiple of head_count_kv " +
                       std::to_string(c.n_kv_head),
         "grouped-query attention needs whole groups; the file's configuration is damaged");
  if (f.has(a + ".attention.key_length")) {
    c.head_dim = positive(f, a + ".attention.key_length", 65536);
  } else {
    if (c.d_model % c.n_head != 0)
      fail(f.path(), "embedding_length is not a multiple of attention.head_count and attention.key_length is absent");
    c.head_dim = c.d_model / c.n_head;
  }
  if (c.head_dim % 2 != 0) fail(f.path(), "head dimension " + std::to_string(c.head_dim) + " is odd", "RoPE rotates pairs");
  if (f.has(a + ".attention.value_length") && f.get_uint(a + ".attention.value_length") != uint64_t(c.head_dim))
    fail(f.path(), "attention.value_length differs from attention.key_length", "such models are not supported");
  c.context = f.has(a + ".context_length") ? positive(f, a + ".context_length", uint64_t{1} << 24) : 2048;
  c.rms_eps = static_cast<float>(f.get_float(a + ".attention.layer_norm_rms_epsilon", 1e-5));
  c.rope_theta = static_cast<float>(f.get_float(a + ".rope.freq_base", 10000.0));
  if (!(c.rms_eps > 0) || !(c.rope_theta > 0)) fail(f.path(), "rms epsilon and rope.freq_base must be positive");
  // llama.cpp's `llama` graph rotates adjacent pairs (its converter permuted Q/K rows into
  // Meta's layout); qwen2/qwen3 use NeoX-style RoPE on the Hugging Face row layout.
  c.rope_style = c.arch == Arch::Llama ? RopeStyle::Adjacent : RopeStyle::HalfSplit;
  if (f.get_str(a + ".rope.scaling.type", "none") == "llama3" || f.has(a + ".rope.scaling.low_freq_factor")) {
    c.rope_scaling.type = "llama3";
    c.rope_scaling.factor = static_cast<float>(f.get_float(a + ".rope.scaling.factor", 1.0));
    c.rope_scaling.low_freq_factor = static_cast<float>(f.get_float(a + ".rope.scaling.low_freq_factor", 1.0));
    c.rope_scaling.high_freq_factor = static_cast<float>(f.get_float(a + ".rope.scaling.high_freq_factor", 4.0));
    c.rope_scaling.original_context =
        static_cast<int64_t>(f.get_uint(a + ".rope.scaling.original_context_length", 8192));
    const RopeScaling& s = c.rope_scaling;
    if (!(s.factor > 0) || !(s.low_freq_factor > 0) || !(s.high_freq_factor > s.low_freq_factor) ||
        s.original_context <= 0)
      fail(f.path(), "llama3 rope scaling needs factor > 0, 0 < low_freq_factor < high_freq_factor and a positive "
                     "original_context_length",
           "the rope.scaling.* metadata is damaged");
  }
  if (f.has(a + ".rope.dimension_count") && f.get_uint(a + ".rope.dimension_count") != uint64_t(c.head_dim))
    fail(f.path(), "rope.dimension_count " + std::to_string(f.get_uint(a + ".rope.dimension_count")) +
                       " differs from the head dimension " + std::to_string(c.head_dim),
         "partial RoPE is not supported");
  c.qkv_bias = c.arch == Arch::Qwen2;
  c.qk_norm = c.arch == Arch::Qwen3;
  return c;
}

// Looks tensors up and checks them against the shapes the configuration implies.
class TensorBinder {
 public:
  explicit TensorBinder(const GgufFile& f) : f_(f) {}

  TensorView get(const std::string& name, const std::vector<int64_t>& expected, bool required = true) const {
    const GgufTensorInfo* t = f_.find_tensor(name);
    if (!t) {
      if (required)
        fail(f_.path(), "tensor '" + name + "' is missing (expected shape " + shape_string(expected) + ")",
             "the file is incomplete or not a llama.cpp-style model");
      return {};
    }
    if (t->ne != expected)
      fail(f_.path(), "tensor '" + name + "' has shape " + shape_string(t->ne) + ", expected " + shape_string(expected),
           "the tensor does not match the model configuration in the metadata");
    const QTypeInfo& qi = qtype_info(t->type);
    if (!qi.supported)
      fail(f_.path(), "tensor '" + name + "' has type " + qi.name + ", which nightlora cannot read",
           "re-quantize the model to f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_K, q5_K or q6_K");
    if (expected.size() == 1 && t->type != QType::F32 && t->type != QType::F16 && t->type != QType::BF16)
      fail(f_.path(), "vector tensor '" + name + "' has quantized type " + qi.name, "norms and biases must be f32/f16/bf16");
    TensorView v;
    v.name = name;
    v.type = t->type;
    v.ne = t->ne;
    v.data = t->data;
    v.nbytes = t->nbytes;
    return v;
  }

 private:
  const GgufFile& f_;
};

}  // namespace

std::unique_ptr<Model> load_gguf_model(const std::string& path) {
  auto m = std::make_unique<Model>();
  m->gguf_ = GgufFile::open(path);
  const GgufFile& f = *m->gguf_;
  m->source_path = path;
  m->source_format = "gguf";
  ModelConfig& c = m->config;
  c = read_config(f);

  const GgufTensorInfo* embd = f.find_tensor("token_embd.weight");
  if (!embd) fail(path, "tensor 'token_embd.weight' is missing", "the file is incomplete");
  if (embd->ne.size() != 2 || embd->ne[0] != c.d_model || embd->ne[1] <= 0)
    fail(path, "tensor 'token_embd.weight' has shape " + shape_string(embd->ne) + ", expected [" +
                   std::to_string(c.d_model) + ", vocab]");
  c.vocab = embd->ne[1];
  if (c.name.empty()) c.name = path;

  TensorBinder b(f);
  const int64_t d = c.d_model, q = c.q_dim(), kv = c.kv_dim(), ff = c.d_ff, hd = c.head_dim;
  ModelWeights& w = m->weights;
  w.tok_embd = b.get("token_embd.weight", {d, c.vocab});
  w.output_norm = b.get("output_norm.weight", {d});
  w.output = b.get("output.weight", {d, c.vocab}, /*required=*/false);
  c.tied_output = !w.output.present();
  if (c.tied_output) w.output = w.tok_embd;

  if (f.find_tensor("rope_freqs.weight")) {
    TensorView v = b.get("rope_freqs.weight", {hd / 2});
    c.rope_freq_factors.resize(static_cast<size_t>(hd / 2));
    dequantize_row(v.type, v.data, c.rope_freq_factors.data(), hd / 2);
    for (float x : c.rope_freq_factors)
      if (!(x > 0) || !std::isfinite(x)) fail(path, "tensor 'rope_freqs.weight' holds a non-positive or non-finite factor");
  }

  w.layers.resize(static_cast<size_t>(c.n_layer));
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    LayerWeights& l = w.layers[static_cast<size_t>(i)];
    l.attn_norm = b.get(p + "attn_norm.weight", {d});
    l.wq = b.get(p + "attn_q.weight", {d, q});
    l.wk = b.get(p + "attn_k.weight", {d, kv});
    l.wv = b.get(p + "attn_v.weight", {d, kv});
    l.wo = b.get(p + "attn_output.weight", {q, d});
    l.ffn_norm = b.get(p + "ffn_norm.weight", {d});
    l.w_gate = b.get(p + "ffn_gate.weight", {d, ff});
    l.w_up = b.get(p + "ffn_up.weight", {d, ff});
    l.w_down = b.get(p + "ffn_down.weight", {ff, d});
    if (c.qkv_bias) {
      l.bq = b.get(p + "attn_q.bias", {q});
      l.bk = b.get(p + "attn_k.bias", {kv});
      l.bv = b.get(p + "attn_v.bias", {kv});
    }
    if (c.qk_norm) {
      l.q_norm = b.get(p + "attn_q_norm.weight", {hd});
      l.k_norm = b.get(p + "attn_k_norm.weight", {hd});
    }
  }

  m->tokenizer = Tokenizer::from_gguf(f);
  if (m->tokenizer && m->tokenizer->vocab_size() > c.vocab)
    fail(path, "the tokenizer has " + std::to_string(m->tokenizer->vocab_size()) + " tokens but the embedding only " +
                   std::to_string(c.vocab) + " rows",
         "tokenizer and weights do not belong together");
  return m;
}

}  // namespace nl
