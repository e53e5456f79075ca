// The data identity's cost: nl::fingerprint_data_file over a file of N MiB (made in a temp
// folder, random bytes), best of a few runs. The target (issue 36): 100 MB well under a
// second, so resuming on a large data set stays instant.
//   nl_bench_fingerprint [--mib N] [--reps R]
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <vector>

#include "nightlora/data/data_fingerprint.h"

int bench_fingerprint_main(int argc, char** argv) {
  CLI::App app{"time the byte-exact data fingerprint"};
  int mib = 100, reps = 3;
  app.add_option("--mib", mib, "file size in MiB")->capture_default_str();
  app.add_option("--reps", reps, "runs (the best is kept)")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("nl_bench_fingerprint." + std::to_string(::getpid()));
  {
    std::ofstream f(path, std::ios::binary);
    std::mt19937_64 rng(1);
    std::vector<uint64_t> block(1 << 17);  // 1 MiB
    for (int m = 0; m < mib; ++m) {
      for (auto& w : block) w = rng();
      f.write(reinterpret_cast<const char*>(block.data()), static_cast<std::streamsize>(block.size() * 8));
    }
  }
  double best = 1e30;
  std::string fp;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    fp = nl::fingerprint_data_file(path.string());
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::filesystem::remove(path);
  std::printf("{\"mib\": %d, \"seconds\": %.4f, \"gib_per_s\": %.2f, \"fingerprint\": \"%s\"}\n", mib, best,
              mib / 1024.0 / best, fp.c_str());
  return 0;
}
