#include "nightlora/modelio/model.h"

#include <filesystem>

#include "loaders.h"
#include "nightlora/modelio/gguf.h"
#include "nightlora/tokenizer/tokenizer.h"
#include "nightlora/util/error.h"

namespace nl {

const char* arch_name(Arch a) {
  switch (a) {
    case Arch::Llama: return "llama";
    case Arch::Qwen2: return "qwen2";
    case Arch::Qwen3: return "qwen3";
  }
  return "?";
}

const char* proj_name(Proj p) {
  static const char* names[kNumProj] = {"q", "k", "v", "o", "gate", "up", "down"};
  return names[static_cast<int>(p)];
}

const TensorView& LayerWeights::proj(Proj p) const {
  switch (p) {
    case Proj::Q: return wq;
    case Proj::K: return wk;
    case Proj::V: return wv;
    case Proj::O: return wo;
    case Proj::Gate: return w_gate;
    case Proj::Up: return w_up;
    case Proj::Down: return w_down;
  }
  return wq;
}

Model::~Model() = default;

std::unique_ptr<Model> Model::load(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) fail(path, "no such file or folder", "pass a .gguf file or a Hugging Face model folder");
  if (fs::is_directory(path, ec)) return load_hf_model(path);
  return load_gguf_model(path);
}

size_t Model::weight_bytes() const {
  size_t n = weights.tok_embd.nbytes + weights.output_norm.nbytes;
  if (weights.output.data != weights.tok_embd.data) n += weights.output.nbytes;
  for (const auto& l : weights.layers)
    for (const TensorView* t : {&l.attn_norm, &l.wq, &l.wk, &l.wv, &l.wo, &l.bq, &l.bk, &l.bv, &l.q_norm, &l.k_norm,
                                &l.ffn_norm, &l.w_gate, &l.w_up, &l.w_down})
      n += t->nbytes;
  return n;
}

}  // namespace nl
