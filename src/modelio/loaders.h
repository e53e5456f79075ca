// Internal: the per-format loaders behind Model::load.
#pragma once
#include <memory>
#include <string>

#include "nightlora/modelio/model.h"

namespace nl {

// A GGUF file: config from `<arch>.*` metadata, views into the mapped file, tokenizer from
// `tokenizer.ggml.*`.
std::unique_ptr<Model> load_gguf_model(const std::string& path);

// A Hugging Face folder: config.json, model.safetensors (or sharded via
// model.safetensors.index.json), tokenizer.json (+ tokenizer_config.json).
std::unique_ptr<Model> load_hf_model(const std::string& dir);

}  // namespace nl
