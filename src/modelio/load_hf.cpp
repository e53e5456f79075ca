// Loads a Hugging Face model folder: config.json, the weights from model.safetensors (or the
// shards named by model.safetensors.index.json) and the tokenizer from tokenizer.json.
// Weights are views into the mapped safetensors files, which the Model keeps alive; their
// Q/K rows stay in Hugging Face's layout, so the configuration says RopeStyle::HalfSplit.
#include <filesystem>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "loaders.h"
#include "nightlora/util/strformat.h"
#include "nightlora/modelio/convert.h"
#include "nightlora/modelio/gguf_names.h"
#include "nightlora/modelio/safetensors.h"
#include "nightlora/tokenizer/tokenizer.h"
#include "nightlora/util/error.h"
#include "nightlora/util/json_read.h"

namespace nl {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const char* const kConfigHint = "the model configuration is damaged: compare it with the model's published config.json";

Arch parse_architecture(const JsonPlace& c) {
  std::string name;
  if (std::optional<JsonPlace> a = c.find("architectures"); a && !a->array().empty()) name = a->item(0).string();
  if (name == "LlamaForCausalLM") return Arch::Llama;
  if (name == "Qwen2ForCausalLM") return Arch::Qwen2;
  if (name == "Qwen3ForCausalLM") return Arch::Qwen3;
  const std::string model_type = c.string_or("model_type", "");
  if (name.empty()) {
    if (model_type == "llama") return Arch::Llama;
    if (model_type == "qwen2") return Arch::Qwen2;
    if (model_type == "qwen3") return Arch::Qwen3;
  }
  fail(c.where(), "architecture '" + (name.empty() ? model_type : name) + "' is not supported",
       "nightlora loads LlamaForCausalLM, Qwen2ForCausalLM and Qwen3ForCausalLM folders");
}

// A size config.json must give: a positive integer, at most `limit`.
int64_t required_size(const JsonPlace& c, const char* key, int64_t limit = int64_t{1} << 31) {
  if (!c.has(key)) c.member(key, c.value()).fail("missing (a positive integer)", "the model configuration is incomplete");
  return c.key(key).integer(1, limit);
}

ModelConfig read_hf_config(const fs::path& dir) {
  const fs::path path = dir / "config.json";
  if (!fs::exists(path)) fail(dir.string(), "no config.json in the folder", "pass a Hugging Face model folder (config.json + model.safetensors)");
  const json j = read_json_file(path.string(), kConfigHint);
  const JsonPlace r(j, path.string(), kConfigHint);
  r.object();

  ModelConfig c;
  c.arch = parse_architecture(r);
  c.name = fs::path(dir).filename().string();
  if (c.name.empty()) c.name = fs::path(dir).parent_path().filename().string();
  c.d_model = required_size(r, "hidden_size");
  c.n_layer = required_size(r, "num_hidden_layers", 4096);
  c.n_head = required_size(r, "num_attention_heads", 65536);
  c.n_kv_head = r.integer_or("num_key_value_heads", c.n_head, 1, 65536);
  c.d_ff = required_size(r, "intermediate_size");
  c.vocab = required_size(r, "vocab_size");
  c.context = r.integer_or("max_position_embeddings", 2048, 1, int64_t{1} << 24);
  if (c.n_head % c.n_kv_head != 0)
    fail(path.string(), "num_attention_heads " + std::to_string(c.n_head) + " is not a multiple of num_key_value_heads " +
                            std::to_string(c.n_kv_head));
  if (r.has("head_dim")) {
    c.head_dim = r.key("head_dim").integer(1, 65536);
  } else {
    if (c.d_model % c.n_head != 0) fail(path.string(), "hidden_size is not a multiple of num_attention_heads and head_dim is absent");
    c.head_dim = c.d_model / c.n_head;
  }
  if (c.head_dim % 2 != 0) fail(path.string(), "head dimension " + std::to_string(c.head_dim) + " is odd", "RoPE rotates pairs");
  // Positive and no larger than a float holds: both are kept as floats.
  const double tiny = std::numeric_limits<float>::min(), huge = std::numeric_limits<float>::max();
  c.rms_eps = static_cast<float>(r.number_or("rms_norm_eps", 1e-6, tiny, huge));
  c.rope_theta = static_cast<float>(r.number_or("rope_theta", 10000.0, tiny, huge));
  c.rope_style = RopeStyle::HalfSplit;
  c.tied_output = r.boolean_or("tie_word_embeddings", false);
  // Qwen2 always has Q/K/V biases; Llama and Qwen3 have them only with attention_bias.
  c.qkv_bias = c.arch == Arch::Qwen2;
  if (r.boolean_or("attention_bias", false)) {
    if (c.arch == Arch::Qwen2) {
      // already on
    } else {
      fail(path.string(), "\"attention_bias\": true is not supported for this architecture",
           "only Qwen2 models (always with Q/K/V biases) are supported with attention biases");
    }
  }
  c.qk_norm = c.arch == Arch::Qwen3;
  if (r.boolean_or("mlp_bias", false)) fail(path.string(), "\"mlp_bias\": true is not supported", "the FFN must be bias-free SwiGLU");
  std::string act = r.string_or("hidden_act", "silu");
  if (act != "silu") fail(path.string(), "\"hidden_act\": \"" + act + "\" is not supported", "the FFN must be SwiGLU (silu)");

  if (std::optional<JsonPlace> s = r.find("rope_scaling")) {
    s->object();
    const std::string type = s->has("rope_type") ? s->key("rope_type").string() : s->string_or("type", "");
    if (type == "default") {
      // no scaling
    } else if (type == "llama3") {
      c.rope_scaling.type = "llama3";
      c.rope_scaling.factor = static_cast<float>(s->number_or("factor", 8.0, tiny, huge));
      c.rope_scaling.low_freq_factor = static_cast<float>(s->number_or("low_freq_factor", 1.0, -huge, huge));
      c.rope_scaling.high_freq_factor = static_cast<float>(s->number_or("high_freq_factor", 4.0, -huge, huge));
      c.rope_scaling.original_context = s->integer_or("original_max_position_embeddings", 8192, 1, int64_t{1} << 24);
      if (!(c.rope_scaling.high_freq_factor > c.rope_scaling.low_freq_factor))
        fail(s->where(), "rope_scaling needs high_freq_factor > low_freq_factor");
    } else {
      fail(path.string(), "rope_scaling type '" + type + "' is not supported", "supported: none and llama3");
    }
  }
  return c;
}

// The weight files of the folder, each mapped once, and where each tensor lives.
class WeightFiles {
 public:
  explicit WeightFiles(const fs::path& dir) {
    const fs::path single = dir / "model.safetensors";
    const fs::path index = dir / "model.safetensors.index.json";
    if (fs::exists(index)) {
      const char* hint = "the shard index is damaged: download model.safetensors.index.json again";
      const json j = read_json_file(index.string(), hint);
      const JsonPlace weight_map = JsonPlace(j, index.string(), hint).key("weight_map");
      std::map<std::string, size_t> file_of;
      for (auto it = weight_map.object().begin(); it != weight_map.object().end(); ++it) {
        const std::string& shard = weight_map.member(it.key(), it.value()).string();
        if (shard.find('/') != std::string::npos || shard == ".." || shard.empty())
          fail(index.string(), "weight_map entry '" + it.key() + "' names '" + shard + "', which is not a file in the folder");
        auto [pos, added] = file_of.emplace(shard, files_.size());
        if (added) {
          if (!fs::exists(dir / shard))
            fail(index.string(), "shard '" + shard + "' (holding '" + it.key() + "') is missing from the folder",
                 "download every model-*.safetensors file");
          files_.push_back(SafetensorsFile::open((dir / shard).string()));
        }
        where_[it.key()] = pos->second;
      }
    } else if (fs::exists(single)) {
      files_.push_back(SafetensorsFile::open(single.string()));
      for (const auto& t : files_[0]->tensors()) where_[t.name] = 0;
    } else {
      fail(dir.string(), "no model.safetensors or model.safetensors.index.json in the folder",
           "nightlora reads safetensors weights (not pytorch_model.bin)");
    }
    // safetensors' convention for tensors saved once but shared: "__metadata__" maps the
    // dropped name to the one kept (e.g. model.embed_tokens.weight -> lm_head.weight).
    for (const auto& f : files_)
      for (const auto& [k, v] : f->metadata())
        if (!where_.count(k) && where_.count(v) && f->find(v)) alias_[k] = v;
  }

  // The tensor, or nullptr when the folder does not have it.
  const SafetensorsTensor* find(const std::string& name) const {
    auto a = alias_.find(name);
    const std::string& n = a == alias_.end() ? name : a->second;
    auto it = where_.find(n);
    if (it == where_.end()) return nullptr;
    const SafetensorsTensor* t = files_[it->second]->find(n);
    if (!t) fail(files_[it->second]->path(), "tensor '" + n + "' is listed in the shard index but not in this shard");
    return t;
  }
  std::string file_of(const std::string& name) const {
    auto it = where_.find(name);
    return it == where_.end() ? files_[0]->path() : files_[it->second]->path();
  }
  std::vector<std::shared_ptr<SafetensorsFile>>& files() { return files_; }

 private:
  std::vector<std::shared_ptr<SafetensorsFile>> files_;
  std::map<std::string, size_t> where_;
  std::map<std::string, std::string> alias_;
};

TensorView view_of(const SafetensorsTensor& t, const std::string& file, const std::vector<int64_t>& expected_ne) {
  std::vector<int64_t> ne(t.shape.rbegin(), t.shape.rend());  // safetensors is slowest-first
  if (ne != expected_ne) {
    std::vector<int64_t> want(expected_ne.rbegin(), expected_ne.rend());
    fail(file, "tensor '" + t.name + "' has shape " + shape_string(t.shape) + ", but config.json implies " + shape_string(want),
         "config.json and the weights do not belong together");
  }
  if (t.dtype != QType::F32 && t.dtype != QType::F16 && t.dtype != QType::BF16)
    fail(file, "tensor '" + t.name + "' has dtype " + qtype_name(t.dtype) + "", "model weights must be F32, F16 or BF16");
  TensorView v;
  v.name = t.name;
  v.type = t.dtype;
  v.ne = std::move(ne);
  v.data = t.data;
  v.nbytes = t.nbytes;
  return v;
}

}  // namespace

std::unique_ptr<Model> load_hf_model(const std::string& dir_arg) {
  const fs::path dir(dir_arg);
  auto m = std::make_unique<Model>();
  m->source_path = dir_arg;
  m->source_format = "hf";
  ModelConfig& c = m->config;
  c = read_hf_config(dir);
  // The same per-frequency factors llama.cpp's converter stores in rope_freqs.weight, so a
  // folder and its converted GGUF rotate with bit-identical frequencies.
  if (c.rope_scaling.type == "llama3") c.rope_freq_factors = llama3_rope_freq_factors(c);

  WeightFiles files(dir);
  auto get = [&](const std::string& name, const std::vector<int64_t>& ne, bool required = true) -> TensorView {
    const SafetensorsTensor* t = files.find(name);
    if (!t) {
      if (!required) return {};
      std::vector<int64_t> want(ne.rbegin(), ne.rend());
      fail(files.file_of(name), "tensor '" + name + "' is missing (expected shape " + shape_string(want) + ")",
           "the weights are incomplete or belong to a different architecture");
    }
    return view_of(*t, files.file_of(name), ne);
  };

  const int64_t d = c.d_model;
  ModelWeights& w = m->weights;
  // Tied models often store only one of the two matrices (tinystories-656k keeps just
  // lm_head.weight); either serves as both.
  w.tok_embd = get("model.embed_tokens.weight", {d, c.vocab}, !c.tied_output);
  w.output = get("lm_head.weight", {d, c.vocab}, !c.tied_output);
  if (c.tied_output) {
    if (w.tok_embd.present())
      w.output = w.tok_embd;
    else if (w.output.present())
      w.tok_embd = w.output;
    else
      fail(dir_arg, "neither model.embed_tokens.weight nor lm_head.weight is present", "the weights are incomplete");
  }
  w.output_norm = get("model.norm.weight", {d});

  w.layers.resize(static_cast<size_t>(c.n_layer));
  for (int64_t i = 0; i < c.n_layer; ++i) {
    LayerWeights& l = w.layers[static_cast<size_t>(i)];
    for (const auto& t : layer_tensor_names()) {
      if (!layer_tensor_present(c, t.kind)) continue;
      l.*t.member = get("model.layers." + std::to_string(i) + "." + t.hf_suffix, layer_tensor_ne(c, t));
    }
  }
  for (auto& f : files.files()) m->storage.push_back(f);

  if (!fs::exists(dir / "tokenizer.json"))
    fail(dir_arg, "no tokenizer.json in the folder", "copy the model's tokenizer.json (and tokenizer_config.json) next to its weights");
  m->tokenizer = Tokenizer::from_hf_dir(dir_arg);
  if (m->tokenizer && m->tokenizer->vocab_size() > c.vocab)
    fail(dir_arg, "the tokenizer has " + std::to_string(m->tokenizer->vocab_size()) + " tokens but config.json says vocab_size " +
                      std::to_string(c.vocab),
         "tokenizer and weights do not belong together");
  return m;
}

}  // namespace nl
