// Reading a request's JSON body with the types OpenAI's API documents: a wrong type, a value
// out of range or malformed JSON is a 400 naming the field, never an exception that escapes.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace nl::serve {

// Parses a request body that must be one JSON object (400 otherwise).
nlohmann::json parse_body_object(const std::string& body);

// Optional fields: absent or null gives nullopt; a present value of another type is a 400.
std::optional<std::string> opt_string(const nlohmann::json& obj, const std::string& key);
std::optional<bool> opt_bool(const nlohmann::json& obj, const std::string& key);
// A number within [lo, hi] (400 otherwise); integers must be whole numbers.
std::optional<double> opt_number(const nlohmann::json& obj, const std::string& key, double lo, double hi);
std::optional<int64_t> opt_integer(const nlohmann::json& obj, const std::string& key, int64_t lo, int64_t hi);

// A required string (400 when absent, null or not a string).
std::string req_string(const nlohmann::json& obj, const std::string& key);

}  // namespace nl::serve
