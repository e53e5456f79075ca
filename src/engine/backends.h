// Constructors of the engine backends, dispatched by make_engine.
#pragma once
#include <memory>

#include "nightlora/engine/frozen_engine.h"

namespace nl {

std::unique_ptr<FrozenEngine> make_cpu_engine(const Model& model, const EngineOptions& opt);

}  // namespace nl
