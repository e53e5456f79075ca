// nl_bench_peak: this machine's measured peak f32 FMA and int8 dot throughput, on one core
// and on all cores at once, printed as a markdown table. The products benchmark compares
// its figures against these.
//   nl_bench_peak [--threads N] [--seconds S]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "peak_kernels.h"

namespace bench_peak {

void usage_and_exit(const char* why) {
  std::fprintf(stderr,
               "nl_bench_peak: %s\n"
               "usage: nl_bench_peak [--threads N] [--seconds S]\n"
               "  --threads N   threads for the all-cores figure (default: hardware threads)\n"
               "  --seconds S   duration of each measurement (default 1.0)\n",
               why);
  std::exit(2);
}

double parse_number(const char* flag, const char* text) {
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(v > 0)) usage_and_exit((std::string(flag) + " needs a positive number, got '" + text + "'").c_str());
  return v;
}

}  // namespace bench_peak

int bench_peak_main(int argc, char** argv) {
  using namespace bench_peak;
  int threads = static_cast<int>(std::thread::hardware_concurrency());
  if (threads < 1) threads = 1;
  double seconds = 1.0;
  for (int i = 1; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    if (!std::strcmp(argv[i], "--threads") && has_value) {
      threads = static_cast<int>(parse_number("--threads", argv[++i]));
    } else if (!std::strcmp(argv[i], "--seconds") && has_value) {
      seconds = parse_number("--seconds", argv[++i]);
    } else if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
      usage_and_exit("measures peak throughput");
    } else {
      usage_and_exit((std::string("unknown or incomplete option '") + argv[i] + "'").c_str());
    }
  }

  std::printf("| measure | instructions | threads | throughput | per thread |\n|---|---|---|---|---|\n");
  const auto row = [](const char* what, const nlbench::PeakFigure& f, const char* unit) {
    const double g = f.per_second() / 1e9;
    std::printf("| %s | %s | %d | %.1f %s | %.1f %s |\n", what, f.isa.c_str(), f.threads, g, unit, g / f.threads, unit);
    std::fflush(stdout);
  };
  row("f32 FMA", nlbench::measure_f32_fma_peak(1, seconds), "GFLOP/s");
  if (threads > 1) row("f32 FMA", nlbench::measure_f32_fma_peak(threads, seconds), "GFLOP/s");
  row("int8 dot", nlbench::measure_int8_dot_peak(1, seconds), "GOP/s");
  if (threads > 1) row("int8 dot", nlbench::measure_int8_dot_peak(threads, seconds), "GOP/s");
#if defined(__x86_64__)
  row("int8 dot, i16 sums", nlbench::measure_int8_dot_i16acc_peak(1, seconds), "GOP/s");
  if (threads > 1) row("int8 dot, i16 sums", nlbench::measure_int8_dot_i16acc_peak(threads, seconds), "GOP/s");
  if (nlbench::has_int8_vnni()) {
    row("int8 dot, vnni", nlbench::measure_int8_dot_vnni_peak(1, seconds), "GOP/s");
    if (threads > 1) row("int8 dot, vnni", nlbench::measure_int8_dot_vnni_peak(threads, seconds), "GOP/s");
  }
  {  // avx512-vnni where the CPU has it (else the same as the vnni row)
    const nlbench::PeakFigure f = nlbench::measure_int8_dot_avx512_vnni_peak(1, seconds);
    if (f.isa.find("avx512") != std::string::npos) {
      row("int8 dot, avx512-vnni", f, "GOP/s");
      if (threads > 1) row("int8 dot, avx512-vnni", nlbench::measure_int8_dot_avx512_vnni_peak(threads, seconds), "GOP/s");
    }
  }
#endif
  return 0;
}
