// For hostile-input tests: the message of the nl::Error that `action` throws. Any other exception
// (a parser's, a std::out_of_range from a conversion) is a test failure, as is no error at all:
// bad input must always reach the user as an nl::Error naming the file and the place.
#pragma once
#include <exception>
#include <string>
#include <typeinfo>

#include <gtest/gtest.h>

#include "nightlora/util/error.h"

namespace nltest {

template <class Action>
std::string input_error_of(Action&& action) {
  try {
    action();
  } catch (const nl::Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not an nl::Error but " << typeid(e).name() << ": " << e.what();
    return "";
  }
  ADD_FAILURE() << "no error";
  return "";
}

// Expects `message` to hold every fragment.
inline void expect_mentions(const std::string& message, std::initializer_list<std::string> fragments) {
  for (const std::string& f : fragments) EXPECT_NE(message.find(f), std::string::npos) << "no '" << f << "' in: " << message;
}

}  // namespace nltest
