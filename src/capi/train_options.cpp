#include "capi/train_options.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <variant>
#include <vector>

#include "nightlora/util/error.h"

namespace nl::capi {

namespace {

using nlohmann::json;
using O = TrainingJobOptions;

const char* kWhere = "training options";

// One option: the field it sets, and the CLI's check of its value (if any).
using Field = std::variant<std::string O::*, int64_t O::*, uint64_t O::*, int O::*, double O::*, float O::*, bool O::*>;
struct Option {
  Option(Field f, std::vector<std::string> values = {}, double lo = -std::numeric_limits<double>::infinity(),
         double hi = std::numeric_limits<double>::infinity(), bool lo_exclusive = false)
      : field(f), one_of(std::move(values)), min(lo), max(hi), min_exclusive(lo_exclusive) {}
  Field field;
  std::vector<std::string> one_of;  // accepted values of a string option (CLI11 IsMember)
  double min, max;                  // accepted numbers
  bool min_exclusive;               // CLI11 PositiveNumber: > 0
};

// `nightlora train`'s options, by the names the CLI gives them (cli/cmd_train.cpp).
const std::map<std::string, Option>& options() {
  const double inf = std::numeric_limits<double>::infinity();
  static const std::map<std::string, Option> table = {
      {"model", {&O::model}},
      {"data", {&O::data}},
      {"valid", {&O::valid}},
      {"out", {&O::out}},
      {"adapter", {&O::adapter}},
      {"rank", {&O::rank}},
      {"alpha", {&O::alpha}},
      {"dropout", {&O::dropout}},
      {"targets", {&O::targets}},
      {"lora-seed", {&O::lora_seed}},
      {"lr", {&O::lr}},
      {"schedule", {&O::schedule}},
      {"warmup", {&O::warmup}},
      {"epochs", {&O::epochs}},
      {"iters", {&O::iters}},
      {"batch", {&O::batch}},
      {"grad-accum", {&O::grad_accum}},
      {"seq-len", {&O::seq_len}},
      {"long-examples", {&O::long_examples, {"truncate", "skip", "error"}}},
      {"bad-lines", {&O::bad_lines, {"skip", "error"}}},
      {"seed", {&O::seed}},
      {"threads", {&O::threads, {}, 0}},
      {"engine", {&O::engine, {"auto", "cpu", "vulkan"}}},
      {"host-threads", {&O::host_threads, {}, 0, inf, true}},
      {"max-memory", {&O::max_memory}},
      {"keep-blocks", {&O::keep_blocks, {}, 0, inf, true}},
      {"train-on", {&O::train_on}},
      {"chat-format", {&O::chat_format}},
      {"val-every", {&O::val_every}},
      {"early-stop", {&O::early_stop}},
      {"max-bad-steps", {&O::max_bad_steps}},
      {"spike-factor", {&O::spike_factor}},
      {"max-rollbacks", {&O::max_rollbacks}},
      {"wait-lock", {&O::wait_lock}},
      {"weight-decay", {&O::weight_decay}},
      {"clip", {&O::clip}},
      {"method", {&O::method}},
      {"mezo-eps", {&O::mezo_eps}},
      {"save-every", {&O::save_every, {}, 0}},
      {"save-every-sec", {&O::save_every_sec, {}, 0}},
      {"keep", {&O::keep, {}, 1, 1000}},
      {"resume", {&O::resume}},
      {"background", {&O::background}},
      {"normal-priority", {&O::normal_priority}},
      {"require-power", {&O::require_power}},
      {"min-battery", {&O::min_battery}},
      {"window", {&O::window}},
      {"max-wall", {&O::max_wall}},
      {"max-energy", {&O::max_energy}},
      {"sysfs-root", {&O::sysfs_root}},
      {"recheck-sec", {&O::recheck_sec, {}, 0, inf, true}},
      {"temp-ceiling", {&O::temp_ceiling}},
      {"duty", {&O::duty}},
      {"temp-source", {&O::temp_source}},
      {"fake-clock", {&O::fake_clock}},
      {"pace-poll-sec", {&O::pace_poll_sec, {}, 0, inf, true}},
      {"precision", {&O::precision}},
      {"precision-tol", {&O::precision_tol}},
      {"precision-calib-tokens", {&O::precision_calib_tokens}},
      {"precision-calib-passes", {&O::precision_calib_passes}},
      {"precision-search", {&O::precision_search, {"groups", "each"}}},
      {"plan-cache", {&O::plan_cache}},
      {"max-steps", {&O::max_steps, {}, 0}},
  };
  return table;
}

std::string known_keys() {
  std::string s;
  for (const auto& [k, o] : options()) s += (s.empty() ? "" : ", ") + k;
  return s;
}

[[noreturn]] void bad_value(const std::string& key, const std::string& what) {
  fail(std::string(kWhere) + ": \"" + key + "\"", what);
}

void check_range(const std::string& key, const Option& opt, double v) {
  const bool low = opt.min_exclusive ? !(v > opt.min) : !(v >= opt.min);
  if (low || !(v <= opt.max)) {
    std::string range = opt.min_exclusive ? "greater than " + nlohmann::json(opt.min).dump()
                                          : "at least " + nlohmann::json(opt.min).dump();
    if (std::isfinite(opt.max)) range += " and at most " + nlohmann::json(opt.max).dump();
    bad_value(key, "must be " + range + ", not " + nlohmann::json(v).dump());
  }
}

// An integer of type T from a JSON integer (or a float with an integral value).
template <class T>
T integer(const std::string& key, const json& v) {
  long double x = 0;
  if (v.is_number_unsigned()) x = static_cast<long double>(v.get<uint64_t>());
  else if (v.is_number_integer()) x = static_cast<long double>(v.get<int64_t>());
  else if (v.is_number_float() && std::isfinite(v.get<double>()) && std::floor(v.get<double>()) == v.get<double>())
    x = v.get<double>();
  else bad_value(key, "must be an integer, not " + v.dump());
  if (x < static_cast<long double>(std::numeric_limits<T>::min()) ||
      x > static_cast<long double>(std::numeric_limits<T>::max()))
    bad_value(key, v.dump() + " is out of range");
  return static_cast<T>(x);
}

double number(const std::string& key, const json& v) {
  if (!v.is_number()) bad_value(key, "must be a number, not " + v.dump());
  return v.get<double>();
}

void set(O& o, const std::string& key, const Option& opt, const json& v) {
  std::visit(
      [&](auto member) {
        using T = std::remove_reference_t<decltype(o.*member)>;
        if constexpr (std::is_same_v<T, std::string>) {
          // max-memory also takes a number of bytes.
          if (v.is_string()) o.*member = v.get<std::string>();
          else if (key == "max-memory" && v.is_number_integer() && v.get<int64_t>() >= 0) o.*member = v.dump();
          else bad_value(key, "must be a string, not " + v.dump());
          if (!opt.one_of.empty() &&
              std::find(opt.one_of.begin(), opt.one_of.end(), o.*member) == opt.one_of.end()) {
            std::string list;
            for (const std::string& s : opt.one_of) list += (list.empty() ? "" : ", ") + s;
            bad_value(key, "'" + o.*member + "' is not one of " + list);
          }
        } else if constexpr (std::is_same_v<T, bool>) {
          if (!v.is_boolean()) bad_value(key, "must be true or false, not " + v.dump());
          o.*member = v.get<bool>();
        } else if constexpr (std::is_floating_point_v<T>) {
          const double x = number(key, v);
          check_range(key, opt, x);
          o.*member = static_cast<T>(x);
        } else {
          const T x = integer<T>(key, v);
          check_range(key, opt, static_cast<double>(x));
          o.*member = x;
        }
      },
      opt.field);
}

}  // namespace

TrainingJobOptions parse_train_options(const std::string& text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    fail(kWhere, std::string("not valid JSON: ") + e.what(),
         "give one JSON object, e.g. {\"data\": \"train.jsonl\", \"out\": \"run\", \"iters\": 20}");
  }
  if (!j.is_object()) fail(kWhere, "must be a JSON object, not " + std::string(j.type_name()));
  O o;
  std::set<std::string> seen;
  json record = json::object();  // run.json's "options": what the caller gave, by the CLI's names
  for (auto it = j.begin(); it != j.end(); ++it) {
    std::string key = it.key();
    std::replace(key.begin(), key.end(), '_', '-');
    if (!seen.insert(key).second) bad_value(key, "is given twice (as \"" + it.key() + "\" and another spelling)");
    auto opt = options().find(key);
    if (opt == options().end())
      fail(kWhere, "unknown key \"" + it.key() + "\"",
           "the keys are the `nightlora train` option names: " + known_keys());
    set(o, key, opt->second, it.value());
    record[key] = it.value();
  }
  o.options_record = record;
  for (const char* required : {"data", "out"})
    if (!seen.count(required) || (required == std::string("data") ? o.data : o.out).empty())
      fail(kWhere, std::string("\"") + required + "\" is required", "the training data file and the output folder");
  o.rank_given = seen.count("rank") > 0;
  o.alpha_given = seen.count("alpha") > 0;
  o.targets_given = seen.count("targets") > 0;
  return o;
}

}  // namespace nl::capi
