// The body of POST /v1/fine_tuning/jobs, read and type-checked into the training settings a
// job keeps, with nothing but the JSON and the model's context: the file ids are not looked
// up here (FineTuningJobs::create does, in the server's own registry). The fuzz target
// fuzz/serve_request_fuzz.cpp calls the same function on arbitrary bodies.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace nl::serve {

// The base learning rate learning_rate_multiplier scales: `nightlora train`'s default --lr.
constexpr double kBaseLearningRate = 1e-4;

struct FineTuningRequest {
  std::string model;          // the model to start from (the caller checks it is the base)
  std::string training_file;  // a file id as the client sent it
  std::optional<std::string> validation_file;
  std::optional<std::string> suffix;  // 1 to 40 letters, digits, '-' or '_'
  int64_t seed = 0;
  // The training options (`nightlora train`'s names: epochs, batch, lr, iters, rank, alpha,
  // seq_len, grad_accum, warmup, lora_seed, save_every, precision, schedule, train_on, seed),
  // every one present: "auto" or absent hyperparameters take `train`'s defaults.
  nlohmann::json settings;
};

// A wrong type or a value out of range is a 400 naming the field ("hyperparameters.rank").
// seq_len may be at most `context` (the model's), and defaults to min(512, context).
FineTuningRequest read_fine_tuning_request(const nlohmann::json& body, int64_t context);

}  // namespace nl::serve
