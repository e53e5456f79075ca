#include "nightlora/host/adapter_spec.h"

#include <algorithm>
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

LoraAdapter stack_adapters(const std::vector<ScaledAdapter>& adapters) {
  if (adapters.empty()) fail("adapters", "nothing to stack");
  const LoraAdapter& first = adapters.front().adapter;
  LoraAdapter out;
  out.n_layer = first.n_layer;
  out.cfg = first.cfg;
  out.cfg.rank = 0;
  out.cfg.targets = {};
  for (const ScaledAdapter& s : adapters) {
    if (s.adapter.n_layer != first.n_layer || s.adapter.pairs.size() != first.pairs.size())
      fail(s.spec.path, "has another layer count than " + adapters.front().spec.path);
    out.cfg.rank += s.adapter.cfg.rank;
    for (size_t t = 0; t < out.cfg.targets.size(); ++t) out.cfg.targets[t] = out.cfg.targets[t] || s.adapter.cfg.targets[t];
  }
  out.cfg.alpha = static_cast<float>(out.cfg.rank);
  out.cfg.dropout = 0;
  const int64_t R = out.cfg.rank;
  out.pairs.resize(first.pairs.size());
  for (size_t i = 0; i < out.pairs.size(); ++i) {
    LoraPair& o = out.pairs[i];
    for (const ScaledAdapter& s : adapters)
      if (s.adapter.pairs[i].enabled) {
        o.enabled = true;
        o.in = s.adapter.pairs[i].in;
        o.out = s.adapter.pairs[i].out;
      }
    if (!o.enabled) continue;
    o.A.assign(static_cast<size_t>(R * o.in), 0.0f);
    o.B.assign(static_cast<size_t>(o.out * R), 0.0f);
    int64_t r0 = 0;  // this adapter's first row of A / column of B
    for (const ScaledAdapter& s : adapters) {
      const LoraPair& p = s.adapter.pairs[i];
      const int64_t r = s.adapter.cfg.rank;
      if (p.enabled) {
        if (p.in != o.in || p.out != o.out) fail(s.spec.path, "has other projection shapes than the other adapters");
        const float f = s.factor();
        std::copy(p.A.begin(), p.A.end(), o.A.begin() + r0 * o.in);
        for (int64_t row = 0; row < o.out; ++row)
          for (int64_t k = 0; k < r; ++k) o.B[static_cast<size_t>(row * R + r0 + k)] = f * p.B[static_cast<size_t>(row * r + k)];
      }
      r0 += r;
    }
  }
  return out;
}

}  // namespace nl
