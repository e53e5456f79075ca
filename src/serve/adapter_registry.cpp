#include "serve/adapter_registry.h"

#include <algorithm>
#include <filesystem>

#include "nightlora/host/adapter_io.h"
#include "nightlora/util/error.h"
#include "serve/api_error.h"
#include "serve/file_store.h"

namespace fs = std::filesystem;

namespace nl::serve {

bool valid_model_name(const std::string& name) {
  if (name.empty() || name.size() > 128 || name[0] == '.') return false;
  for (char ch : name) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
                    ch == '_' || ch == ':' || ch == '-';
    if (!ok) return false;
  }
  return true;
}

AdapterRegistry::AdapterRegistry(const Model& model, std::string base_id)
    : model_(model), base_id_(std::move(base_id)), started_(unix_now()) {}

void AdapterRegistry::load_folder(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) fail(dir, "the adapters folder does not exist", "give an existing folder to --adapters");
  std::vector<fs::path> entries;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) entries.push_back(e.path());
  std::sort(entries.begin(), entries.end());
  for (const fs::path& p : entries) {
    std::string name, file;
    if (fs::is_regular_file(p) && p.extension() == ".gguf") {
      name = p.stem().string();
      file = p.string();
    } else if (fs::is_directory(p)) {
      name = p.filename().string();
      if (fs::exists(p / "adapter.gguf")) file = (p / "adapter.gguf").string();
      else if (fs::exists(p / "adapter_model.safetensors")) file = p.string();
    }
    if (file.empty()) continue;  // not an adapter
    if (!valid_model_name(name))
      fail(p.string(), "'" + name + "' cannot be an adapter's name",
           "rename it to letters, digits and . _ : - (at most 128, not starting with '.')");
    if (name == base_id_) fail(p.string(), "an adapter may not have the base model's name '" + name + "'", "rename it");
    add(name, file, "nightlora", unix_now());
  }
}

void AdapterRegistry::add(const std::string& name, const std::string& path, const std::string& owned_by, int64_t created) {
  auto a = std::make_shared<LoraAdapter>(load_adapter(path, model_));
  std::lock_guard<std::mutex> lock(mu_);
  adapters_[name] = RegisteredModel{name, owned_by, created, std::move(a)};
}

RegisteredModel AdapterRegistry::find(const std::string& name) const {
  if (name == base_id_) return RegisteredModel{base_id_, "nightlora", started_, nullptr};
  std::lock_guard<std::mutex> lock(mu_);
  auto it = adapters_.find(name);
  if (it == adapters_.end())
    not_found("The model '" + name + "' does not exist: GET /v1/models lists the models this server has", "model",
              "model_not_found");
  return it->second;
}

bool AdapterRegistry::contains(const std::string& name) const {
  if (name == base_id_) return true;
  std::lock_guard<std::mutex> lock(mu_);
  return adapters_.count(name) > 0;
}

std::vector<RegisteredModel> AdapterRegistry::list() const {
  std::vector<RegisteredModel> out{RegisteredModel{base_id_, "nightlora", started_, nullptr}};
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [name, m] : adapters_) out.push_back(m);
  return out;
}

}  // namespace nl::serve
