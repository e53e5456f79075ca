// Names of the precision modes, as the CLI and the stored precision plan spell them.
#include "nightlora/engine/frozen_engine.h"
#include "nightlora/util/error.h"

namespace nl {

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::F32: return "f32";
    case Precision::F16: return "f16";
    case Precision::Int8: return "int8";
  }
  return "f32";
}

Precision parse_precision(const std::string& s) {
  if (s == "f32") return Precision::F32;
  if (s == "f16") return Precision::F16;
  if (s == "int8") return Precision::Int8;
  fail("precision '" + s + "'", "unknown precision mode", "use f32, f16 or int8");
}

}  // namespace nl
