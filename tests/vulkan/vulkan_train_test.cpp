// Whole training runs through the CLI with `--engine vulkan` against the same runs with
// `--engine cpu`: on stories260K (F32 weights, FFN width 172: partial 32-column blocks) and
// on a synthetic Q4_0 llama (no shared files needed). Per-step losses and the trained
// adapters must agree within tolerance: the two engines compute the same products in another
// summation order (f32 rounding only), which a few AdamW steps carry into the adapter.
// Skips with a message without a Vulkan backend or device.
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "nightlora/host/adapter_io.h"
#include "nightlora/modelio/model.h"
#include "../../src/engine/backends.h"  // vulkan_gpu_present
#include "test_util.h"
#include "vulkan_test_util.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using nltest::run_cli;
using nltest::shq;

std::vector<double> train_losses(const fs::path& log) {
  std::vector<double> losses;
  std::istringstream in(nltest::read_text(log));
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const json row = json::parse(line);
    if (row.value("type", "") == "train") losses.push_back(row["loss"].get<double>());
  }
  return losses;
}

// |a - b| / |b| over every adapter matrix (Frobenius norms), and whether the shapes agree.
double adapter_rel_diff(const nl::LoraAdapter& a, const nl::LoraAdapter& b) {
  double num = 0, den = 0;
  EXPECT_EQ(a.pairs.size(), b.pairs.size());
  for (size_t i = 0; i < a.pairs.size() && i < b.pairs.size(); ++i) {
    for (auto [x, y] : {std::pair{&a.pairs[i].A, &b.pairs[i].A}, std::pair{&a.pairs[i].B, &b.pairs[i].B}}) {
      EXPECT_EQ(x->size(), y->size());
      for (size_t k = 0; k < x->size() && k < y->size(); ++k) {
        num += ((*x)[k] - (*y)[k]) * static_cast<double>((*x)[k] - (*y)[k]);
        den += (*y)[k] * static_cast<double>((*y)[k]);
      }
    }
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// Trains with both engines and compares. The step losses agree to 1e-4 relative and the
// adapters to 1e-3 relative (Frobenius). The products differ by f32 rounding only (~1e-6
// relative); AdamW divides by the root of the second moment, which can amplify rounding in
// the smallest gradients. Measured on lavapipe: losses equal to 7 digits, adapters 1e-6.
void compare_engines(const fs::path& model, const fs::path& data, const std::string& args) {
  std::string why;
  if (!vulkan_available(why)) GTEST_SKIP() << why;
  nltest::TempDir td;
  const std::string common =
      "train --model " + shq(model.string()) + " --data " + shq(data.string()) + " " + args +
      " --threads 2 --precision f32";  // the same products on both engines (auto's plans would differ)
  auto cpu = run_cli(common + " --engine cpu --out " + shq((td / "cpu").string()));
  ASSERT_EQ(cpu.rc, 0) << cpu.out << cpu.err;
  auto vk = run_cli(common + " --engine vulkan --out " + shq((td / "vulkan").string()));
  ASSERT_EQ(vk.rc, 0) << vk.out << vk.err;

  const auto lc = train_losses(td / "cpu/log.jsonl"), lv = train_losses(td / "vulkan/log.jsonl");
  ASSERT_FALSE(lc.empty());
  ASSERT_EQ(lc.size(), lv.size());
  for (size_t i = 0; i < lc.size(); ++i) {
    std::printf("step %zu: loss cpu %.6f vulkan %.6f\n", i + 1, lc[i], lv[i]);
    EXPECT_NEAR(lv[i], lc[i], 1e-4 * std::fabs(lc[i])) << "step " << i + 1;
  }
  auto m = nl::Model::load(model.string());
  const nl::LoraAdapter ac = nl::load_adapter((td / "cpu").string(), *m);
  const nl::LoraAdapter av = nl::load_adapter((td / "vulkan").string(), *m);
  const double d = adapter_rel_diff(av, ac);
  std::printf("adapter |vulkan - cpu| / |cpu| = %.3g\n", d);
  EXPECT_LT(d, 1e-3);
}

TEST(VulkanTrain, Stories260KMatchesTheCpuEngine) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", model);
  compare_engines(model, nltest::source_dir() / "data/stories/train.jsonl",
                  "--iters 2 --batch 1 --seq-len 48 --lr 5e-3 --rank 4 --alpha 8 --seed 1");
}

TEST(VulkanTrain, SyntheticQ4_0ModelMatchesTheCpuEngine) {
  std::string why;
  if (!vulkan_available(why)) GTEST_SKIP() << why;
  nltest::TempDir td;
  const fs::path model = td / "tiny-q4_0.gguf";
  auto s = run_cli("synth-model --preset tiny-llama --type q4_0 --seed 3 --tokenizer generated " + shq(model.string()));
  ASSERT_EQ(s.rc, 0) << s.err;
  nltest::write_text(td / "data.jsonl",
                     "{\"text\": \"Zorbo the green dragon flew over the big hill and found a shiny red stone.\"}\n"
                     "{\"text\": \"The small cat sat in the sun and watched the birds in the old tree.\"}\n"
                     "{\"text\": \"Who is green? Zorbo the dragon is green, and he likes to fly.\"}\n");
  compare_engines(model, td / "data.jsonl", "--iters 2 --batch 2 --seq-len 48 --lr 1e-2 --rank 4 --seed 2");
}

// The engine choice is checked by the CLI: an unknown name is refused with the accepted ones.
TEST(VulkanTrain, EngineOptionIsChecked) {
  nltest::TempDir td;
  nltest::write_text(td / "d.jsonl", "{\"text\": \"a b c\"}\n");
  auto r = run_cli("train --model " + shq((td / "none.gguf").string()) + " --data " + shq((td / "d.jsonl").string()) +
                   " --out " + shq((td / "o").string()) + " --engine npu");
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.err.find("--engine"), std::string::npos) << r.err;
}

}  // namespace

namespace {

// --engine auto takes a Vulkan GPU when the build has the backend and the machine a GPU
// (never a software device such as lavapipe: it runs on the very cores the cpu engine uses),
// otherwise the cpu engine; bench-step prints the engine it ran ("engine <isa>, ...").
TEST(VulkanTrain, AutoPicksCpuWithoutAGpu) {
#ifdef NL_HAVE_VULKAN
  if (nl::vulkan_gpu_present()) GTEST_SKIP() << "a Vulkan GPU is present: auto picks it";
#endif
  auto r = run_cli("bench-step --preset tiny-llama --type q4_0 --seq 16 --steps 1 --threads 1 --engine auto");
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  const size_t at = r.out.find("; engine ");
  ASSERT_NE(at, std::string::npos) << r.out;
  EXPECT_NE(r.out.compare(at, 16, "; engine vulkan:"), 0) << r.out;
}

// A build without the backend (cmake -DNL_VULKAN=OFF, or no Vulkan headers / glslc) says so
// when the backend is asked for, before it reads any data; --engine auto still trains.
TEST(VulkanTrain, BuildWithoutTheBackendSaysSo) {
#ifdef NL_HAVE_VULKAN
  GTEST_SKIP() << "this build has the Vulkan backend";
#else
  nltest::TempDir td;
  const fs::path model = td / "tiny-q4_0.gguf";
  auto s = run_cli("synth-model --preset tiny-llama --type q4_0 --seed 3 --tokenizer generated " + shq(model.string()));
  ASSERT_EQ(s.rc, 0) << s.err;
  nltest::write_text(td / "data.jsonl", "{\"text\": \"The small cat sat in the sun and watched the birds.\"}\n");
  const std::string common = "train --model " + shq(model.string()) + " --data " + shq((td / "data.jsonl").string()) +
                             " --iters 1 --batch 1 --seq-len 16 --rank 2 --threads 1";
  auto vk = run_cli(common + " --engine vulkan --out " + shq((td / "vk").string()));
  EXPECT_NE(vk.rc, 0) << vk.out;
  EXPECT_NE(vk.err.find("this build has no Vulkan backend"), std::string::npos) << vk.err;
  EXPECT_FALSE(fs::exists(td / "vk" / "adapter_model.safetensors"));
  auto bench = run_cli("bench-step --preset tiny-llama --type q4_0 --seq 16 --steps 1 --engine vulkan");
  EXPECT_NE(bench.rc, 0) << bench.out;
  EXPECT_NE(bench.err.find("this build has no Vulkan backend"), std::string::npos) << bench.err;
  auto autorun = run_cli(common + " --engine auto --out " + shq((td / "auto").string()));
  EXPECT_EQ(autorun.rc, 0) << autorun.out << autorun.err;
  EXPECT_TRUE(fs::exists(td / "auto" / "adapter_model.safetensors"));
#endif
}

}  // namespace
