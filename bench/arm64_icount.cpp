// nl_arm64_icount: one forward and one input-gradient product of the cpu engine on a single
// random matrix, each run twice (the first makes the scratch), the second between two calls
// of nl_icount_mark(). bench/arm64_icount.sh cross-compiles it for aarch64 and runs it under
// qemu-aarch64 -singlestep -d exec, which logs every executed instruction, and counts the
// instructions between the marks: the NEON kernels' work, measured without arm64 hardware.
// An instruction count is not a time (it ignores latencies, memory and how wide the core
// is), but it shows where the NEON code spends its instructions and what a change removes.
//
//   nl_arm64_icount TYPE PRECISION ROWS COLS TOKENS     (e.g. q4_0 int8 128 896 128)
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "nightlora/engine/frozen_engine.h"
#include "nightlora/quant/qtype.h"
#include "nightlora/tokenizer/tokenizer.h"  // complete type for Model's unique_ptr<Tokenizer>
#include "nightlora/util/error.h"

// The marks the counting script looks for in qemu's log (kept out of line).
extern "C" __attribute__((noinline)) void nl_icount_mark(int which) { asm volatile("" : : "r"(which) : "memory"); }

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: %s TYPE PRECISION ROWS COLS TOKENS\n", argv[0]);
    return 2;
  }
  try {
    const nl::QType type = nl::parse_qtype(argv[1]);
    const nl::Precision precision = nl::parse_precision(argv[2]);
    const int64_t rows = std::atoll(argv[3]), cols = std::atoll(argv[4]), T = std::atoll(argv[5]);
    const size_t row_bytes = nl::qtype_row_bytes(type, cols);
    std::vector<uint8_t> bytes(row_bytes * static_cast<size_t>(rows));
    // Values from a small LCG (uniform in [-0.02, 0.02)): under qemu's log the set-up's
    // instructions are logged too, so they are kept few.
    uint32_t state = 7;
    const auto normal = [&]() {
      state = state * 1664525u + 1013904223u;
      return (static_cast<float>(state >> 8) / 16777216.0f - 0.5f) * 0.04f;
    };
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
      for (float& v : row) v = normal();
      nl::quantize_row(type, row.data(), bytes.data() + row_bytes * static_cast<size_t>(r), cols);
    }
    // One layer whose seven projections and head all view the same bytes.
    nl::Model model;
    model.config.n_layer = 1;
    model.weights.layers.resize(1);
    nl::LayerWeights& L = model.weights.layers[0];
    for (nl::TensorView* v : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down, &model.weights.output}) {
      v->name = "w";
      v->type = type;
      v->ne = {cols, rows};
      v->data = bytes.data();
      v->nbytes = bytes.size();
    }
    nl::EngineOptions options;
    options.threads = 1;
    auto engine = nl::make_engine(model, options);
    const nl::WeightHandle h = engine->handle(0, nl::Proj::Q);
    std::vector<float> X(static_cast<size_t>(T * cols)), Y(static_cast<size_t>(T * rows));
    for (float& v : X) v = normal();
    for (float& v : Y) v = normal();
    std::vector<float> out(X.size() > Y.size() ? X.size() : Y.size());
    engine->forward(h, X.data(), T, out.data(), precision);
    nl_icount_mark(0);
    engine->forward(h, X.data(), T, out.data(), precision);
    nl_icount_mark(1);
    engine->input_grad(h, Y.data(), T, out.data(), precision);
    nl_icount_mark(2);
    engine->input_grad(h, Y.data(), T, out.data(), precision);
    nl_icount_mark(3);
    std::printf("isa %s, checksum %g\n", engine->isa().c_str(), static_cast<double>(out[0]));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nl_arm64_icount: %s\n", e.what());
    return 1;
  }
}
