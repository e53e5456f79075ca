// The check both decoders make before using a LoRA adapter: its layer count and every
// enabled pair's shapes fit the model.
#pragma once
#include "nightlora/host/lora.h"
#include "nightlora/modelio/model.h"

namespace nl {

// Throws nl::Error naming the layer and projection that do not fit.
void check_adapter_fits(const Model& model, const LoraAdapter& adapter);

}  // namespace nl
