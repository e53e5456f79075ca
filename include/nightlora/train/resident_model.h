// A model loaded once, with its frozen engine made once, that inference and training jobs
// share: a server or an app (C API) keeps one copy of the weights whatever it runs on them.
// Whoever uses the engine holds a turn (engine_turns.h): inference under turns().serve(),
// a training job (run_training_job with this model) under turns().train() per step.
#pragma once
#include <memory>
#include <string>

#include "nightlora/engine/engine_turns.h"
#include "nightlora/engine/frozen_engine.h"
#include "nightlora/modelio/model.h"

namespace nl {

class ResidentModel {
 public:
  // Loads `path` as Model::load does and makes its engine (opt: backend, threads, isa).
  // Throws nl::Error for a bad file or an engine that cannot hold it.
  explicit ResidentModel(const std::string& path, const EngineOptions& opt = {});
  ResidentModel(const ResidentModel&) = delete;
  ResidentModel& operator=(const ResidentModel&) = delete;

  const std::string& path() const { return path_; }
  const Model& model() const { return *model_; }
  FrozenEngine& engine() { return *engine_; }
  EngineTurns& turns() { return turns_; }

 private:
  std::string path_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<FrozenEngine> engine_;
  EngineTurns turns_;
};

}  // namespace nl
