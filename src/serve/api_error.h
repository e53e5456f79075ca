// Errors in OpenAI's shape: {"error": {"message", "type", "param", "code"}} with the HTTP
// status that goes with them. Handlers throw ApiError; the server turns it into the answer.
#pragma once
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace nl::serve {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string type, const std::string& message, std::string param = "", std::string code = "")
      : std::runtime_error(message), status(status), type(std::move(type)), param(std::move(param)), code(std::move(code)) {}
  int status;
  std::string type;   // "invalid_request_error", "authentication_error", "rate_limit_error", ...
  std::string param;  // the request field at fault ("" : none)
  std::string code;   // a machine-readable code ("" : none)
};

// 400 invalid_request_error naming `param`.
[[noreturn]] void bad_request(const std::string& message, const std::string& param = "", const std::string& code = "");
// 404 for an unknown model, file or job id.
[[noreturn]] void not_found(const std::string& message, const std::string& param, const std::string& code);

// The JSON body of an error answer.
nlohmann::json error_body(const std::string& message, const std::string& type, const std::string& param = "",
                          const std::string& code = "");

}  // namespace nl::serve
