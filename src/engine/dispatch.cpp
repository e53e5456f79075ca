// Picks the panel kernels and the int8 kernel set for this CPU, or the ones asked for by
// name (the engine's isa option, NL_ENGINE_ISA, NL_INT8_VNNI: kernels.h, kernels_int8.h).
#include <cstdlib>

#include "kernels.h"
#include "kernels_int8.h"
#include "nightlora/util/error.h"

namespace nl::engine {

namespace {

// The separator between the panel isa and the int8 set in engine_isa_name's names.
constexpr const char* kInt8Part = ", int8 ";

// The request with "auto" resolved through NL_ENGINE_ISA (still "auto" when it is unset).
std::string resolve_request(const std::string& requested) {
  std::string isa = requested.empty() ? "auto" : requested;
  if (isa == "auto")
    if (const char* env = std::getenv("NL_ENGINE_ISA"); env && *env) isa = env;
  return isa;
}

}  // namespace

std::string panel_isa_of(const std::string& isa) {
  const size_t at = isa.find(kInt8Part);
  return at == std::string::npos ? isa : isa.substr(0, at);
}

std::string engine_isa_name(const char* panel_isa, const Int8Kernels& k) {
  const std::string panel = panel_isa;
  // The panel isa alone only where it names the same set and means it (no int8 part in the
  // name would give this set back): "avx2" with NL_INT8_VNNI=0, "scalar", "neon" (widening).
  const bool implied = panel == k.isa && &int8_kernels_for(panel) == &k;
  return implied ? panel : panel + kInt8Part + k.isa;
}

const PanelKernels& select_kernels(const std::string& requested) {
  const std::string isa = panel_isa_of(resolve_request(requested));
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
       "use auto, scalar, avx2 or neon (option or NL_ENGINE_ISA), optionally followed by ', int8 SET' as the "
       "engine reports it");
}

const Int8Kernels& int8_kernels_for(const std::string& isa) {
  const size_t at = isa.find(kInt8Part);
  if (at != std::string::npos) {  // a set by name
    const std::string name = isa.substr(at + std::string(kInt8Part).size());
    for (const Int8Kernels* k :
         {&int8_kernels_scalar(), int8_kernels_avx2_plain(), int8_kernels_avx2_vnni(), int8_kernels_avx512_vnni(),
          int8_kernels_avx2_vnni_emulated(), int8_kernels_neon_widening(), int8_kernels_neon_dotprod()})
      if (k && name == k->isa) return *k;
    fail("engine isa '" + isa + "'", "no int8 kernel set '" + name + "' runs on this build and CPU",
         "name one this CPU runs (scalar, avx2, avx2-vnni, avx512-vnni, neon, neon-dotprod), or leave out the "
         "int8 part (NL_INT8_VNNI picks among the x86-64 sets)");
  }
  if (isa == "avx2" && int8_kernels_avx2()) return *int8_kernels_avx2();
  if (isa.rfind("neon", 0) == 0 && int8_kernels_neon()) return *int8_kernels_neon();
  return int8_kernels_scalar();
}

const Int8Kernels& select_int8_kernels(const std::string& requested, const char* panel_isa) {
  const std::string isa = resolve_request(requested);
  return int8_kernels_for(isa.find(kInt8Part) != std::string::npos ? isa : std::string(panel_isa));
}

}  // namespace nl::engine
