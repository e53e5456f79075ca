// Picks the panel kernels for this CPU, or the ones asked for by name.
#include <cstdlib>

#include "kernels.h"
#include "nightlora/util/error.h"

namespace nl::engine {

const PanelKernels& select_kernels(const std::string& requested) {
  std::string isa = requested.empty() ? "auto" : requested;
  if (isa == "auto")
    if (const char* env = std::getenv("NL_ENGINE_ISA"); env && *env) isa = env;
  if (isa == "auto") {
    if (avx2_kernels()) return *avx2_kernels();
    if (neon_kernels()) return *neon_kernels();
    return scalar_kernels();
  }
  if (isa == "scalar") return scalar_kernels();
  if (isa == "avx2") {
    if (!avx2_kernels())
      fail("engine isa 'avx2'", "this build or CPU has no AVX2+FMA+F16C", "use auto or scalar (NL_ENGINE_ISA)");
    return *avx2_kernels();
  }
  if (isa == "neon") {
    if (!neon_kernels()) fail("engine isa 'neon'", "this is not an arm64 build", "use auto or scalar (NL_ENGINE_ISA)");
    return *neon_kernels();
  }
  fail("engine isa '" + isa + "'", "unknown instruction set",
       "use auto, scalar, avx2 or neon (option or NL_ENGINE_ISA)");
}

}  // namespace nl::engine
