#include "backends.h"
#include "nightlora/util/error.h"

namespace nl {

std::unique_ptr<FrozenEngine> make_engine(const Model& model, const EngineOptions& opt) {
  if (opt.backend == "cpu") return make_cpu_engine(model, opt);
  fail("engine backend '" + opt.backend + "'", "unknown backend", "available backends: cpu");
}

}  // namespace nl
