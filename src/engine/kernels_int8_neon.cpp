// The NEON int8 kernel set of the arm64 baseline (kernels_int8_neon_body.h with widening
// dot products), and the choice between it and the sdot set.
#include "kernels_int8.h"

#if defined(__aarch64__)
#include <arm_neon.h>

#include <cstring>

#define NL_INT8_DOTPROD 0
#include "kernels_int8_neon_body.h"

namespace nl::engine {

const Int8Kernels* int8_kernels_neon_widening() {
  static const Int8Kernels k = neon_int8_kernels("neon");
  return &k;
}

const Int8Kernels* int8_kernels_neon() {
  if (const Int8Kernels* dot = int8_kernels_neon_dotprod()) return dot;
  return int8_kernels_neon_widening();
}

}  // namespace nl::engine

#else

namespace nl::engine {
const Int8Kernels* int8_kernels_neon() { return nullptr; }
const Int8Kernels* int8_kernels_neon_widening() { return nullptr; }
}  // namespace nl::engine

#endif
