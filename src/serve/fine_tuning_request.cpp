#include "serve/fine_tuning_request.h"

#include <algorithm>
#include <cctype>
#include <initializer_list>

#include "nightlora/train/training_job.h"
#include "serve/api_error.h"
#include "serve/request_fields.h"

namespace nl::serve {

namespace {

// Runs a field reader of request_fields.h on a hyperparameter, naming it in full in the 400.
template <class F>
auto hyperparameter(const std::string& key, F read) {
  try {
    return read();
  } catch (ApiError& e) {
    e.param = "hyperparameters." + key;
    throw;
  }
}

// A hyperparameter that may be "auto" (OpenAI's default marker) or an integer in range.
std::optional<int64_t> auto_or_integer(const nlohmann::json& hp, const std::string& key, int64_t lo, int64_t hi) {
  auto it = hp.find(key);
  if (it != hp.end() && it->is_string()) {
    if (*it == "auto") return std::nullopt;
    bad_request("'hyperparameters." + key + "' must be \"auto\" or an integer", "hyperparameters." + key, "invalid_type");
  }
  return hyperparameter(key, [&] { return opt_integer(hp, key, lo, hi); });
}

std::optional<double> auto_or_number(const nlohmann::json& hp, const std::string& key, double lo, double hi) {
  auto it = hp.find(key);
  if (it != hp.end() && it->is_string()) {
    if (*it == "auto") return std::nullopt;
    bad_request("'hyperparameters." + key + "' must be \"auto\" or a number", "hyperparameters." + key, "invalid_type");
  }
  return hyperparameter(key, [&] { return opt_number(hp, key, lo, hi); });
}

std::optional<std::string> one_of(const nlohmann::json& hp, const std::string& key,
                                  std::initializer_list<const char*> allowed) {
  std::optional<std::string> v = hyperparameter(key, [&] { return opt_string(hp, key); });
  if (!v) return v;
  std::string names;
  for (const char* a : allowed) {
    if (*v == a) return v;
    names += (names.empty() ? "" : ", ") + std::string(a);
  }
  bad_request("'hyperparameters." + key + "' must be one of " + names, "hyperparameters." + key, "invalid_value");
}

}  // namespace

FineTuningRequest read_fine_tuning_request(const nlohmann::json& body, int64_t context) {
  FineTuningRequest r;
  r.model = req_string(body, "model");
  r.training_file = req_string(body, "training_file");
  r.validation_file = opt_string(body, "validation_file");
  r.suffix = opt_string(body, "suffix");
  if (r.suffix && (r.suffix->empty() || r.suffix->size() > 40 ||
                   !std::all_of(r.suffix->begin(), r.suffix->end(), [](char c) {
                     return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
                   })))
    bad_request("'suffix' must be 1 to 40 letters, digits, '-' or '_'", "suffix", "invalid_value");
  r.seed = opt_integer(body, "seed", 0, INT64_MAX).value_or(0);

  nlohmann::json hp = nlohmann::json::object();
  if (auto it = body.find("hyperparameters"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) bad_request("'hyperparameters' must be an object", "hyperparameters", "invalid_type");
    hp = *it;
  }
  const TrainingJobOptions defaults;
  nlohmann::json& s = r.settings;
  s["epochs"] = auto_or_integer(hp, "n_epochs", 1, 1000).value_or(defaults.epochs);
  s["batch"] = auto_or_integer(hp, "batch_size", 1, 4096).value_or(defaults.batch);
  const double multiplier = auto_or_number(hp, "learning_rate_multiplier", 1e-6, 1e4).value_or(1.0);
  s["lr"] = auto_or_number(hp, "learning_rate", 1e-9, 1.0).value_or(kBaseLearningRate * multiplier);
  // nightlora's own hyperparameters (the flags of `nightlora train` of the same names).
  s["iters"] = auto_or_integer(hp, "n_steps", 0, 10000000).value_or(0);
  s["rank"] = auto_or_integer(hp, "rank", 1, 1024).value_or(defaults.rank);
  s["alpha"] = auto_or_number(hp, "alpha", 1e-6, 1e6).value_or(defaults.alpha);
  s["seq_len"] = auto_or_integer(hp, "seq_len", 8, context)
                     .value_or(std::min<int64_t>(defaults.seq_len, context));
  s["grad_accum"] = auto_or_integer(hp, "grad_accum", 1, 1024).value_or(defaults.grad_accum);
  s["warmup"] = auto_or_integer(hp, "warmup", 0, 10000000).value_or(defaults.warmup);
  s["lora_seed"] = auto_or_integer(hp, "lora_seed", 0, INT64_MAX).value_or(0);
  s["save_every"] = auto_or_integer(hp, "save_every", 0, 10000000).value_or(defaults.save_every);
  s["precision"] = one_of(hp, "precision", {"auto", "f32", "f16", "int8"}).value_or(defaults.precision);
  s["schedule"] = one_of(hp, "schedule", {"cosine", "linear", "constant"}).value_or(defaults.schedule);
  s["train_on"] = one_of(hp, "train_on", {"completion", "all"}).value_or(defaults.train_on);
  s["seed"] = r.seed;
  return r;
}

}  // namespace nl::serve
