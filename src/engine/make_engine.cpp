#include "backends.h"
#include "nightlora/util/error.h"

namespace nl {

std::unique_ptr<FrozenEngine> make_engine(const Model& model, const EngineOptions& opt) {
  if (opt.backend == "cpu") return make_cpu_engine(model, opt);
  if (opt.backend == "vulkan") {
#ifdef NL_HAVE_VULKAN
    return make_vulkan_engine(model, opt);
#else
    fail("engine backend 'vulkan'", "this build has no Vulkan backend",
         "install libvulkan-dev and glslc (scripts/setup.sh does) and rebuild, or use --engine cpu");
#endif
  }
  if (opt.backend == "auto") {
    // A GPU when there is one; a software Vulkan device (lavapipe) runs on the same cores
    // as the cpu backend, slower, so auto never picks it.
#ifdef NL_HAVE_VULKAN
    if (vulkan_gpu_present()) return make_vulkan_engine(model, opt);
#endif
    return make_cpu_engine(model, opt);
  }
  fail("engine backend '" + opt.backend + "'", "unknown backend", "available backends: auto, cpu, vulkan");
}

}  // namespace nl
