// The objects behind the C API's handles (include/nightlora.h): what nl_model, nl_adapter and
// nl_job are, and the registries of the live ones (api_call.h, Registry).
#pragma once
#include <atomic>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "capi/api_call.h"
#include "nightlora.h"
#include "nightlora/host/lora.h"
#include "nightlora/train/resident_model.h"
#include "nightlora/train/training_job.h"
#include "nightlora/util/error.h"

// A model loaded once: the resident model (weights, tokenizer, its one frozen engine and the
// turns every user of the engine takes).
struct nl_model {
  std::unique_ptr<nl::ResidentModel> resident;
};

// An adapter loaded for one model; its numbers never change after loading, its scale may.
struct nl_adapter {
  std::shared_ptr<nl_model> model;  // keeps the model loaded while the adapter is
  std::string path;
  nl::LoraAdapter lora;
  std::atomic<float> scale{1.0f};
};

namespace nl::capi {

Registry<nl_model>& models();
Registry<nl_adapter>& adapters();

// The adapters of a generation or evaluation, looked up (and held for the call), checked to
// belong to `model`. Throws ApiMisuse for a NULL array with n > 0, a dead handle or an adapter
// of another model.
std::vector<std::shared_ptr<nl_adapter>> held_adapters(nl_adapter* const* handles, size_t n, const nl_model* model,
                                                       const char* function);

// The one adapter that applies all of `held` at their scales (nl::stack_adapters).
nl::LoraAdapter stacked(const std::vector<std::shared_ptr<nl_adapter>>& held);

}  // namespace nl::capi
