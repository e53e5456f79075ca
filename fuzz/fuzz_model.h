// The real model the adapter targets load adapters against: stories260K (../shared), loaded
// once per process.
#pragma once
#include <memory>

#include "fuzz_util.h"
#include "nightlora/modelio/model.h"

namespace nlfuzz {

inline const nl::Model& stories260k() {
  static const std::unique_ptr<nl::Model> m =
      nl::Model::load(require_file(shared_dir() / "models/stories260K/stories260K.gguf", "stories260K.gguf").string());
  return *m;
}

}  // namespace nlfuzz
