// The precision-plan cache: `--precision auto` (the default) calibrates once per model,
// engine and adapter shape, and later runs (a second run, every night of a nightly job) take
// the plan from the cache instead of recalibrating.
//
// Entries live in `<cache dir>/precision-plans/<hash>.json`, each holding its full key and
// the plan; a lookup checks the key itself, not only the hash. The key is what a plan
// depends on: the model file's identity (size, time and name, as a run's identity has it),
// the engine backend and its kernel set, the LoRA targets and rank, and the calibration
// settings (tolerance, tokens, search). The training data is not in it: which products bear
// int8 is a property of the model and the engine far more than of the batch the measure
// was taken on (use --plan-cache off to calibrate on this run's own data).
//
// The cache dir: --plan-cache DIR, else $NIGHTLORA_CACHE_DIR, else $XDG_CACHE_HOME/nightlora,
// else ~/.cache/nightlora; "off" (either way) turns it off. A cache that cannot be read or
// written is never an error: the run calibrates and says why the cache was not used.
#pragma once
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "nightlora/host/precision_plan.h"

namespace nl {

// The cache folder for `option` (the --plan-cache value, "" when not given); "" when off or
// no folder can be named.
std::string plan_cache_dir(const std::string& option);

// The entry for `key`, when one is stored and valid for n_layer layers. `why_not` says why
// there is none (no entry, unreadable, another key under that hash, a damaged plan).
std::optional<PrecisionPlan> load_cached_plan(const std::string& dir, const nlohmann::json& key, int64_t n_layer,
                                              std::string& why_not);

// Stores the plan under `key` (atomically). Returns "" or why it could not.
std::string store_cached_plan(const std::string& dir, const nlohmann::json& key, const PrecisionPlan& plan);

}  // namespace nl
