// Peak-throughput microkernels of this machine, shared by nl_bench_peak and
// nl_bench_products (which reports each product's share of the peak).
//  - f32 FMA: several independent accumulator chains of vector FMAs, enough of them to
//    cover the FMA latency, so the loop is bound by FMA throughput and not by latency.
//  - int8 dot: the instruction sequence a quantized dot product uses (AVX2: vpmaddubsw +
//    vpmaddwd + vpaddd, or vpdpbusd with AVX-VNNI; arm64: sdot), again on independent chains.
// The ISA is chosen at run time (x86-64: AVX2+FMA when the CPU has them, else SSE2), and the
// SIMD loops carry target attributes, so the default build runs on any x86-64.
#pragma once
#include <cstdint>
#include <string>

namespace nlbench {

struct PeakFigure {
  std::string isa;      // the instructions measured, e.g. "avx2+fma (8 lanes)"
  int threads = 1;
  double seconds = 0;   // wall time of the measurement
  double ops = 0;       // FLOPs (f32: 2 per FMA lane) or int8 ops (2 per multiply-add)
  double per_second() const { return seconds > 0 ? ops / seconds : 0; }
};

// Runs the f32 FMA kernel on `threads` threads at once for about `seconds`.
PeakFigure measure_f32_fma_peak(int threads, double seconds);
// Runs the int8 dot kernel on `threads` threads at once for about `seconds`.
PeakFigure measure_int8_dot_peak(int threads, double seconds);
// The int8 sequence of the engine's Q4_0 kernel: products summed in int16 over a 32-value
// block before one widening (x86-64 AVX2; elsewhere the same as measure_int8_dot_peak).
PeakFigure measure_int8_dot_i16acc_peak(int threads, double seconds);
// The sequence of the engine's avx2-vnni int8 set (vpdpbusd), where the CPU has AVX-VNNI
// (elsewhere the same as measure_int8_dot_peak).
bool has_int8_vnni();
PeakFigure measure_int8_dot_vnni_peak(int threads, double seconds);
// The 512-bit vpdpbusd of the engine's avx512-vnni set, where the CPU has AVX-512 VNNI
// (elsewhere the same as measure_int8_dot_vnni_peak).
PeakFigure measure_int8_dot_avx512_vnni_peak(int threads, double seconds);

}  // namespace nlbench
