// The models the decoder tests run on: stories260K from ../shared when it is there, and the
// tiny synthetic presets of each architecture (llama, qwen2, qwen3), written once per test
// program into a temporary folder; and adapters whose every pair changes the output.
#pragma once
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "nightlora/host/lora.h"
#include "nightlora/modelio/model.h"
#include "nightlora/modelio/synth.h"
#include "test_util.h"

namespace decoder_test_models {

namespace fs = std::filesystem;

// The synthetic preset file (random weights from `seed`, a generated tokenizer).
inline fs::path tiny_preset(const std::string& preset, nl::QType type, uint32_t seed) {
  static const nltest::TempDir dir;  // removed when the program ends
  const fs::path out = dir.path / (preset + "-" + nl::qtype_name(type) + "-" + std::to_string(seed) + ".gguf");
  if (!fs::exists(out)) {
    nl::SynthOptions o;
    o.preset = preset;
    o.type = type;
    o.seed = seed;
    o.tokenizer = "generated";
    nl::synth_model(out.string(), o);
  }
  return out;
}

struct NamedModel {
  std::string name;
  std::unique_ptr<nl::Model> model;
};

inline NamedModel tiny_model(const std::string& preset, nl::QType type, uint32_t seed) {
  return {preset + " " + nl::qtype_name(type), nl::Model::load(tiny_preset(preset, type, seed).string())};
}

// ../shared's model at `sub` (a GGUF file or a Hugging Face folder), when it is there; else a
// line saying the tests named `who` did not run on it.
inline void add_shared_model(std::vector<NamedModel>& out, const std::string& name, const std::string& sub,
                             const char* who) {
  const fs::path shared = nltest::shared_models_dir();
  if (!shared.empty() && fs::exists(shared / sub))
    out.push_back({name, nl::Model::load((shared / sub).string())});
  else
    std::printf("[%s] ../shared/models/%s absent: not checked on it\n", who, sub.c_str());
}

// stories260K (when present) and one tiny preset of each architecture: llama Q4_0, qwen2
// Q8_0, qwen3 F16 (three weight types, three attention layouts).
inline std::vector<NamedModel> stories_and_tiny_presets(const char* who, uint32_t seed) {
  std::vector<NamedModel> out;
  add_shared_model(out, "stories260K", "stories260K/stories260K.gguf", who);
  out.push_back(tiny_model("tiny-llama", nl::QType::Q4_0, seed));
  out.push_back(tiny_model("tiny-qwen2", nl::QType::Q8_0, seed));
  out.push_back(tiny_model("tiny-qwen3", nl::QType::F16, seed));
  return out;
}

// A rank-4 adapter on every projection with B filled in from `fill_seed` (a fresh adapter's
// B = 0 would change nothing).
inline nl::LoraAdapter filled_adapter(const nl::Model& m, uint32_t lora_seed, uint32_t fill_seed) {
  nl::LoraConfig lc;
  lc.rank = 4;
  lc.alpha = 8;
  lc.seed = lora_seed;
  nl::LoraAdapter ad = nl::LoraAdapter::init(m.config, lc);
  uint32_t x = fill_seed;
  for (auto& p : ad.pairs)
    for (auto& b : p.B) {
      x = x * 1664525u + 1013904223u;
      b = 0.2f * (static_cast<float>(x >> 8) / 16777216.0f - 0.5f);
    }
  return ad;
}

}  // namespace decoder_test_models
