// nl_bench_matvec: the cpu engine's f32 matrix-vector kernels (kernels_matvec.h: f32_tiles,
// a decoder's one-token products on F16 and K-quant tiles), every set this CPU runs side by
// side, against a plain read of the same tile bytes, per weight type and qwen2.5-0.5b shape.
//
// A one-token product reads every weight byte once and does 2 flops per weight, so it is
// bound by memory or by the work per byte (dequantizing, transposing). The "read" column
// streams the same bytes with vector loads and an OR, nothing else: about the most a kernel
// can reach here at these threads. Each set's column is its weight GB/s (tile bytes / time).
// Rounds interleave the sets; the figures are medians. The sets' outputs are compared bit
// for bit (the same definition: each output one FMA chain over the columns in order) and a
// difference is reported as an error (exit status 1).
//
// Each round takes the next of enough copies of the matrix to fill --working-set-mb (256 MB
// by default, past the caches, as a decoder streams a whole model per token); 0 keeps one
// copy (then the read runs from the caches: the kernels' own speed).
//
//   nl_bench_matvec [--types f16,q4_K,q5_K,q6_K] [--threads 1] [--reps 21] [--tokens 1]
//                   [--working-set-mb 256] [--head] (adds the 151936 x 896 output head)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "../src/engine/kernels_matvec.h"
#include "../src/engine/tile_layout.h"
#include "nightlora/modelio/model.h"
#include "nightlora/quant/qtype.h"
#include "nightlora/util/error.h"
#include "nightlora/util/thread_pool.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace bench_matvec {

using Clock = std::chrono::steady_clock;
using nl::QType;
using nl::engine::MatvecKernels;
using nl::engine::TiledMatrix;

struct Shape {
  const char* name;
  int64_t rows, cols;
};

// Random weights of `type`, quantized by the reference quantizer and tiled as the engine
// tiles them at load.
TiledMatrix random_tiles(QType type, int64_t rows, int64_t cols, std::vector<uint8_t>& bytes) {
  const size_t rb = nl::qtype_row_bytes(type, cols);
  bytes.assign(rb * static_cast<size_t>(rows), 0);
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 0.05f);
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (float& v : row) v = dist(rng);
    nl::quantize_row(type, row.data(), bytes.data() + rb * static_cast<size_t>(r), cols);
  }
  nl::TensorView view;
  view.name = "w";
  view.type = type;
  view.ne = {cols, rows};
  view.data = bytes.data();
  view.nbytes = bytes.size();
  return nl::engine::make_tiles(view);
}

// Reads n bytes with 32-byte loads ORed together (returned, so the loads stay).
#if defined(__x86_64__)
__attribute__((target("avx2"))) uint64_t read_bytes(const uint8_t* p, size_t n) {
  __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
  size_t i = 0;
  for (; i + 128 <= n; i += 128) {
    a = _mm256_or_si256(a, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i)));
    b = _mm256_or_si256(b, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
    c = _mm256_or_si256(c, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
    d = _mm256_or_si256(d, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
  }
  const __m256i s = _mm256_or_si256(_mm256_or_si256(a, b), _mm256_or_si256(c, d));
  uint64_t out = static_cast<uint64_t>(_mm256_extract_epi64(s, 0) | _mm256_extract_epi64(s, 3));
  for (; i < n; ++i) out |= p[i];
  return out;
}
#else
uint64_t read_bytes(const uint8_t* p, size_t n) {
  uint64_t out = 0;
  for (size_t i = 0; i < n; ++i) out |= p[i];
  return out;
}
#endif

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace bench_matvec

int bench_matvec_main(int argc, char** argv) {
  using namespace bench_matvec;
  CLI::App app{"the cpu engine's f32 matrix-vector kernels against a plain read of the weights"};
  std::string types = "f16,q4_K,q5_K,q6_K";
  int threads = 1, reps = 21;
  int64_t tokens = 1;
  bool head = false;
  double working_set_mb = 256;
  app.add_option("--types", types, "weight types, comma-separated");
  app.add_option("--threads", threads, "threads splitting the row groups")->check(CLI::Range(1, 256));
  app.add_option("--reps", reps, "timed rounds (medians)")->check(CLI::Range(1, 100000));
  app.add_option("--tokens", tokens, "tokens per product (1-4)")->check(CLI::Range(1, 4));
  app.add_option("--working-set-mb", working_set_mb, "copies of each matrix filling this many MB (0: one)");
  app.add_flag("--head", head, "add the qwen2.5-0.5b output head (151936 x 896)");
  CLI11_PARSE(app, argc, argv);
  try {
    std::vector<const MatvecKernels*> sets;
    for (const MatvecKernels* k : {nl::engine::matvec_kernels_avx2(), nl::engine::matvec_kernels_avx512()})
      if (k && k->f32_tiles) sets.push_back(k);
    if (sets.empty()) {
      std::printf("no f32 matrix-vector kernels on this machine\n");
      return 0;
    }
    std::vector<Shape> shapes = {{"q/o 896x896", 896, 896}, {"gate/up 4864x896", 4864, 896}, {"down 896x4864", 896, 4864}};
    if (head) shapes.push_back({"head 151936x896", 151936, 896});
    nl::ThreadPool pool(threads);
    std::printf("f32 matrix-vector products, %lld token(s), %d thread(s), medians of %d interleaved rounds; GB/s of tile bytes\n",
                static_cast<long long>(tokens), threads, reps);
    std::printf("| type | shape | MB | read GB/s |");
    for (const MatvecKernels* k : sets) std::printf(" %s GB/s | %s / read |", k->isa, k->isa);
    std::printf(" bits |\n|---|---|---|---|");
    for (size_t i = 0; i < sets.size(); ++i) std::printf("---|---|");
    std::printf("---|\n");
    bool all_equal = true;
    std::stringstream ts(types);
    for (std::string tname; std::getline(ts, tname, ',');) {
      const QType type = nl::parse_qtype(tname);
      for (const Shape& s : shapes) {
        if (!nl::engine::has_tiled_layout(type, s.cols)) continue;
        std::vector<uint8_t> raw;
        const TiledMatrix first = random_tiles(type, s.rows, s.cols, raw);
        raw = {};
        const size_t n_copies = std::max<size_t>(
            1, static_cast<size_t>(working_set_mb * 1e6 / static_cast<double>(first.bytes.size()) + 0.999));
        std::vector<TiledMatrix> copies(n_copies, first);
        std::vector<float> X(static_cast<size_t>(tokens * s.cols));
        std::mt19937 rng(3);
        std::normal_distribution<float> dist(0.0f, 1.0f);
        for (float& v : X) v = dist(rng);
        const int64_t groups = first.n_groups();
        // Tasks of whole blocks of 8 groups, about 4 per thread (as the engine splits them).
        const int64_t per = std::max<int64_t>(8, (groups / (4 * threads) + 7) / 8 * 8);
        const int64_t n_tasks = (groups + per - 1) / per;
        std::vector<std::vector<float>> Y(sets.size(), std::vector<float>(static_cast<size_t>(tokens * s.rows)));
        std::vector<double> t_read;
        std::vector<std::vector<double>> t_set(sets.size());
        uint64_t sink = 0;
        for (int rep = -2; rep < reps; ++rep) {  // two untimed rounds first
          // Every measurement on its own copy, so that none finds its tiles in the caches.
          size_t next = static_cast<size_t>(rep + 2) * (sets.size() + 1);
          const TiledMatrix* m = &copies[next++ % n_copies];
          auto t0 = Clock::now();
          std::vector<uint64_t> part(static_cast<size_t>(n_tasks));
          pool.parallel_for(n_tasks, [&](int64_t i) {
            const uint8_t* a = m->tile(i * per, 0);
            const uint8_t* b = i + 1 == n_tasks ? m->bytes.data() + m->bytes.size() : m->tile((i + 1) * per, 0);
            part[static_cast<size_t>(i)] = read_bytes(a, static_cast<size_t>(b - a));
          });
          for (uint64_t v : part) sink |= v;
          if (rep >= 0) t_read.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
          for (size_t k = 0; k < sets.size(); ++k) {
            m = &copies[next++ % n_copies];
            t0 = Clock::now();
            pool.parallel_for(n_tasks, [&](int64_t i) {
              sets[k]->f32_tiles(*m, i * per, std::min(groups, (i + 1) * per), X.data(), s.cols, tokens, Y[k].data(),
                                 s.rows);
            });
            if (rep >= 0) t_set[k].push_back(std::chrono::duration<double>(Clock::now() - t0).count());
          }
        }
        const double mb = static_cast<double>(first.bytes.size()) / 1e6;
        std::printf("| %s | %s | %.1f | %.1f |", nl::qtype_name(type), s.name, mb, mb / 1e3 / median(t_read));
        bool equal = true;
        for (size_t k = 0; k < sets.size(); ++k) {
          std::printf(" %.1f | %.2f |", mb / 1e3 / median(t_set[k]), median(t_read) / median(t_set[k]));
          equal = equal && std::memcmp(Y[k].data(), Y[0].data(), Y[0].size() * sizeof(float)) == 0;
        }
        std::printf(" %s |%s\n", equal ? "equal" : "DIFFER", sink == 42 ? " " : "");
        all_equal = all_equal && equal;
      }
    }
    if (!all_equal) {
      std::fprintf(stderr, "error: the sets' outputs differ (one f32 definition): a kernel is wrong\n");
      return 1;
    }
  } catch (const nl::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
