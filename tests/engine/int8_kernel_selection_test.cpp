// Which int8 kernel set the cpu engine takes, and how it says so: the x86-64 feature
// detection against the kernel's own view (/proc/cpuinfo), the NL_INT8_VNNI override, the
// engine's isa() naming its int8 set, and that name taken back as the isa option (forcing
// that set), with every set giving the same bits through the engine.
#include <cstdio>
#include <cstring>
#include <tuple>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../../src/engine/cpu_features_x86.h"
#include "../../src/engine/kernels_int8.h"
#include "nightlora/engine/frozen_engine.h"
#include "nightlora/quant/qtype.h"
#include "nightlora/tokenizer/tokenizer.h"
#include "nightlora/util/error.h"
#include "test_util.h"

namespace {

using nl::Precision;
using nl::QType;
using nl::engine::Int8Kernels;

#if defined(__x86_64__)
// The "flags" line of /proc/cpuinfo, padded with spaces ("" where there is none). Linux
// lists AVX-512 flags only when it saves the ZMM state, as x86_features() requires.
std::string cpuinfo_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line) && !line.empty())
    if (line.rfind("flags", 0) == 0) {
      std::string flags(1, ' ');
      flags.append(line, line.find(':') + 1).push_back(' ');
      return flags;
    }
  return "";
}
#endif

TEST(Int8Selection, X86FeaturesAgreeWithProcCpuinfo) {
#if !defined(__x86_64__)
  const nl::engine::X86Features& f = nl::engine::x86_features();
  EXPECT_FALSE(f.avx2 || f.avx_vnni || f.avx512_vnni);
  GTEST_SKIP() << "not x86-64";
#else
  const std::string flags = cpuinfo_flags();
  if (flags.empty()) GTEST_SKIP() << "no /proc/cpuinfo flags to check CPUID against";
  const auto has = [&](const char* f) { return flags.find(std::string(" ") + f + " ") != std::string::npos; };
  const nl::engine::X86Features& f = nl::engine::x86_features();
  EXPECT_EQ(f.avx2, has("avx2") && has("fma") && has("f16c"));
  EXPECT_EQ(f.avx_vnni, f.avx2 && has("avx_vnni"));
  EXPECT_EQ(f.avx512_vnni, f.avx2 && has("avx512f") && has("avx512bw") && has("avx512vl") && has("avx512_vnni"));
  // Each set is handed out exactly where the CPU runs it.
  EXPECT_EQ(nl::engine::int8_kernels_avx2_plain() != nullptr, f.avx2);
  EXPECT_EQ(nl::engine::int8_kernels_avx2_vnni() != nullptr, f.avx_vnni);
  EXPECT_EQ(nl::engine::int8_kernels_avx512_vnni() != nullptr, f.avx512_vnni);
  std::printf("[int8] this CPU: avx2 %d, avx-vnni %d, avx512-vnni %d\n", f.avx2, f.avx_vnni, f.avx512_vnni);
#endif
}

// NL_INT8_VNNI: auto picks AVX-512 VNNI, then AVX-VNNI, then plain AVX2; each set can be
// forced, and forcing one the CPU lacks (or an unknown name) is an error, never another set.
TEST(Int8Selection, NlInt8VnniForcesEachSetTheCpuRuns) {
  const Int8Kernels* plain = nl::engine::int8_kernels_avx2_plain();
  if (!plain) {
    EXPECT_EQ(nl::engine::int8_kernels_avx2_choice(nullptr), nullptr);
    GTEST_SKIP() << "no AVX2 here: no x86-64 int8 set to choose";
  }
  const Int8Kernels* vex = nl::engine::int8_kernels_avx2_vnni();
  const Int8Kernels* evex = nl::engine::int8_kernels_avx512_vnni();
  const Int8Kernels* best = evex ? evex : vex ? vex : plain;
  for (const char* v : {static_cast<const char*>(nullptr), "", "auto", "1"})
    EXPECT_EQ(nl::engine::int8_kernels_avx2_choice(v), best) << (v ? v : "(unset)");
  EXPECT_EQ(nl::engine::int8_kernels_avx2_choice("0"), plain);
  EXPECT_EQ(nl::engine::int8_kernels_avx2_choice("avx2"), plain);
  EXPECT_STREQ(plain->isa, "avx2");
  for (const auto& [value, set, name] : {std::tuple{"avx-vnni", vex, "avx2-vnni"}, std::tuple{"avx2-vnni", vex, "avx2-vnni"},
                                          std::tuple{"avx512-vnni", evex, "avx512-vnni"}}) {
    if (set) {
      EXPECT_EQ(nl::engine::int8_kernels_avx2_choice(value), set);
      EXPECT_STREQ(set->isa, name);
    } else {
      try {
        nl::engine::int8_kernels_avx2_choice(value);
        ADD_FAILURE() << "NL_INT8_VNNI=" << value << " accepted on a CPU without it";
      } catch (const nl::Error& e) {
        EXPECT_NE(std::string(e.what()).find("has no"), std::string::npos) << e.what();
      }
    }
  }
  try {
    nl::engine::int8_kernels_avx2_choice("avx10");
    ADD_FAILURE() << "an unknown set accepted";
  } catch (const nl::Error& e) {
    EXPECT_NE(std::string(e.what()).find("avx512-vnni"), std::string::npos) << "lists the values: " << e.what();
  }
}

// A one-layer Q8_0 model whose 8 matrices all have one shape (the engine needs a whole model).
struct OneShapeModel {
  nl::Model model;
  std::vector<uint8_t> bytes;
  OneShapeModel(QType type, int64_t rows, int64_t cols) {
    const size_t rb = nl::qtype_row_bytes(type, cols);
    bytes.resize(rb * static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
      const std::vector<float> row = nltest::random_vec(static_cast<size_t>(cols), 100 + static_cast<uint32_t>(r));
      nl::quantize_row(type, row.data(), bytes.data() + rb * static_cast<size_t>(r), cols);
    }
    model.config.n_layer = 1;
    model.weights.layers.resize(1);
    nl::LayerWeights& L = model.weights.layers[0];
    for (nl::TensorView* v : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down, &model.weights.output}) {
      v->type = type;
      v->ne = {cols, rows};
      v->data = bytes.data();
      v->nbytes = bytes.size();
    }
  }
};

// The engine names its int8 set in isa() ("avx2, int8 avx512-vnni"), that name as the isa
// option forces the set, and the forced sets give the same bits in both products.
TEST(Int8Selection, EngineNamesItsInt8SetAndTakesTheNameBack) {
  const int64_t rows = 72, cols = 160, T = 19;  // a partial row group and a partial 64-row block
  OneShapeModel mm(QType::Q8_0, rows, cols);
  const std::vector<float> X = nltest::random_vec(static_cast<size_t>(T * cols), 1);
  const std::vector<float> dY = nltest::random_vec(static_cast<size_t>(T * rows), 2);

  nl::EngineOptions o;
  o.threads = 2;
  auto best = nl::make_engine(mm.model, o);
  const std::string panel = nl::engine::panel_isa_of(best->isa());
  const Int8Kernels& chosen = nl::engine::int8_kernels_for(panel);
  EXPECT_EQ(best->isa(), nl::engine::engine_isa_name(panel.c_str(), chosen));
  EXPECT_EQ(nl::cpu_engine_isa(), best->isa());  // what `nightlora --version` prints
  std::printf("[int8] engine isa: %s\n", best->isa().c_str());
  if (panel == "scalar") {
    EXPECT_EQ(best->isa(), "scalar");
  }
#if defined(__x86_64__)
  if (nl::engine::x86_features().avx2) {
    const Int8Kernels* k = nl::engine::int8_kernels_avx2();  // "avx2" alone: the plain set (NL_INT8_VNNI=0)
    EXPECT_EQ(best->isa(), k == nl::engine::int8_kernels_avx2_plain() ? "avx2" : std::string("avx2, int8 ") + k->isa);
  }
#endif

  std::vector<float> Y0(static_cast<size_t>(T * rows)), dX0(static_cast<size_t>(T * cols));
  best->forward(0, X.data(), T, Y0.data(), Precision::Int8);
  best->input_grad(0, dY.data(), T, dX0.data(), Precision::Int8);

  std::vector<const Int8Kernels*> sets = {&nl::engine::int8_kernels_scalar()};
  for (const Int8Kernels* k : {nl::engine::int8_kernels_avx2_plain(), nl::engine::int8_kernels_avx2_vnni(),
                               nl::engine::int8_kernels_avx512_vnni(), nl::engine::int8_kernels_neon_widening(),
                               nl::engine::int8_kernels_neon_dotprod()})
    if (k) sets.push_back(k);
  for (const Int8Kernels* k : sets) {
    const std::string name = panel + ", int8 " + k->isa;
    SCOPED_TRACE(name);
    o.isa = name;
    auto e = nl::make_engine(mm.model, o);
    EXPECT_EQ(e->isa(), nl::engine::engine_isa_name(panel.c_str(), *k));
    EXPECT_EQ(&nl::engine::int8_kernels_for(e->isa()), k);
    std::vector<float> Y(Y0.size()), dX(dX0.size());
    e->forward(0, X.data(), T, Y.data(), Precision::Int8);
    e->input_grad(0, dY.data(), T, dX.data(), Precision::Int8);
    EXPECT_EQ(0, std::memcmp(Y.data(), Y0.data(), Y.size() * sizeof(float))) << "forward differs";
    EXPECT_EQ(0, std::memcmp(dX.data(), dX0.data(), dX.size() * sizeof(float))) << "input gradient differs";
  }

  o.isa = panel + ", int8 avx9000";
  try {
    nl::make_engine(mm.model, o);
    ADD_FAILURE() << "an unknown int8 set accepted";
  } catch (const nl::Error& e) {
    EXPECT_NE(std::string(e.what()).find("avx9000"), std::string::npos) << e.what();
  }
}

}  // namespace
