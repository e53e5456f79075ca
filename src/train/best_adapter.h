// The adapter with the best validation loss so far, kept across restarts: each improvement is
// written to OUT/best/step-NNNNNNNN/ (PEFT files, f32, so it reads back bit for bit) before it
// can be needed, and the checkpoint's progress record names the one that belongs to it. A
// folder newer than the checkpoint (written by a session killed before its next checkpoint) is
// dropped on resume, older ones once a checkpoint no longer needs them.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "nightlora/host/lora.h"

namespace nl {

class Model;

class BestAdapter {
 public:
  explicit BestAdapter(std::string run_dir);

  // A validation of `adapter` after `step` steps. True when it is the best so far (strictly
  // lower, finite); then it is saved.
  bool consider(int64_t step, double val_loss, const LoraAdapter& adapter, const Model& model);
  bool has() const { return step_ >= 0; }
  int64_t step() const { return step_; }
  double val_loss() const { return val_loss_; }
  int64_t evals_since() const { return evals_since_; }  // validations since the best one
  // The best adapter, by reference: the copy kept since it was found (no second copy for the
  // final files), or, when it came from an earlier session, loaded from its folder into that
  // place. Valid until the next consider() or restore().
  const LoraAdapter& adapter(const Model& model);

  // For the checkpoint's progress record, and back (nl::Error when it is damaged or its folder
  // is missing). restore() also removes the folders the record does not name.
  nlohmann::json to_json() const;
  void restore(const nlohmann::json& j, const std::string& where);
  // After a checkpoint that records the current best: remove the other folders.
  void prune() const;

 private:
  std::string folder(int64_t step) const;
  void remove_all_but(int64_t keep) const;

  std::string dir_;  // OUT/best
  int64_t step_ = -1;
  double val_loss_ = 0;
  int64_t evals_since_ = 0;
  std::optional<LoraAdapter> in_memory_;
};

}  // namespace nl
