// Messages built from numbers: printf into a std::string (the compiler checks the format),
// tensor shapes.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace nl {

std::string strformat(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// A tensor shape as messages print it: "[2048, 896]".
std::string shape_string(const std::vector<int64_t>& shape);

}  // namespace nl
