#include "serve/request_fields.h"

#include <cmath>

#include "serve/api_error.h"

namespace nl::serve {

nlohmann::json parse_body_object(const std::string& body) {
  nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded())
    bad_request("the request body is not valid JSON: send one JSON object (Content-Type: application/json)");
  if (!j.is_object()) bad_request("the request body must be a JSON object");
  return j;
}

namespace {
const nlohmann::json* field(const nlohmann::json& obj, const std::string& key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}
}  // namespace

std::optional<std::string> opt_string(const nlohmann::json& obj, const std::string& key) {
  const nlohmann::json* v = field(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_string()) bad_request("'" + key + "' must be a string", key, "invalid_type");
  return v->get<std::string>();
}

std::optional<bool> opt_bool(const nlohmann::json& obj, const std::string& key) {
  const nlohmann::json* v = field(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) bad_request("'" + key + "' must be a boolean", key, "invalid_type");
  return v->get<bool>();
}

std::optional<double> opt_number(const nlohmann::json& obj, const std::string& key, double lo, double hi) {
  const nlohmann::json* v = field(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) bad_request("'" + key + "' must be a number", key, "invalid_type");
  const double x = v->get<double>();
  if (!std::isfinite(x) || x < lo || x > hi)
    bad_request("'" + key + "' must be between " + nlohmann::json(lo).dump() + " and " + nlohmann::json(hi).dump(), key,
                "invalid_value");
  return x;
}

std::optional<int64_t> opt_integer(const nlohmann::json& obj, const std::string& key, int64_t lo, int64_t hi) {
  const nlohmann::json* v = field(obj, key);
  if (!v) return std::nullopt;
  if (v->is_number_integer()) {
    // Unsigned values above INT64_MAX read as negative through get<int64_t>: check first.
    if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(hi))
      bad_request("'" + key + "' must be at most " + std::to_string(hi), key, "invalid_value");
    const int64_t x = v->get<int64_t>();
    if (x < lo || x > hi)
      bad_request("'" + key + "' must be between " + std::to_string(lo) + " and " + std::to_string(hi), key,
                  "invalid_value");
    return x;
  }
  if (v->is_number_float()) {
    const double d = v->get<double>();
    if (std::isfinite(d) && d == std::floor(d) && d >= static_cast<double>(lo) && d <= static_cast<double>(hi))
      return static_cast<int64_t>(d);
    bad_request("'" + key + "' must be a whole number between " + std::to_string(lo) + " and " + std::to_string(hi),
                key, "invalid_value");
  }
  bad_request("'" + key + "' must be an integer", key, "invalid_type");
}

std::string req_string(const nlohmann::json& obj, const std::string& key) {
  std::optional<std::string> s = opt_string(obj, key);
  if (!s) bad_request("'" + key + "' is required", key, "missing_required_parameter");
  return *s;
}

}  // namespace nl::serve
