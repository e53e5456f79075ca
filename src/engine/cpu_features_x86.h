// What the x86-64 CPU this process runs on can execute, read once from CPUID and checked
// against the register state the OS saves (XCR0): an instruction set whose registers the OS
// does not save on a context switch cannot be used, whatever CPUID says.
// Off x86-64 every field is false.
#pragma once

namespace nl::engine {

struct X86Features {
  bool avx2 = false;         // AVX2 + FMA + F16C, YMM state saved
  bool avx_vnni = false;     // AVX-VNNI: the VEX vpdpbusd (Alder Lake and later, Zen 5), with avx2
  // AVX-512 F + BW + VL + VNNI, opmask and ZMM state saved (Ice Lake and later Xeons, Zen 4,
  // Zen 5): the EVEX vpdpbusd on 256- and 512-bit registers.
  bool avx512_vnni = false;
  bool avx512 = false;       // AVX-512 F + BW + VL, opmask and ZMM state saved (Skylake-X and later, Zen 4)
};

const X86Features& x86_features();

}  // namespace nl::engine
