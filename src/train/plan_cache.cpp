#include "plan_cache.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "nightlora/job/atomic_file.h"
#include "nightlora/job/file_ops.h"
#include "nightlora/util/error.h"

namespace nl {

namespace {

namespace fs = std::filesystem;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// FNV-1a over the key's canonical text (nlohmann::json keeps object keys sorted).
std::string key_hash(const nlohmann::json& key) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : key.dump()) h = (h ^ c) * 1099511628211ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

fs::path entry_path(const std::string& dir, const nlohmann::json& key) {
  return fs::path(dir) / "precision-plans" / (key_hash(key) + ".json");
}

}  // namespace

std::string plan_cache_dir(const std::string& option) {
  if (option == "off") return "";
  if (!option.empty()) return option;
  const std::string nl_dir = env("NIGHTLORA_CACHE_DIR");
  if (nl_dir == "off") return "";
  if (!nl_dir.empty()) return nl_dir;
  const std::string xdg = env("XDG_CACHE_HOME");
  if (!xdg.empty()) return (fs::path(xdg) / "nightlora").string();
  const std::string home = env("HOME");
  if (!home.empty()) return (fs::path(home) / ".cache" / "nightlora").string();
  return "";
}

std::optional<PrecisionPlan> load_cached_plan(const std::string& dir, const nlohmann::json& key, int64_t n_layer,
                                              std::string& why_not) {
  const fs::path path = entry_path(dir, key);
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    why_not = "no plan cached for this model, engine and adapter in " + dir;
    return std::nullopt;
  }
  std::stringstream text;
  text << in.rdbuf();
  try {
    const nlohmann::json j = nlohmann::json::parse(text.str());
    if (!j.is_object() || j.value("key", nlohmann::json()) != key) {
      why_not = path.string() + " holds another key (a hash collision or an older format): recalibrating";
      return std::nullopt;
    }
    PrecisionPlan plan = PrecisionPlan::from_json(j.at("plan"), n_layer, path.string());
    if (plan.origin != "auto") {
      why_not = path.string() + " does not hold a calibrated plan";
      return std::nullopt;
    }
    return plan;
  } catch (const std::exception& e) {
    why_not = path.string() + " is damaged (" + e.what() + "): recalibrating";
    return std::nullopt;
  }
}

std::string store_cached_plan(const std::string& dir, const nlohmann::json& key, const PrecisionPlan& plan) {
  const fs::path path = entry_path(dir, key);
  try {
    make_dirs(path.parent_path().string());
    write_file_atomic(path.string(), nlohmann::json{{"key", key}, {"plan", plan.to_json()}}.dump(1) + "\n");
    return "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

}  // namespace nl
