// Writes the binary seed corpora of the fuzz targets (fuzz/corpus/<target>/) with nightlora's
// own writers, so every seed is a file nightlora really reads: tiny synthetic models of each
// architecture (GGUF), LoRA adapters of the real stories260K model (GGUF and PEFT
// safetensors), a safetensors file with each float dtype, a training checkpoint, precision
// plans, and a small synthetic LaMP-2 set. fuzz/make_seeds.py writes the text seeds.
// Run by scripts/fuzz.sh --make-seeds (the seeds are committed; rerun after a format change).
//   fuzz_make_seeds OUT_DIR
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "fuzz_model.h"
#include "fuzz_util.h"
#include "nightlora/eval/lamp2_synth.h"
#include "nightlora/host/adapter_io.h"
#include "nightlora/host/checkpoint.h"
#include "nightlora/host/lora.h"
#include "nightlora/host/precision_plan.h"
#include "nightlora/job/atomic_file.h"
#include "nightlora/modelio/gguf.h"
#include "nightlora/modelio/safetensors.h"
#include "nightlora/tokenizer/tokenizer.h"
#include "nightlora/modelio/synth.h"

namespace fs = std::filesystem;

namespace {

fs::path out_root;

void put(const std::string& target, const std::string& name, const std::string& bytes) {
  const fs::path dir = out_root / target;
  fs::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  std::printf("%s/%s: %zu bytes\n", target.c_str(), name.c_str(), bytes.size());
}

std::string slurp(const fs::path& p) { return nl::read_file(p.string()); }

nl::LoraAdapter adapter_for(const nl::Model& m, const char* targets, int64_t rank) {
  nl::LoraConfig cfg;
  cfg.rank = rank;
  cfg.targets = nl::LoraConfig::parse_targets(targets);
  cfg.seed = 7;
  nl::LoraAdapter a = nl::LoraAdapter::init(m.config, cfg);
  for (auto& p : a.pairs)  // B is zero after init; a trained adapter's is not
    for (size_t i = 0; i < p.B.size(); ++i) p.B[i] = 0.01f * static_cast<float>(i % 7);
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_make_seeds OUT_DIR (fuzz/corpus)\n");
    return 2;
  }
  out_root = argv[1];
  const fs::path tmp = nlfuzz::scratch_dir();

  // GGUF models: the three tiny architectures, one layer, in two block types.
  for (const char* preset : {"tiny-llama", "tiny-qwen2", "tiny-qwen3"}) {
    nl::SynthOptions o;
    o.preset = preset;
    o.layers = 1;
    o.type = std::string(preset) == "tiny-qwen2" ? nl::QType::Q8_0 : nl::QType::Q4_0;
    o.tokenizer = "generated";
    const fs::path p = tmp / (std::string(preset) + ".gguf");
    nl::synth_model(p.string(), o);
    put("gguf_model", std::string(preset) + ".gguf", slurp(p));
  }

  // The SentencePiece tokenizer of stories260K alone (metadata, no tensors): the llama
  // tokenizer path of the GGUF reader without the model's megabyte of weights.
  {
    auto f = nl::GgufFile::open(
        nlfuzz::require_file(nlfuzz::shared_dir() / "models/stories260K/stories260K.gguf", "stories260K.gguf").string());
    nl::GgufWriter w;
    w.set("general.architecture", nl::GgufValue::str("llama"));
    nl::Tokenizer::from_gguf(*f)->write_gguf(w);
    w.write((tmp / "tok.gguf").string());
    put("gguf_model", "stories260K-tokenizer-only.gguf", slurp(tmp / "tok.gguf"));
  }

  // Adapters of stories260K: GGUF (llama.cpp's LoRA format) and PEFT safetensors.
  const nl::Model& m = nlfuzz::stories260k();
  nl::save_adapter_gguf(adapter_for(m, "q,v", 1), m, (tmp / "a.gguf").string());
  put("gguf_adapter", "stories260K-qv-r1.gguf", slurp(tmp / "a.gguf"));
  nl::save_adapter_gguf(adapter_for(m, "o,down", 2), m, (tmp / "b.gguf").string());
  put("gguf_adapter", "stories260K-o-down-r2.gguf", slurp(tmp / "b.gguf"));
  nl::save_adapter_peft(adapter_for(m, "q,v", 2), m, (tmp / "peft").string());
  put("safetensors", "peft-stories260K-qv-r2.safetensors", slurp(tmp / "peft/adapter_model.safetensors"));

  // A safetensors file with each float dtype models use, and metadata.
  {
    float v[12];
    for (int i = 0; i < 12; ++i) v[i] = 0.25f * static_cast<float>(i) - 1.0f;
    std::vector<nl::SafetensorsOut> ts = {nl::SafetensorsOut::from_f32("model.norm.weight", {12}, v, nl::QType::F32),
                                          nl::SafetensorsOut::from_f32("lm_head.weight", {3, 4}, v, nl::QType::F16),
                                          nl::SafetensorsOut::from_f32("model.embed_tokens.weight", {4, 3}, v, nl::QType::BF16)};
    nl::write_safetensors((tmp / "w.safetensors").string(), ts, {{"format", "pt"}});
    put("safetensors", "three-dtypes.safetensors", slurp(tmp / "w.safetensors"));
  }

  // A training checkpoint's payload (what CheckpointStore keeps, without its footer), with a
  // precision plan.
  {
    nl::Checkpoint c;
    c.meta.identity = {{"model", "fnv:0123456789abcdef"}, {"data", "fnv:fedcba9876543210"},
                       {"config", {{"lr", 1e-3}, {"rank", 1}, {"batch", 4}, {"seed", 1}}}};
    c.meta.progress = {{"elapsed_s", 12.5}, {"tokens", 4096}};
    c.state.step = 3;
    c.state.data_pos = 12;
    c.state.adam_t = 3;
    c.state.adapter = adapter_for(m, "q", 1);
    c.state.adam_m = c.state.adapter.zeros_like();
    c.state.adam_v = c.state.adapter.zeros_like();
    nl::PrecisionPlan plan = nl::PrecisionPlan::uniform(m.config.n_layer, nl::Precision::F32);
    plan.set(0, nl::Proj::Q, nl::FrozenProduct::Forward, nl::Precision::Int8);
    plan.origin = "auto";
    c.precision = plan;
    put("checkpoint", "stories260K-step3.nlck", nl::encode_checkpoint(c));
    c.precision.reset();
    put("checkpoint", "stories260K-step3-noplan.nlck", nl::encode_checkpoint(c));
  }

  // Precision plans: first byte = expected layer count (0: any).
  {
    nl::PrecisionPlan f32 = nl::PrecisionPlan::uniform(2, nl::Precision::F32);
    put("precision_plan", "f32-2layers.json", std::string(1, '\2') + f32.to_json().dump(1));
    nl::PrecisionPlan mixed = nl::PrecisionPlan::uniform(1, nl::Precision::Int8);
    mixed.set(0, nl::Proj::V, nl::FrozenProduct::InputGrad, nl::Precision::F16);
    mixed.head_forward = nl::Precision::F16;
    mixed.origin = "auto";
    mixed.calibration = {{"tol", 0.02}, {"passes", 4}, {"seconds", 1.5}};
    put("precision_plan", "mixed-1layer.json", std::string(1, '\0') + mixed.to_json().dump());
  }

  // LaMP-2: split byte, questions, "\n----\n", outputs.
  for (nl::Lamp2Split split : {nl::Lamp2Split::User, nl::Lamp2Split::Time}) {
    nl::Lamp2SynthOptions o;
    o.users = 2;
    o.items_per_user = 4;
    o.questions_per_user = 2;
    o.split = split;
    const nl::Lamp2Synthetic s = nl::make_lamp2_synthetic(o);
    const char split_byte = split == nl::Lamp2Split::User ? 1 : 2;
    put("lamp2", std::string("synthetic-") + nl::lamp2_split_name(split) + ".json",
        std::string(1, split_byte) + s.questions_json + "\n----\n" + s.outputs_json);
  }
  return 0;
}
