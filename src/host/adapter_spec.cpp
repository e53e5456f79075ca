#include "nightlora/host/adapter_spec.h"

#include <cmath>
#include <cstdlib>

#include "nightlora/host/adapter_io.h"
#include "nightlora/util/error.h"

namespace nl {

AdapterSpec parse_adapter_spec(const std::string& arg) {
  AdapterSpec s;
  s.path = arg;
  const size_t colon = arg.rfind(':');
  // A ':' inside a folder name (before the last '/') is part of the path.
  if (colon != std::string::npos && arg.find('/', colon) == std::string::npos) {
    s.path = arg.substr(0, colon);
    const std::string text = arg.substr(colon + 1);
    char* end = nullptr;
    const float v = text.empty() ? NAN : std::strtof(text.c_str(), &end);
    if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(v))
      fail("--adapter " + arg, "scale '" + text + "' is not a finite number",
           "write PATH or PATH:SCALE, e.g. adapter.gguf:0.5");
    s.scale = v;
  }
  if (s.path.empty()) fail("--adapter " + arg, "no adapter path", "write PATH or PATH:SCALE, e.g. adapter.gguf:0.5");
  return s;
}

std::vector<ScaledAdapter> load_scaled_adapters(const std::vector<AdapterSpec>& specs, const Model& m) {
  std::vector<ScaledAdapter> out;
  out.reserve(specs.size());
  for (const AdapterSpec& s : specs) out.push_back({s, load_adapter(s.path, m)});
  return out;
}

}  // namespace nl
