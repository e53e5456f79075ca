#include "best_adapter.h"

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "nightlora/host/adapter_io.h"
#include "nightlora/job/file_ops.h"
#include "nightlora/modelio/model.h"
#include "nightlora/util/error.h"

namespace nl {

namespace fs = std::filesystem;

BestAdapter::BestAdapter(std::string run_dir) : dir_((fs::path(run_dir) / "best").string()) {}

std::string BestAdapter::folder(int64_t step) const {
  char name[32];
  std::snprintf(name, sizeof name, "step-%08lld", static_cast<long long>(step));
  return (fs::path(dir_) / name).string();
}

bool BestAdapter::consider(int64_t step, double val_loss, const LoraAdapter& adapter, const Model& model) {
  if (!std::isfinite(val_loss) || (has() && !(val_loss < val_loss_)) || !adapter.all_finite()) {
    ++evals_since_;
    return false;
  }
  save_adapter_peft(adapter, model, folder(step));
  step_ = step;
  val_loss_ = val_loss;
  evals_since_ = 0;
  in_memory_ = adapter;  // into the previous best's vectors when there is one (same shapes)
  return true;
}

const LoraAdapter& BestAdapter::adapter(const Model& model) {
  if (!has()) fail(dir_, "no best validation adapter yet (internal: ask has() first)");
  if (!in_memory_) in_memory_ = load_adapter(folder(step_), model);
  return *in_memory_;
}

nlohmann::json BestAdapter::to_json() const {
  if (!has()) return nlohmann::json::object();
  return {{"step", step_}, {"val_loss", val_loss_}, {"evals_since", evals_since_}};
}

void BestAdapter::restore(const nlohmann::json& j, const std::string& where) {
  in_memory_.reset();
  step_ = -1;
  evals_since_ = 0;
  if (j.is_object() && !j.empty()) {
    const auto step = j.find("step"), loss = j.find("val_loss"), since = j.find("evals_since");
    if (step == j.end() || !step->is_number_integer() || step->get<int64_t>() < 0 || loss == j.end() ||
        !loss->is_number() || since == j.end() || !since->is_number_integer() || since->get<int64_t>() < 0)
      fail(where, "its record of the best validation adapter is damaged", "start a new run in another --out");
    step_ = step->get<int64_t>();
    val_loss_ = loss->get<double>();
    evals_since_ = since->get<int64_t>();
    std::error_code ec;
    if (!fs::exists(fs::path(folder(step_)) / "adapter_model.safetensors", ec))
      fail(folder(step_), "the best validation adapter this checkpoint names is missing",
           "start a new run in another --out, or train without --valid");
  }
  remove_all_but(step_);
}

void BestAdapter::prune() const { remove_all_but(step_); }

void BestAdapter::remove_all_but(int64_t keep) const {
  std::error_code ec;
  if (!fs::is_directory(dir_, ec)) return;
  const std::string kept = keep >= 0 ? fs::path(folder(keep)).filename().string() : "";
  for (const auto& e : fs::directory_iterator(dir_, ec))
    if (e.path().filename().string() != kept) remove_tree(e.path().string());
}

}  // namespace nl
