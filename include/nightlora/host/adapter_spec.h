// Adapters named on a command line as llama.cpp users write them: `--adapter PATH[:SCALE]`
// (or `--lora`), repeatable. SCALE multiplies the adapter's own alpha/rank factor
// (default 1.0), as llama.cpp's `--lora-scaled` does.
#pragma once
#include <string>
#include <vector>

#include "nightlora/host/lora.h"
#include "nightlora/modelio/model.h"

namespace nl {

struct AdapterSpec {
  std::string path;
  float scale = 1.0f;
};

// "dir/adapter.gguf" -> {path, 1.0}; "dir/adapter.gguf:0.5" -> {path, 0.5}. A suffix after
// the last ':' that holds no '/' is the scale and must be a finite number (negative
// scales subtract an adapter, as in llama.cpp); throws nl::Error naming the argument
// otherwise, and for an empty path.
AdapterSpec parse_adapter_spec(const std::string& arg);

// An adapter loaded for a model, with the scale it is applied at.
struct ScaledAdapter {
  AdapterSpec spec;
  LoraAdapter adapter;
  // scale · alpha / rank: the factor in front of B·A.
  float factor() const { return spec.scale * adapter.cfg.scale(); }
};

// Loads each adapter with load_adapter (which refuses adapters for another model).
std::vector<ScaledAdapter> load_scaled_adapters(const std::vector<AdapterSpec>& specs, const Model& m);

// One adapter that applies all of `adapters` at once, for code that takes a single one: their
// ranks stacked (A rows one after another, B columns one after another, each B multiplied by
// its adapter's factor), alpha equal to the total rank so the stacked factor is 1; a
// projection one adapter leaves out gets zero rows there. Exactly sum_i factor_i · B_i·A_i.
LoraAdapter stack_adapters(const std::vector<ScaledAdapter>& adapters);

}  // namespace nl
