// The NEON int8 kernel set with sdot (kernels_int8_neon_body.h with NL_INT8_DOTPROD = 1),
// compiled for ARMv8.2 with the dot-product extension function by function, so the rest of
// the library stays ARMv8.0 code, and handed out only when the CPU reports the extension.
#include "kernels_int8.h"

#if defined(__aarch64__)
#include <arm_neon.h>
#include <sys/auxv.h>

#include <cstring>

#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif

// The target arm_neon.h declares its sdot intrinsics with (a function may inline only
// callees whose architecture its own includes).
#pragma GCC push_options
#pragma GCC target("arch=armv8.2-a+dotprod")
#define NL_INT8_DOTPROD 1
#include "kernels_int8_neon_body.h"
#pragma GCC pop_options

namespace nl::engine {

const Int8Kernels* int8_kernels_neon_dotprod() {
  // The check comes first: neon_int8_kernels() here is compiled with +dotprod (as on x86,
  // where building the AVX-512 table was an illegal instruction on older CPUs).
  if ((getauxval(AT_HWCAP) & HWCAP_ASIMDDP) == 0) return nullptr;
  static const Int8Kernels k = neon_int8_kernels("neon-dotprod");
  return &k;
}

}  // namespace nl::engine

#else

namespace nl::engine {
const Int8Kernels* int8_kernels_neon_dotprod() { return nullptr; }
}  // namespace nl::engine

#endif
