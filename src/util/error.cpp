#include "nightlora/util/error.h"

namespace nl {

void fail(const std::string& where, const std::string& what, const std::string& hint) {
  std::string m = where.empty() ? what : where + ": " + what;
  if (!hint.empty()) m += " (" + hint + ")";
  throw Error(m);
}

}  // namespace nl
