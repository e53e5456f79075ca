#include "backends.h"
#include "kernels.h"
#include "kernels_int8.h"
#include "nightlora/util/error.h"

namespace nl {

std::vector<std::string> engine_backends_built() {
#ifdef NL_HAVE_VULKAN
  return {"cpu", "vulkan"};
#else
  return {"cpu"};
#endif
}

std::string cpu_engine_isa(const std::string& isa) {
  const engine::PanelKernels& panels = engine::select_kernels(isa);
  return engine::engine_isa_name(panels.isa, engine::select_int8_kernels(isa, panels.isa));
}

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
