// One error type for everything that can go wrong with a user's input: a model file, a data
// file, a flag. The message says what went wrong, where (file, offset, line) and what to do.
#pragma once
#include <stdexcept>
#include <string>

namespace nl {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

// Formats "<where>: <what>" and, when given, " (<hint>)".
[[noreturn]] void fail(const std::string& where, const std::string& what, const std::string& hint = "");

}  // namespace nl
