// Adapter files: PEFT (safetensors + adapter_config.json) and llama.cpp LoRA GGUF.
//
// Q/K row layout. The rows of q_proj and k_proj (and so the rows of their lora_B) come in
// two layouts: Hugging Face's, where RoPE rotates the halves (i, i + head_dim/2) of each
// head, and llama.cpp's `llama` GGUF layout, where llama.cpp's converter permuted the rows
// so RoPE rotates adjacent pairs (2i, 2i+1). Our in-memory adapter follows the loaded
// model's layout (RopeStyle::Adjacent means permuted). PEFT files are always in HF layout;
// llama.cpp LoRA GGUFs for the `llama` architecture are always in the permuted layout
// (convert_lora_to_gguf applies the same permutation to lora_B). Qwen is never permuted.
#include "nightlora/host/adapter_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <regex>

#include "nightlora/job/atomic_file.h"
#include "nightlora/job/file_ops.h"
#include "nightlora/modelio/gguf.h"
#include "nightlora/modelio/safetensors.h"
#include "nightlora/util/error.h"
#include "nightlora/util/json_read.h"

namespace nl {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// Bounds on what an adapter file may claim, far beyond any real model (the model's own shapes
// are checked afterwards); they keep the arithmetic on them far from overflow.
constexpr int64_t kMaxAdapterRank = int64_t{1} << 20;
constexpr int64_t kMaxAdapterLayer = int64_t{1} << 20;

std::string shortened(const std::string& s) { return s.size() > 24 ? s.substr(0, 24) + "..." : s; }

const char* peft_module(Proj p) {
  static const char* names[kNumProj] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                                        "mlp.gate_proj",    "mlp.up_proj",      "mlp.down_proj"};
  return names[static_cast<int>(p)];
}
const char* peft_target(Proj p) {
  static const char* names[kNumProj] = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  return names[static_cast<int>(p)];
}
const char* gguf_base(Proj p) {
  static const char* names[kNumProj] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};
  return names[static_cast<int>(p)];
}

// Heads whose rows a projection's output holds (0: not a RoPE'd projection).
int64_t rope_heads(const ModelConfig& m, Proj p) {
  if (p == Proj::Q) return m.n_head;
  if (p == Proj::K) return m.n_kv_head;
  return 0;
}

// Reorders the rows (each `cols` floats) of B for every head: HF row (h, s, i) with
// s in {0,1}, i < head_dim/2, sits at h*hd + s*hd/2 + i; in llama.cpp's layout at
// h*hd + 2i + s. to_adjacent chooses the direction.
std::vector<float> permute_rows(const std::vector<float>& B, int64_t heads, int64_t head_dim, int64_t cols,
                                bool to_adjacent) {
  std::vector<float> out(B.size());
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t s = 0; s < 2; ++s)
      for (int64_t i = 0; i < half; ++i) {
        int64_t hf = h * head_dim + s * half + i, adj = h * head_dim + 2 * i + s;
        int64_t src = to_adjacent ? hf : adj, dst = to_adjacent ? adj : hf;
        std::memcpy(&out[static_cast<size_t>(dst * cols)], &B[static_cast<size_t>(src * cols)],
                    sizeof(float) * static_cast<size_t>(cols));
      }
  return out;
}

bool model_is_adjacent(const Model& m) { return m.config.rope_style == RopeStyle::Adjacent; }
// The layout each file format uses for this architecture.
bool gguf_is_adjacent(const Model& m) { return m.config.arch == Arch::Llama; }

// B converted from the model's layout to a file's (or back, with from_file).
std::vector<float> convert_b(const Model& m, Proj p, const LoraPair& pr, int64_t rank, bool file_adjacent,
                             bool from_file) {
  int64_t heads = rope_heads(m.config, p);
  bool mine = model_is_adjacent(m);
  if (heads == 0 || mine == file_adjacent) return pr.B;
  // from_file: file -> model; else model -> file. The target layout decides the direction.
  bool to_adjacent = from_file ? mine : file_adjacent;
  return permute_rows(pr.B, heads, m.config.head_dim, rank, to_adjacent);
}

void check_adapter_fits(const LoraAdapter& a, const Model& m) {
  if (a.n_layer != m.config.n_layer || a.pairs.size() != static_cast<size_t>(m.config.n_layer * kNumProj))
    fail("adapter", "has " + std::to_string(a.n_layer) + " layers but the model has " + std::to_string(m.config.n_layer));
}

// Everything a file gave us, before it becomes a LoraAdapter.
struct LoadedPair {
  std::vector<float> A, B;
  int64_t rank = 0, in = 0, out = 0;
  bool has_a = false, has_b = false;
};

// The layer number in a tensor name (digits, as the name pattern matched), refused when beyond
// any model instead of overflowing.
int64_t layer_number(const std::string& digits, const std::string& file, const std::string& tensor) {
  int64_t v = 0;
  for (char ch : digits) {
    v = v * 10 + (ch - '0');
    if (v > kMaxAdapterLayer) fail(file, "tensor '" + tensor + "': layer number " + shortened(digits) + " is out of range",
                                   "this adapter was trained for another model");
  }
  return v;
}

std::vector<float> to_f32(QType t, const void* data, int64_t n, const std::string& where) {
  if (t != QType::F32 && t != QType::F16 && t != QType::BF16)
    fail(where, std::string("tensor type ") + qtype_name(t) + " is not supported for adapters", "use F32, F16 or BF16");
  std::vector<float> v(static_cast<size_t>(n));
  dequantize_row(t, data, v.data(), n);
  return v;
}

// Checks shapes against the model and builds the adapter (in the model's Q/K layout).
LoraAdapter assemble(const Model& m, std::map<std::pair<int64_t, int>, LoadedPair>& found, float alpha, float dropout,
                     bool file_adjacent, const std::string& where) {
  if (found.empty()) fail(where, "contains no LoRA tensors");
  const ModelConfig& mc = m.config;
  LoraAdapter a;
  a.n_layer = mc.n_layer;
  a.pairs.resize(static_cast<size_t>(mc.n_layer * kNumProj));
  a.cfg.alpha = alpha;
  a.cfg.dropout = dropout;
  a.cfg.targets = {};
  int64_t rank = -1;
  for (auto& [key, lp] : found) {
    auto [layer, pi] = key;
    Proj p = static_cast<Proj>(pi);
    std::string t = "layer " + std::to_string(layer) + " " + proj_name(p);
    if (!lp.has_a || !lp.has_b) fail(where, t + ": has " + (lp.has_a ? "lora_A but no lora_B" : "lora_B but no lora_A"));
    if (layer < 0 || layer >= mc.n_layer)
      fail(where, t + ": layer out of range: the model has " + std::to_string(mc.n_layer) + " layers",
           "this adapter was trained for another model");
    auto [in, out] = proj_shape(mc, p);
    if (lp.in != in || lp.out != out)
      fail(where,
           t + ": adapter is for a " + std::to_string(lp.out) + " x " + std::to_string(lp.in) +
               " projection but the model's is " + std::to_string(out) + " x " + std::to_string(in),
           "this adapter was trained for another model");
    if (rank >= 0 && lp.rank != rank)
      fail(where, t + ": rank " + std::to_string(lp.rank) + " differs from the other tensors' rank " + std::to_string(rank),
           "per-module ranks are not supported");
    rank = lp.rank;
    if (lp.A.size() != static_cast<size_t>(rank * in) || lp.B.size() != static_cast<size_t>(out * rank))
      fail(where, t + ": lora_A and lora_B shapes do not agree on the rank");
    LoraPair& pr = a.at(layer, p);
    pr.enabled = true;
    pr.in = in;
    pr.out = out;
    pr.A = std::move(lp.A);
    pr.B = std::move(lp.B);
    pr.B = convert_b(m, p, pr, rank, file_adjacent, true);
    a.cfg.targets[static_cast<size_t>(pi)] = true;
  }
  a.cfg.rank = rank;
  return a;
}

// What nightlora takes from a PEFT adapter_config.json, each field type-checked.
struct PeftLoraConfig {
  int64_t rank = 0;
  float alpha = 0, dropout = 0;
};

PeftLoraConfig read_peft_config(const std::string& path) {
  const char* hint = "nightlora reads adapter_config.json as PEFT writes it for a LoRA adapter";
  const json doc = read_json_file(path, hint);
  const JsonPlace cfg(doc, path, hint);
  cfg.object();
  if (std::optional<JsonPlace> pt = cfg.find("peft_type"); pt && pt->string() != "LORA")
    pt->fail("\"" + pt->string() + "\" is not \"LORA\"", "only LoRA adapters are supported");
  PeftLoraConfig c;
  c.rank = cfg.key("r").integer(1, kMaxAdapterRank);
  const double huge = std::numeric_limits<float>::max();
  c.alpha = static_cast<float>(cfg.key("lora_alpha").number(-huge, huge));
  c.dropout = static_cast<float>(cfg.number_or("lora_dropout", 0.0, 0.0, 1.0));
  for (const char* flag : {"use_rslora", "use_dora", "fan_in_fan_out"})
    if (cfg.boolean_or(flag, false)) cfg.key(flag).fail("true, which nightlora does not support");
  for (const char* pattern : {"rank_pattern", "alpha_pattern"})
    if (std::optional<JsonPlace> v = cfg.find(pattern); v && !v->object().empty())
      v->fail("per-module ranks/alphas are not supported");
  if (std::optional<JsonPlace> bias = cfg.find("bias"); bias && bias->string() != "none")
    bias->fail("\"" + bias->string() + "\": trained biases are not supported");
  // Which modules the adapter covers comes from its tensors; the list is only checked to be one
  // PEFT can write (a regex string, or a list of module names).
  if (std::optional<JsonPlace> t = cfg.find("target_modules"); t && !t->value().is_string())
    for (size_t i = 0; i < t->array().size(); ++i) t->item(i).string();
  return c;
}

LoraAdapter load_peft(const fs::path& dir, const Model& m) {
  fs::path cfg_path = dir / "adapter_config.json", st_path = dir / "adapter_model.safetensors";
  if (!fs::exists(cfg_path))
    fail(cfg_path.string(), "missing", "a PEFT adapter folder holds adapter_config.json and adapter_model.safetensors");
  if (!fs::exists(st_path))
    fail(st_path.string(), "missing",
         "a PEFT adapter folder holds adapter_model.safetensors (the older adapter_model.bin is not supported)");
  const PeftLoraConfig cfg = read_peft_config(cfg_path.string());
  auto st = SafetensorsFile::open(st_path.string());
  // base_model.model.model.layers.N.<module>.lora_A.weight (optionally with an adapter name
  // such as ".default" before ".weight", as some PEFT versions keep it).
  static const std::regex re(
      R"(base_model\.model\.model\.layers\.(\d+)\.(self_attn\.[qkvo]_proj|mlp\.(?:gate|up|down)_proj)\.lora_([AB])(?:\.[A-Za-z0-9_]+)?\.weight)");
  std::map<std::pair<int64_t, int>, LoadedPair> found;
  for (const auto& t : st->tensors()) {
    std::smatch mm;
    if (!std::regex_match(t.name, mm, re))
      fail(st_path.string(), "unexpected tensor '" + t.name + "'",
           "nightlora reads LoRA A/B tensors of q,k,v,o,gate,up,down projections only");
    const int64_t layer = layer_number(mm[1].str(), st_path.string(), t.name);
    int pi = -1;
    for (int p = 0; p < kNumProj; ++p)
      if (mm[2].str() == peft_module(static_cast<Proj>(p))) pi = p;
    if (t.shape.size() != 2) fail(st_path.string(), t.name + ": expected a 2-D tensor");
    LoadedPair& lp = found[{layer, pi}];
    std::vector<float> v = to_f32(t.dtype, t.data, t.n_elements(), st_path.string() + ": " + t.name);
    if (mm[3].str() == "A") {
      lp.has_a = true;
      lp.rank = t.shape[0];
      lp.in = t.shape[1];
      lp.A = std::move(v);
    } else {
      lp.has_b = true;
      lp.out = t.shape[0];
      if (lp.has_a && lp.rank != t.shape[1]) fail(st_path.string(), t.name + ": rank differs from its lora_A");
      lp.rank = t.shape[1];
      lp.B = std::move(v);
    }
  }
  LoraAdapter a = assemble(m, found, cfg.alpha, cfg.dropout, false, st_path.string());
  if (a.cfg.rank != cfg.rank)
    fail(cfg_path.string(), "r is " + std::to_string(cfg.rank) + " but the tensors have rank " + std::to_string(a.cfg.rank));
  return a;
}

LoraAdapter load_gguf_adapter(const std::string& path, const Model& m) {
  auto g = GgufFile::open(path);
  std::string type = g->get_str("general.type", "");
  if (type != "adapter")
    fail(path, "general.type is '" + type + "', not 'adapter'",
         "this looks like a model, not a LoRA adapter; pass it with --model instead");
  std::string atype = g->get_str("adapter.type", "");
  if (atype != "lora") fail(path, "adapter.type is '" + atype + "', not 'lora'");
  std::string arch = g->get_str("general.architecture", "");
  if (arch != arch_name(m.config.arch))
    fail(path, "adapter is for architecture '" + arch + "' but the model is '" + arch_name(m.config.arch) + "'",
         "this adapter was trained for another model");
  float alpha = static_cast<float>(g->get_float("adapter.lora.alpha"));
  static const std::regex re(R"(blk\.(\d+)\.(attn_q|attn_k|attn_v|attn_output|ffn_gate|ffn_up|ffn_down)\.weight\.lora_(a|b))");
  std::map<std::pair<int64_t, int>, LoadedPair> found;
  for (const auto& t : g->tensors()) {
    std::smatch mm;
    if (!std::regex_match(t.name, mm, re))
      fail(path, "unexpected tensor '" + t.name + "'",
           "nightlora reads LoRA tensors of attn_q/k/v/output and ffn_gate/up/down only");
    const int64_t layer = layer_number(mm[1].str(), path, t.name);
    int pi = -1;
    for (int p = 0; p < kNumProj; ++p)
      if (mm[2].str() == gguf_base(static_cast<Proj>(p))) pi = p;
    if (t.ne.size() != 2) fail(path, t.name + ": expected a 2-D tensor");
    LoadedPair& lp = found[{layer, pi}];
    std::vector<float> v = to_f32(t.type, t.data, t.n_elements(), path + ": " + t.name);
    // llama.cpp shapes: lora_a ne = {in, rank}, lora_b ne = {rank, out}.
    if (mm[3].str() == "a") {
      lp.has_a = true;
      lp.in = t.ne[0];
      if (lp.has_b && lp.rank != t.ne[1]) fail(path, t.name + ": rank differs from its lora_b");
      lp.rank = t.ne[1];
      lp.A = std::move(v);
    } else {
      lp.has_b = true;
      if (lp.has_a && lp.rank != t.ne[0]) fail(path, t.name + ": rank differs from its lora_a");
      lp.rank = t.ne[0];
      lp.out = t.ne[1];
      lp.B = std::move(v);
    }
  }
  return assemble(m, found, alpha, 0.0f, gguf_is_adjacent(m), path);
}

}  // namespace

void save_adapter_peft(const LoraAdapter& a, const Model& m, const std::string& dir) {
  check_adapter_fits(a, m);
  make_dirs(dir);  // durable, as the files written into it (job/file_ops.h)
  std::vector<SafetensorsOut> tensors;
  std::vector<std::string> targets;
  for (int p = 0; p < kNumProj; ++p) {
    bool any = false;
    for (int64_t l = 0; l < a.n_layer; ++l) {
      const LoraPair& pr = a.at(l, static_cast<Proj>(p));
      if (!pr.enabled) continue;
      any = true;
      std::string base = "base_model.model.model.layers." + std::to_string(l) + "." + peft_module(static_cast<Proj>(p));
      std::vector<float> B = convert_b(m, static_cast<Proj>(p), pr, a.cfg.rank, false, false);
      tensors.push_back(SafetensorsOut::from_f32(base + ".lora_A.weight", {a.cfg.rank, pr.in}, pr.A.data()));
      tensors.push_back(SafetensorsOut::from_f32(base + ".lora_B.weight", {pr.out, a.cfg.rank}, B.data()));
    }
    if (any) targets.push_back(peft_target(static_cast<Proj>(p)));
  }
  if (tensors.empty()) fail(dir, "the adapter has no enabled projection to save");
  write_safetensors((fs::path(dir) / "adapter_model.safetensors").string(), tensors, {{"format", "pt"}});

  // The fields PEFT writes for a plain LoRA adapter.
  json cfg = {
      {"alpha_pattern", json::object()},
      {"auto_mapping", nullptr},
      {"base_model_name_or_path", m.source_path},
      {"bias", "none"},
      {"fan_in_fan_out", false},
      {"inference_mode", true},
      {"init_lora_weights", true},
      {"layers_pattern", nullptr},
      {"layers_to_transform", nullptr},
      {"lora_alpha", a.cfg.alpha},
      {"lora_dropout", a.cfg.dropout},
      {"modules_to_save", nullptr},
      {"peft_type", "LORA"},
      {"r", a.cfg.rank},
      {"rank_pattern", json::object()},
      {"revision", nullptr},
      {"target_modules", targets},
      {"task_type", "CAUSAL_LM"},
      {"use_dora", false},
      {"use_rslora", false},
  };
  write_file_atomic((fs::path(dir) / "adapter_config.json").string(), cfg.dump(2) + "\n");
}

void save_adapter_gguf(const LoraAdapter& a, const Model& m, const std::string& path) {
  check_adapter_fits(a, m);
  const ModelConfig& mc = m.config;
  const std::string arch = arch_name(mc.arch);
  GgufWriter w;
  w.set("general.architecture", GgufValue::str(arch));
  w.set("general.type", GgufValue::str("adapter"));
  w.set("general.name", GgufValue::str(mc.name.empty() ? "nightlora adapter" : mc.name + " LoRA"));
  w.set("adapter.type", GgufValue::str("lora"));
  w.set("adapter.lora.alpha", GgufValue::f32(a.cfg.alpha));
  // As convert_lora_to_gguf, the base model's hyperparameters (informative for readers).
  w.set(arch + ".block_count", GgufValue::u32(static_cast<uint32_t>(mc.n_layer)));
  w.set(arch + ".embedding_length", GgufValue::u32(static_cast<uint32_t>(mc.d_model)));
  w.set(arch + ".feed_forward_length", GgufValue::u32(static_cast<uint32_t>(mc.d_ff)));
  w.set(arch + ".attention.head_count", GgufValue::u32(static_cast<uint32_t>(mc.n_head)));
  w.set(arch + ".attention.head_count_kv", GgufValue::u32(static_cast<uint32_t>(mc.n_kv_head)));
  w.set("general.file_type", GgufValue::u32(0));  // all F32
  // The writer reads the data when write() runs: keep the (possibly permuted) copies alive.
  std::vector<std::vector<float>> keep;
  keep.reserve(a.pairs.size());
  bool any = false;
  for (int64_t l = 0; l < a.n_layer; ++l)
    for (int p = 0; p < kNumProj; ++p) {
      const LoraPair& pr = a.at(l, static_cast<Proj>(p));
      if (!pr.enabled) continue;
      any = true;
      std::string base = "blk." + std::to_string(l) + "." + gguf_base(static_cast<Proj>(p)) + ".weight";
      keep.push_back(convert_b(m, static_cast<Proj>(p), pr, a.cfg.rank, gguf_is_adjacent(m), false));
      w.add_tensor_data(base + ".lora_a", QType::F32, {pr.in, a.cfg.rank}, pr.A.data());
      w.add_tensor_data(base + ".lora_b", QType::F32, {a.cfg.rank, pr.out}, keep.back().data());
    }
  if (!any) fail(path, "the adapter has no enabled projection to save");
  fs::path parent = fs::path(path).parent_path();
  if (!parent.empty()) make_dirs(parent.string());
  w.write(path);
}

LoraAdapter load_adapter(const std::string& path, const Model& m) {
  std::error_code ec;
  fs::path p(path);
  if (!fs::exists(p, ec)) fail(path, "no such adapter file or folder", "pass a PEFT folder or a LoRA .gguf file");
  if (fs::is_directory(p, ec)) return load_peft(p, m);
  std::string name = p.filename().string();
  if (name == "adapter_config.json" || name == "adapter_model.safetensors") return load_peft(p.parent_path(), m);
  char magic[4] = {};
  std::ifstream f(path, std::ios::binary);
  f.read(magic, 4);
  if (f.gcount() == 4 && std::memcmp(magic, "GGUF", 4) == 0) return load_gguf_adapter(path, m);
  fail(path, "not a LoRA adapter (neither a GGUF file nor a PEFT folder)",
       "pass the folder with adapter_config.json + adapter_model.safetensors, or a LoRA .gguf file");
}

}  // namespace nl
