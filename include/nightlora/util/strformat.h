// printf into a std::string (for messages built from numbers; the compiler checks the format).
#pragma once
#include <string>

namespace nl {

std::string strformat(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace nl
