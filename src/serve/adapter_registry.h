// The models a request may name: the base (the resident model) and adapters by name. Names
// are looked up in this table only: a request never reaches a path, so "../x" or "/etc/x" is
// just a name that is not there (404). Adapters come from the --adapters folder (NAME.gguf,
// or a folder NAME/ holding adapter.gguf or a PEFT adapter_model.safetensors) and from
// finished fine-tuning jobs; each is loaded once and shared by the requests that use it.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "nightlora/host/lora.h"
#include "nightlora/modelio/model.h"

namespace nl::serve {

struct RegisteredModel {
  std::string id;
  std::string owned_by;  // "nightlora" for the base and the folder's adapters, the job id for fine-tuned ones
  int64_t created = 0;   // unix seconds
  std::shared_ptr<const LoraAdapter> adapter;  // null: the base model itself
};

// Whether `name` may name a model: 1-128 characters of [A-Za-z0-9._:-], not starting with '.'.
bool valid_model_name(const std::string& name);

class AdapterRegistry {
 public:
  AdapterRegistry(const Model& model, std::string base_id);
  // Loads every adapter in `dir` (load_adapter refuses one for another model: nl::Error).
  void load_folder(const std::string& dir);
  // Loads the adapter file at `path` (the server's own file) under `name`.
  void add(const std::string& name, const std::string& path, const std::string& owned_by, int64_t created);
  // The model named `name`, or a 404 ApiError naming the `model` field.
  RegisteredModel find(const std::string& name) const;
  bool contains(const std::string& name) const;
  std::vector<RegisteredModel> list() const;  // the base first, then by name
  const std::string& base_id() const { return base_id_; }

 private:
  const Model& model_;
  std::string base_id_;
  int64_t started_ = 0;
  mutable std::mutex mu_;
  std::map<std::string, RegisteredModel> adapters_;
};

}  // namespace nl::serve
