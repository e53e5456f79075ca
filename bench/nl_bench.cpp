// The benchmark programs as one executable. Each program keeps its own name: bench/nl_bench_step
// and the others are links to nl_bench, which runs the program it was called by
// (`nl_bench step ARGS` does the same). One executable compiles CLI11 and the library's
// headers once instead of once per program: ~170 s less CPU in every build (CLI11 alone is
// ~10 s of -O3 per file that parses options).
#include <cstdio>
#include <cstring>
#include <string>

int bench_decode_batch_main(int argc, char** argv);
int bench_fingerprint_main(int argc, char** argv);
int bench_host_ops_main(int argc, char** argv);
int bench_infer_main(int argc, char** argv);
int bench_matvec_main(int argc, char** argv);
int bench_peak_main(int argc, char** argv);
int bench_products_main(int argc, char** argv);
int bench_step_main(int argc, char** argv);
int bench_tokenize_long_main(int argc, char** argv);
int bench_vulkan_products_main(int argc, char** argv);

namespace {

struct BenchProgram {
  const char* name;
  int (*run)(int, char**);
  const char* what;
};

// What each one measures: bench/CMakeLists.txt.
constexpr BenchProgram kBenchPrograms[] = {
    {"peak", bench_peak_main, "this machine's f32 FMA and int8 dot peak"},
    {"products", bench_products_main, "the frozen engine's forward and input-gradient products"},
    {"step", bench_step_main, "one LoRA training step: tokens/s, peak RSS"},
    {"host_ops", bench_host_ops_main, "the host ops of one decoder block"},
    {"tokenize_long", bench_tokenize_long_main, "one long line through each real tokenizer"},
    {"fingerprint", bench_fingerprint_main, "the data fingerprint of a resume"},
    {"infer", bench_infer_main, "prompt and decode tokens/s of nl::Decoder"},
    {"matvec", bench_matvec_main, "the f32 matrix-vector kernels against a plain read"},
    {"decode_batch", bench_decode_batch_main, "several sequences' decode, batched vs one by one"},
    {"vulkan_products", bench_vulkan_products_main, "the frozen products on the vulkan engine"},
};

int usage(FILE* to) {
  std::fprintf(to, "usage: nl_bench PROGRAM [ARGS...], or run bench/nl_bench_PROGRAM; PROGRAM is one of:\n");
  for (const auto& p : kBenchPrograms) std::fprintf(to, "  %-16s %s\n", p.name, p.what);
  return to == stderr ? 2 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  const char* slash = std::strrchr(argv[0], '/');
  std::string name = slash ? slash + 1 : argv[0];
  if (name.rfind("nl_bench_", 0) == 0) {
    name = name.substr(9);
  } else {  // nl_bench PROGRAM ARGS: PROGRAM becomes argv[0]
    if (argc < 2) return usage(stderr);
    if (!std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) return usage(stdout);
    name = argv[1];
    if (name.rfind("nl_bench_", 0) == 0) name = name.substr(9);
    --argc;
    ++argv;
  }
  for (const auto& p : kBenchPrograms)
    if (name == p.name) return p.run(argc, argv);
  std::fprintf(stderr, "nl_bench: no benchmark program named '%s'\n", name.c_str());
  return usage(stderr);
}
