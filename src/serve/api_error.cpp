#include "serve/api_error.h"

namespace nl::serve {

void bad_request(const std::string& message, const std::string& param, const std::string& code) {
  throw ApiError(400, "invalid_request_error", message, param, code);
}

void not_found(const std::string& message, const std::string& param, const std::string& code) {
  throw ApiError(404, "invalid_request_error", message, param, code);
}

nlohmann::json error_body(const std::string& message, const std::string& type, const std::string& param,
                          const std::string& code) {
  nlohmann::json e = {{"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}};
  if (!param.empty()) e["param"] = param;
  if (!code.empty()) e["code"] = code;
  return {{"error", e}};
}

}  // namespace nl::serve
