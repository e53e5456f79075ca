// Adapters out and in:
//  - PEFT: DIR/adapter_model.safetensors + DIR/adapter_config.json, tensor names
//    base_model.model.model.layers.N.self_attn.q_proj.lora_A.weight (A: rank x in,
//    B: out x rank), mlp.gate_proj / up_proj / down_proj for the MLP;
//  - llama.cpp LoRA GGUF: general.type=adapter, adapter.type=lora, adapter.lora.alpha,
//    tensors blk.N.attn_q.weight.lora_a / .lora_b with llama.cpp's shapes.
// Files are written atomically (temp file + fsync + rename).
#pragma once
#include <string>

#include "nightlora/host/lora.h"
#include "nightlora/modelio/model.h"

namespace nl {

void save_adapter_peft(const LoraAdapter& a, const Model& m, const std::string& dir);
void save_adapter_gguf(const LoraAdapter& a, const Model& m, const std::string& path);

// Loads either format (a folder with adapter_model.safetensors, or a .gguf file) and checks
// it fits `m` (architecture, layer count, shapes); throws nl::Error otherwise.
LoraAdapter load_adapter(const std::string& path, const Model& m);

}  // namespace nl
