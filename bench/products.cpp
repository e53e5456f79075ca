// nl_bench_products: times the frozen engine's two products,
//   forward         Y  = X · Wᵀ   (T x in  -> T x out)
//   input gradient  dX = dY · W   (T x out -> T x in)
// per weight type and precision mode (f32, f16, int8: --precision), on the distinct
// projection shapes of real models (from the synth presets), at several token counts. Weights are random and quantized in memory into a
// one-layer Model, so no model file is needed. For each case it prints the time, the
// effective GFLOP/s (2·T·in·out / time), the share of this machine's measured peak (the f32
// FMA peak for f32 and f16 modes, the int8 dot peak for int8 mode), and the
// input-gradient/forward time ratio next to its target (≤ 1.15).
// Timings are the best of several repetitions (the minimum is the least disturbed by other
// load on the machine), the two products' runs alternating (best_of_alternating).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <new>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "../src/engine/kernels_int8.h"  // which int8 set the engine runs (for its peak)
#include "nightlora/engine/frozen_engine.h"
#include "nightlora/host/lora.h"
#include "nightlora/modelio/synth.h"
#include "nightlora/quant/qtype.h"
#include "nightlora/tokenizer/tokenizer.h"  // complete type for Model's unique_ptr<Tokenizer>
#include "nightlora/util/error.h"
#include "nightlora/util/thread_pool.h"
#include "peak_kernels.h"

namespace bench_products {

// The products' inputs and outputs start on a cache line, as the training step's arena
// hands them to the engine (train_step.cpp allocates it 64-byte aligned). A std::vector's
// large storage starts 16 bytes past a line, so half the 32-byte loads of each row cross
// two lines: measured on Zen 5 (2 threads, Q4_0 int8, qwen2.5 q/gate/down at 128 and 512
// tokens, 3 interleaved rounds), the input gradient 1.02x slower on the mean, up to 1.26x
// on qwen2.5-0.5b q and gate.
template <class T>
struct CacheLineAllocator {
  using value_type = T;
  CacheLineAllocator() = default;
  template <class U>
  explicit CacheLineAllocator(const CacheLineAllocator<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(64))); }
  void deallocate(T* p, size_t) { ::operator delete(p, std::align_val_t(64)); }
  bool operator==(const CacheLineAllocator&) const { return true; }
};
using Floats = std::vector<float, CacheLineAllocator<float>>;

using Clock = std::chrono::steady_clock;
constexpr double kInputGradTargetRatio = 1.15;

// One distinct projection shape of a model; projections sharing a shape (k and v, gate and
// up) are timed once and listed together.
struct Shape {
  std::string model;
  std::string projs;  // "k,v"
  nl::Proj first;     // the projection whose handle is timed
  int64_t in = 0, out = 0;
  bool head = false;  // the output head (vocab x d_model) instead
};

std::vector<Shape> distinct_shapes(const std::string& preset, const std::vector<std::string>& wanted_projs) {
  const nl::ModelConfig& cfg = nl::find_synth_preset(preset).config;
  std::vector<Shape> shapes;
  for (int p = 0; p < nl::kNumProj; ++p) {
    const nl::Proj proj = static_cast<nl::Proj>(p);
    const std::string name = nl::proj_name(proj);
    if (!wanted_projs.empty() && std::find(wanted_projs.begin(), wanted_projs.end(), name) == wanted_projs.end()) continue;
    const auto [in, out] = nl::proj_shape(cfg, proj);
    auto same = std::find_if(shapes.begin(), shapes.end(), [&](const Shape& s) { return s.in == in && s.out == out; });
    if (same != shapes.end()) {
      same->projs += "," + name;
    } else {
      shapes.push_back({preset, name, proj, in, out});
    }
  }
  // The output head only when asked for (it is as large as all of a layer's projections
  // together on Qwen's 151936-token vocabulary): in the step it runs per 64-row loss chunk.
  if (std::find(wanted_projs.begin(), wanted_projs.end(), "head") != wanted_projs.end())
    shapes.push_back({preset, "head", nl::Proj::Q, cfg.d_model, cfg.vocab, true});
  return shapes;
}

// A one-layer Model holding random weights of one type, quantized in memory, with the seven
// projections of `preset` (the engine loads all seven plus an output head).
std::unique_ptr<nl::Model> random_one_layer_model(const std::string& preset, nl::QType type, bool full_head,
                                                  nl::ThreadPool& pool) {
  auto model = std::make_unique<nl::Model>();
  model->config = nl::find_synth_preset(preset).config;
  model->config.n_layer = 1;
  model->source_path = "<in-memory " + preset + " " + nl::qtype_name(type) + ">";
  model->source_format = "memory";
  model->weights.layers.resize(1);
  auto make = [&](const std::string& name, int64_t rows, int64_t cols, uint64_t seed) {
    const size_t row_bytes = nl::qtype_row_bytes(type, cols);
    auto bytes = std::shared_ptr<uint8_t[]>(new uint8_t[row_bytes * static_cast<size_t>(rows)]);
    // Rows are generated from (seed, row), so the content does not depend on the threads.
    pool.parallel_ranges(rows, [&](int64_t r0, int64_t r1) {
      std::vector<float> row(static_cast<size_t>(cols));
      for (int64_t r = r0; r < r1; ++r) {
        std::mt19937_64 rng(seed * 1000003u + static_cast<uint64_t>(r));
        std::normal_distribution<float> normal(0.0f, 0.02f);
        for (float& v : row) v = normal(rng);
        nl::quantize_row(type, row.data(), bytes.get() + row_bytes * static_cast<size_t>(r), cols);
      }
    });
    nl::TensorView v;
    v.name = name;
    v.type = type;
    v.ne = {cols, rows};
    v.data = bytes.get();
    v.nbytes = row_bytes * static_cast<size_t>(rows);
    model->storage.push_back(bytes);
    return v;
  };
  nl::LayerWeights& L = model->weights.layers[0];
  for (int p = 0; p < nl::kNumProj; ++p) {
    const nl::Proj proj = static_cast<nl::Proj>(p);
    const auto [in, out] = nl::proj_shape(model->config, proj);
    nl::TensorView v = make(std::string("blk.0.") + nl::proj_name(proj), out, in, static_cast<uint64_t>(p) + 1);
    switch (proj) {
      case nl::Proj::Q: L.wq = v; break;
      case nl::Proj::K: L.wk = v; break;
      case nl::Proj::V: L.wv = v; break;
      case nl::Proj::O: L.wo = v; break;
      case nl::Proj::Gate: L.w_gate = v; break;
      case nl::Proj::Up: L.w_up = v; break;
      case nl::Proj::Down: L.w_down = v; break;
    }
  }
  // A small head keeps the engine's loader content when the head is not timed.
  if (!full_head) model->config.vocab = 256;
  model->weights.output = make("output", model->config.vocab, model->config.d_model, 99);
  return model;
}

struct Timing {
  double best_s = 0;
  int reps = 0;
};

// The best of at least `reps` runs of each of two products after one warm-up run of each,
// the runs alternating (a, b, a, b, ...) so that both see the same load on the machine:
// their time ratio is a target, and this VM's speed drifts by 2x within seconds (timed one
// after the other, one shape's ratio ranged 1.12-1.35 in four runs). Runs go on past `reps`
// until `min_time_s` per product has passed, so that a small product's best is also taken
// over a stretch of the VM's load (5 runs of a 0.1 ms product span half a millisecond), and
// stop once `budget_s` per product has passed (a slow
// kernel on a big shape still ends in bounded time). torch_products.py uses the same rule.
template <class A, class B>
std::pair<Timing, Timing> best_of_alternating(A&& run_a, B&& run_b, int reps, double min_time_s,
                                              double budget_s) {
  run_a();
  run_b();
  Timing ta, tb;
  ta.best_s = tb.best_s = 1e300;
  double spent = 0;
  const auto timed = [&](auto& run, Timing& t) {
    const auto t0 = Clock::now();
    run();
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    t.best_s = std::min(t.best_s, s);
    spent += s;
    ++t.reps;
  };
  while ((ta.reps < reps || spent < 2 * min_time_s) && (ta.reps == 0 || spent < 2 * budget_s)) {
    timed(run_a, ta);
    timed(run_b, tb);
  }
  return {ta, tb};
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o;
}

}  // namespace bench_products

int bench_products_main(int argc, char** argv) {
  using namespace bench_products;
  CLI::App app{"Times the frozen engine's forward (X·Wᵀ) and input-gradient (dY·W) products per weight type "
               "on real models' projection shapes, against this machine's measured f32 FMA peak."};
  std::string models = "qwen2.5-0.5b,qwen2.5-1.5b,llama-3.2-1b";
  std::string types = "q4_0,q8_0,q4_K,q6_K,f16";
  std::string tokens = "128,256,512";
  std::string projs;
  std::string jsonl;
  int threads = 0;
  int reps = 3;
  double budget = 1.0;
  double min_time = 0;
  double peak_gflops = 0;
  double int8_peak_gops = 0;
  std::string precisions = "f32";
  app.add_option("--models", models, "synth presets whose projection shapes are timed (comma-separated)");
  app.add_option("--types", types, "weight types (comma-separated; any type the engine supports)");
  app.add_option("--tokens", tokens, "token counts T (comma-separated)");
  app.add_option("--projs", projs, "only these projections (q,k,v,o,gate,up,down; default all seven), and head for the output head");
  app.add_option("--threads", threads, "engine threads (0: all cores)");
  app.add_option("--reps", reps, "timed repetitions per product (best is kept)")->check(CLI::PositiveNumber);
  app.add_option("--budget", budget, "stop repeating a product after this many seconds")->check(CLI::PositiveNumber);
  app.add_option("--min-time", min_time, "repeat a product past --reps until this many seconds have passed")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--peak-gflops", peak_gflops, "f32 peak to compare with (default: measured now, 1 s)");
  app.add_option("--int8-peak-gops", int8_peak_gops, "int8 peak to compare with (default: measured now, 1 s)");
  app.add_option("--precision", precisions, "precision modes: f32, f16, int8 (comma-separated) or all");
  app.add_option("--jsonl", jsonl, "also write one JSON record per case to this file");
  CLI11_PARSE(app, argc, argv);

  try {
    nl::ThreadPool pool(threads);
    const int n_threads = pool.size();
    std::string peak_note = "given with --peak-gflops";
    if (peak_gflops <= 0) {
      const nlbench::PeakFigure f = nlbench::measure_f32_fma_peak(n_threads, 1.0);
      peak_gflops = f.per_second() / 1e9;
      peak_note = "measured now: " + f.isa;
    }
    std::vector<nl::Precision> modes;
    for (const auto& p : split_list(precisions == "all" ? std::string("f32,f16,int8") : precisions))
      modes.push_back(nl::parse_precision(p));
    const bool any_int8 = std::find(modes.begin(), modes.end(), nl::Precision::Int8) != modes.end();
    std::string int8_note = "given with --int8-peak-gops";
    if (any_int8 && int8_peak_gops <= 0) {
      // The peak of the sequence the engine's int8 kernels run: vpdpbusd when it uses its
      // AVX-VNNI set, else the better of the two AVX2 sequences (the Q4_0 kernel sums in
      // int16, see peak_kernels.h).
      nlbench::PeakFigure best;
      if (nl::engine::int8_kernels_avx2_vnni()) {
        best = nlbench::measure_int8_dot_vnni_peak(n_threads, 1.0);
      } else {
        const nlbench::PeakFigure a = nlbench::measure_int8_dot_peak(n_threads, 1.0);
        const nlbench::PeakFigure b = nlbench::measure_int8_dot_i16acc_peak(n_threads, 1.0);
        best = a.per_second() >= b.per_second() ? a : b;
      }
      int8_peak_gops = best.per_second() / 1e9;
      int8_note = "measured now: " + best.isa;
    }
    std::vector<int64_t> token_counts;
    for (const auto& t : split_list(tokens)) {
      const long long v = std::atoll(t.c_str());
      if (v <= 0) nl::fail("--tokens", "'" + t + "' is not a positive token count", "e.g. --tokens 128,256,512");
      token_counts.push_back(v);
    }
    std::vector<nl::QType> qtypes;
    for (const auto& t : split_list(types)) qtypes.push_back(nl::parse_qtype(t));
    const std::vector<std::string> proj_filter = split_list(projs);
    for (const auto& p : proj_filter) {
      bool known = p == "head";
      for (int i = 0; i < nl::kNumProj; ++i) known |= p == nl::proj_name(static_cast<nl::Proj>(i));
      if (!known) nl::fail("--projs", "unknown projection '" + p + "'", "use q,k,v,o,gate,up,down,head");
    }
    std::ofstream json_out;
    if (!jsonl.empty()) {
      json_out.open(jsonl);
      if (!json_out) nl::fail(jsonl, "cannot open for writing", "check the folder exists and is writable");
    }

    std::printf("threads: %d; f32 FMA peak: %.1f GFLOP/s (%s)\n", n_threads, peak_gflops, peak_note.c_str());
    if (any_int8) std::printf("int8 dot peak: %.1f GOP/s (%s)\n", int8_peak_gops, int8_note.c_str());
    std::printf("%% peak: of the f32 peak for f32 and f16 modes, of the int8 peak for int8 mode\n");
    std::printf("targets: dX/fwd time ratio <= %.2f for every shape and type; f32 mode >= 60%% of peak on large "
                "projections; int8-mode Q4_0 >= 1.5x PyTorch f32 (see run_products.sh)\n\n",
                kInputGradTargetRatio);
    std::printf("| model | proj | out x in | type | precision | T | fwd ms | fwd GFLOP/s | fwd %% peak | dX ms | "
                "dX GFLOP/s | dX %% peak | dX/fwd (target <= %.2f) |\n",
                kInputGradTargetRatio);
    std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    std::fflush(stdout);

    std::string engine_isa;  // the engine's kernels, int8 set included (printed after the table)
    for (const auto& preset : split_list(models)) {
      const std::vector<Shape> shapes = distinct_shapes(preset, proj_filter);
      if (shapes.empty()) continue;
      for (nl::QType type : qtypes) {
        // A type whose block does not divide a row of this model (the K-quants' 256 on
        // Qwen2.5-0.5B's 896) cannot hold it: say so in the table and go on.
        std::unique_ptr<nl::Model> model;
        try {
          const bool head = std::any_of(shapes.begin(), shapes.end(), [](const Shape& x) { return x.head; });
          model = random_one_layer_model(preset, type, head, pool);
        } catch (const nl::Error& e) {
          std::printf("| %s | all | - | %s | - | - | skipped: %s |||||||\n", preset.c_str(), nl::qtype_name(type),
                      e.what());
          continue;
        }
        nl::EngineOptions eo;
        eo.threads = n_threads;
        const auto engine = nl::make_engine(*model, eo);
        if (engine_isa.empty()) engine_isa = engine->isa();
        for (const Shape& s : shapes) {
          const nl::WeightHandle h = s.head ? engine->output_handle() : engine->handle(0, s.first);
          for (int64_t T : token_counts) {
            Floats X(static_cast<size_t>(T * s.in)), Y(static_cast<size_t>(T * s.out));
            std::mt19937 rng(static_cast<uint32_t>(T));
            std::normal_distribution<float> normal(0.0f, 1.0f);
            for (float& v : X) v = normal(rng);
            for (float& v : Y) v = normal(rng);
            Floats out_f(Y.size()), out_g(X.size());
            for (nl::Precision mode : modes) {
              const auto [f, g] = best_of_alternating([&] { engine->forward(h, X.data(), T, out_f.data(), mode); },
                                                      [&] { engine->input_grad(h, Y.data(), T, out_g.data(), mode); },
                                                      reps, min_time, budget);
              const double flop =
                  2.0 * static_cast<double>(T) * static_cast<double>(s.in) * static_cast<double>(s.out);
              const double gf = flop / f.best_s / 1e9, gg = flop / g.best_s / 1e9, ratio = g.best_s / f.best_s;
              const double peak = mode == nl::Precision::Int8 ? int8_peak_gops : peak_gflops;
              std::printf(
                  "| %s | %s | %lld x %lld | %s | %s | %lld | %.2f | %.1f | %.0f%% | %.2f | %.1f | %.0f%% | %.2f %s |\n",
                  preset.c_str(), s.projs.c_str(), static_cast<long long>(s.out), static_cast<long long>(s.in),
                  nl::qtype_name(type), nl::precision_name(mode), static_cast<long long>(T), f.best_s * 1e3, gf,
                  100 * gf / peak, g.best_s * 1e3, gg, 100 * gg / peak, ratio,
                  ratio <= kInputGradTargetRatio ? "ok" : "MISSED");
              std::fflush(stdout);
              if (json_out) {
                json_out << "{\"model\":\"" << json_escape(preset) << "\",\"projs\":\"" << s.projs
                         << "\",\"out\":" << s.out << ",\"in\":" << s.in << ",\"type\":\"" << nl::qtype_name(type)
                         << "\",\"precision\":\"" << nl::precision_name(mode) << "\",\"T\":" << T
                         << ",\"threads\":" << n_threads << ",\"isa\":\"" << json_escape(engine->isa())
                         << "\",\"fwd_s\":" << f.best_s << ",\"dx_s\":" << g.best_s
                         << ",\"fwd_gflops\":" << gf << ",\"dx_gflops\":" << gg << ",\"peak_gflops\":" << peak
                         << "}\n";
                json_out.flush();
              }
            }
          }
        }
      }
    }
    if (!engine_isa.empty()) std::printf("\nengine isa: %s\n", engine_isa.c_str());
  } catch (const nl::Error& e) {
    std::fprintf(stderr, "nl_bench_products: %s\n", e.what());
    return 1;
  }
  return 0;
}
