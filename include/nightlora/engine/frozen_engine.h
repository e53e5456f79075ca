// The frozen engine (the papers' NPU): owns the frozen base weights in one resident layout
// made once at load, and serves the three products a LoRA step needs from those same bytes:
//   forward / recompute   Y  = X · Wᵀ      (X: T x in, Y: T x out)
//   input gradient        dX = dY · W      (dY: T x out, dX: T x in)
// The input gradient reads the resident (quantized) tiles with the same dequantizer as the
// forward product: no transposed copy and no full dequantized copy of W ever exists.
// Calls are asynchronous: submit returns a ticket, wait() blocks until it is done, so the
// host can compute the LoRA branch meanwhile.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "nightlora/modelio/model.h"

namespace nl {

struct EngineOptions {
  std::string backend = "cpu";  // "cpu" (more later)
  int threads = 0;              // 0: all cores
};

class FrozenEngine;

// Creates the engine for `model`, loading every projection matrix once into its resident
// layout. Throws nl::Error for an unknown backend or unsupported weight type.
std::unique_ptr<FrozenEngine> make_engine(const Model& model, const EngineOptions& opt);

}  // namespace nl
