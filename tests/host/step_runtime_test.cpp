// The step runtime (issue 5): the step-time breakdown accounts for the step, the memory
// plan keeps blocks' activations without changing a single gradient bit, warm steps
// allocate nothing (engine threads included), --max-memory refuses what cannot fit before
// training starts, and bench-step prints its table. Timings are never compared with limits,
// only with each other (the parts of one step).
#include <cmath>
#include <cstring>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "alloc_counter.h"
#include "nightlora/engine/frozen_engine.h"
#include "nightlora/host/memory_plan.h"
#include "nightlora/host/precision_plan.h"
#include "nightlora/host/train_step.h"
#include "nightlora/modelio/synth.h"
#include "nightlora/util/error.h"
#include "test_util.h"
#include "tiny_model.h"

namespace {

namespace fs = std::filesystem;

// A tiny synthetic model with `layers` blocks (a real GGUF file: the cpu engine repacks it).
std::unique_ptr<nl::Model> tiny_model(const nltest::TempDir& dir, const std::string& preset, int64_t layers,
                                      nl::QType type = nl::QType::Q8_0) {
  nl::SynthOptions so;
  so.preset = preset;
  so.type = type;
  so.layers = layers;
  so.seed = 3;
  so.tokenizer = "generated";
  const fs::path path = dir / (preset + "-" + std::to_string(layers) + "-" + nl::qtype_name(type) + ".gguf");
  nl::synth_model(path.string(), so);
  return nl::Model::load(path.string());
}

nl::LoraAdapter adapter_for(const nl::Model& m, float dropout) {
  nl::LoraConfig lc;
  lc.rank = 4;
  lc.dropout = dropout;
  return nltest::random_adapter(m.config, lc, 7);
}

nl::MemoryPlan plan_for(const nl::Model& m, const nl::LoraAdapter& a, int64_t tokens, int64_t keep) {
  nl::MemoryRequest r;
  r.max_tokens = tokens;
  r.rank = a.cfg.rank;
  r.n_adapter_params = a.n_params();
  r.keep_blocks = keep;
  r.loss_chunk = 16;  // as the steps below
  return nl::plan_step_memory(m, r);
}

struct Grads {
  nl::LoraAdapter g;
  double loss = 0;
};

Grads gradients(const nl::Model& m, nl::FrozenEngine& e, const nl::Batch& b, const nl::LoraAdapter& a, int64_t keep,
                int host_threads) {
  const nl::MemoryPlan plan = plan_for(m, a, b.n_tokens(), keep);
  nl::StepOptions so;
  so.threads = 2;
  so.host_threads = host_threads;
  so.loss_chunk = 16;
  so.memory = &plan;
  nl::TrainStep step(m, e, so);
  EXPECT_EQ(step.kept_blocks(), plan.kept_blocks);
  EXPECT_EQ(step.arena_bytes(), plan.arena_bytes()) << "the step allocates the arena the plan measured";
  Grads r{a.zeros_like(), 0};
  r.loss = step.forward_backward(b, a, r.g, 0.01f, 42).loss_sum;
  return r;
}

// Keeping any number of blocks' activations (no recompute for them) gives bit-identical
// gradients to recomputing every block: the same products on the same inputs.
TEST(StepRuntime, KeptBlocksGiveIdenticalGradients) {
  nltest::TempDir dir;
  for (const char* preset : {"tiny-qwen2", "tiny-qwen3", "tiny-llama"}) {
    SCOPED_TRACE(preset);
    const auto model = tiny_model(dir, preset, 4);
    auto engine = nl::make_engine(*model, {"cpu", 2});
    const nl::Batch batch = nltest::make_batch({30, 21, 13}, model->config.vocab, 4, 11);
    const nl::LoraAdapter a = adapter_for(*model, 0.1f);
    const Grads ref = gradients(*model, *engine, batch, a, 1, 1);
    for (int64_t keep : {2, 3, 4}) {
      for (int host_threads : {1, 2}) {
        SCOPED_TRACE("keep " + std::to_string(keep) + ", host threads " + std::to_string(host_threads));
        const Grads g = gradients(*model, *engine, batch, a, keep, host_threads);
        EXPECT_EQ(g.loss, ref.loss);
        for (size_t i = 0; i < a.pairs.size(); ++i) {
          ASSERT_EQ(g.g.pairs[i].A.size(), ref.g.pairs[i].A.size());
          EXPECT_EQ(0, std::memcmp(g.g.pairs[i].A.data(), ref.g.pairs[i].A.data(), ref.g.pairs[i].A.size() * 4))
              << "dA of pair " << i;
          EXPECT_EQ(0, std::memcmp(g.g.pairs[i].B.data(), ref.g.pairs[i].B.data(), ref.g.pairs[i].B.size() * 4))
              << "dB of pair " << i;
        }
      }
    }
  }
}

// The host categories partition the step's wall time; the engine's busy time is split by
// product kind, and the number of products is exactly what the schedule submits.
TEST(StepRuntime, BreakdownAccountsForTheStep) {
  nltest::TempDir dir;
  const auto model = tiny_model(dir, "tiny-qwen2", 3);
  auto engine = nl::make_engine(*model, {"cpu", 2});
  const nl::Batch batch = nltest::make_batch({40, 30, 26}, model->config.vocab, 5, 3);
  const nl::LoraAdapter a = adapter_for(*model, 0.0f);
  const int64_t L = model->config.n_layer, chunks = (batch.n_supervised() + 15) / 16;
  for (int64_t keep : {1, 3}) {
    SCOPED_TRACE("keep " + std::to_string(keep));
    const nl::MemoryPlan plan = plan_for(*model, a, batch.n_tokens(), keep);
    nl::StepOptions so;
    so.threads = 2;
    so.loss_chunk = 16;
    so.memory = &plan;
    nl::TrainStep step(*model, *engine, so);
    nl::LoraAdapter g = a.zeros_like();
    step.forward_backward(batch, a, g, 1.0f, 1);
    const nl::StepTiming t = step.last_timing();
    EXPECT_GT(t.wall_s, 0.0);
    EXPECT_NEAR(t.host_sum_s(), t.wall_s, 0.02 * t.wall_s + 1e-3) << "host categories must cover the step";
    EXPECT_EQ(t.optimizer_s, 0.0) << "the optimizer is the caller's";
    EXPECT_GT(t.adapter_s, 0.0);
    EXPECT_GT(t.attention_s, 0.0);
    EXPECT_GT(t.frozen_forward_s, 0.0);
    EXPECT_GT(t.frozen_input_grad_s, 0.0);
    // 7 forward + 7 input-gradient products per block but the first (4: its q/k/v input
    // gradients would only reach the frozen embedding), 6 recompute products per recomputed
    // block (all but the down projection, whose output backward never reads), and a forward
    // + input gradient of the output head per loss chunk.
    EXPECT_EQ(t.products, 14 * L - 3 + 6 * (L - keep) + 2 * chunks);
    if (keep == L) EXPECT_EQ(t.frozen_recompute_s, 0.0);
    else EXPECT_GT(t.frozen_recompute_s, 0.0);
    EXPECT_LE(t.frozen_s(), t.wall_s * 1.02 + 1e-3) << "one engine cannot be busy longer than the step";
    EXPECT_GE(t.overlap_s(), 0.0);
    EXPECT_LE(t.outside_frozen_s(), t.wall_s);
    // The running total is the sum of the calls.
    step.forward_only(batch, a);
    const nl::StepTiming& total = step.total_timing();
    EXPECT_NEAR(total.wall_s, t.wall_s + step.last_timing().wall_s, 1e-9);
    EXPECT_EQ(total.products, t.products + step.last_timing().products);
  }
}

// The warm-step tests' options: two engine and two host threads, the plan's memory.
nl::StepOptions warm_step_options(const nl::MemoryPlan& plan, const nl::PrecisionPlan& precision) {
  nl::StepOptions so;
  so.threads = 2;
  so.host_threads = 2;
  so.loss_chunk = 16;
  so.memory = &plan;
  so.precision = &precision;
  return so;
}

// After the first step, steps allocate nothing, in any thread, for any batch within the
// plan, with dropout on or off, and validation too; with a single- and a multi-threaded
// engine (its per-thread panels are sized when it is built, whichever thread runs which
// task), and with every product in f32, f16 or int8 (the engine's staging is sized from
// the memory plan's tokens). The host side runs its two pools with two threads each.
TEST(StepRuntime, WarmStepsAllocateNothing) {
  nltest::TempDir dir;
  const auto model = tiny_model(dir, "tiny-qwen3", 2);
  const int64_t V = model->config.vocab;
  const nl::Batch first = nltest::make_batch({30, 26}, V, 3, 1);
  const nl::Batch others[] = {nltest::make_batch({96}, V, 10, 2), nltest::make_batch({20, 20, 20, 20}, V, 2, 3),
                              nltest::make_batch({7, 60}, V, 0, 4)};
  for (int engine_threads : {1, 2}) {
    auto engine = nl::make_engine(*model, {"cpu", engine_threads});
    for (nl::Precision mode : {nl::Precision::F32, nl::Precision::F16, nl::Precision::Int8}) {
      const nl::PrecisionPlan precision = nl::PrecisionPlan::uniform(model->config.n_layer, mode);
      for (float dropout : {0.0f, 0.2f}) {
        SCOPED_TRACE("engine threads " + std::to_string(engine_threads) + ", " + nl::precision_name(mode) +
                     ", dropout " + std::to_string(dropout));
        const nl::LoraAdapter a = adapter_for(*model, dropout);
        const nl::MemoryPlan plan = plan_for(*model, a, 96, 1);
        const nl::StepOptions so = warm_step_options(plan, precision);
        // The first batch is smaller than the plan's: the staging must come from the plan,
        // not from the largest product seen so far.
        nl::TrainStep step(*model, *engine, so);
        nl::LoraAdapter g = a.zeros_like();
        step.forward_backward(first, a, g, 0.01f, 1);
        step.forward_only(first, a);
        nltest::AllocCounter counter;
        uint64_t seed = 2;
        for (const nl::Batch& b : others) {
          step.forward_backward(b, a, g, 0.01f, seed++);
          step.forward_only(b, a);
        }
        EXPECT_EQ(counter.allocations(), 0) << counter.allocated_bytes() << " bytes allocated in warm steps";
      }
    }
  }
}

// The same for K-quant weights in int8: Q4_K's and Q5_K's products stage more (the forward's
// offset factors, the input gradient's offset sums and its per-thread slab of offsets), Q6_K's
// input-gradient panels hold two scale parts per block: sized from the plan and the model
// too, not grown by the first product larger than the ones before.
class WarmKQuantSteps : public ::testing::TestWithParam<nl::QType> {};
TEST_P(WarmKQuantSteps, AllocateNothing) {
  const nl::QType type = GetParam();
  nltest::TempDir dir;
  const auto model = tiny_model(dir, "tiny-llama-k", 2, type);
  ASSERT_EQ(model->weights.layers[0].proj(nl::Proj::Down).type, type);
  const int64_t V = model->config.vocab;
  const nl::Batch first = nltest::make_batch({12, 10}, V, 3, 1);
  const nl::Batch larger = nltest::make_batch({96}, V, 10, 2);
  const nl::PrecisionPlan precision = nl::PrecisionPlan::uniform(model->config.n_layer, nl::Precision::Int8);
  for (int engine_threads : {1, 2}) {
    SCOPED_TRACE("engine threads " + std::to_string(engine_threads));
    auto engine = nl::make_engine(*model, {"cpu", engine_threads});
    const nl::LoraAdapter a = adapter_for(*model, 0.0f);
    const nl::MemoryPlan plan = plan_for(*model, a, 96, 1);
    nl::TrainStep step(*model, *engine, warm_step_options(plan, precision));
    nl::LoraAdapter g = a.zeros_like();
    step.forward_backward(first, a, g, 0.01f, 1);
    nltest::AllocCounter counter;
    step.forward_backward(larger, a, g, 0.01f, 2);
    step.forward_only(larger, a);
    EXPECT_EQ(counter.allocations(), 0) << counter.allocated_bytes() << " bytes allocated in warm steps";
  }
  // The plan counts that staging: per token and 32 input values of the widest matrix (d_ff
  // 512), a float of z and one of G more than the same shapes in Q8_0 (Q6_K: none).
  const auto q8 = tiny_model(dir, "tiny-llama-k", 2, nl::QType::Q8_0);
  nl::MemoryRequest r;
  r.max_tokens = 96;
  r.n_adapter_params = 1;
  r.loss_chunk = 16;
  r.int8_products = true;
  const size_t with = nl::plan_step_memory(*model, r).staging_bytes, without = nl::plan_step_memory(*q8, r).staging_bytes;
  EXPECT_EQ(with - without, type == nl::QType::Q6_K ? 0u : 96u * (512 / 32) * 2 * sizeof(float));
}
INSTANTIATE_TEST_SUITE_P(StepRuntime, WarmKQuantSteps, ::testing::Values(nl::QType::Q4_K, nl::QType::Q5_K, nl::QType::Q6_K),
                         [](const ::testing::TestParamInfo<nl::QType>& i) { return std::string(nl::qtype_info(i.param).name); });

// With int8 products the plan counts the cpu engine's Q8_0 copies of F16 weights (34 bytes
// per row and 32 columns of each matrix it serves) as weights, the bytes the engine holds
// once every matrix ran an int8 product; Q8_0 weights need none, nor Q5_0 ones (Q8_0 tiles).
TEST(StepRuntime, MemoryPlanCountsTheEnginesInt8CopiesOfF16Weights) {
  nltest::TempDir dir;
  for (const nl::QType type : {nl::QType::F16, nl::QType::Q8_0, nl::QType::Q5_0}) {
    SCOPED_TRACE(nl::qtype_name(type));
    const auto model = tiny_model(dir, "tiny-llama", 2, type);
    nl::MemoryRequest r;
    r.max_tokens = 32;
    r.n_adapter_params = 1;
    r.loss_chunk = 16;
    const size_t f32 = nl::plan_step_memory(*model, r).weight_bytes;
    r.int8_products = true;
    const size_t int8 = nl::plan_step_memory(*model, r).weight_bytes;
    auto engine = nl::make_engine(*model, {"cpu", 2, "auto"});
    const size_t before = engine->resident_weight_bytes();
    std::vector<nl::WeightHandle> handles = {engine->output_handle()};
    for (int64_t l = 0; l < model->config.n_layer; ++l)
      for (int p = 0; p < nl::kNumProj; ++p) handles.push_back(engine->handle(l, static_cast<nl::Proj>(p)));
    for (const nl::WeightHandle h : handles) {
      const std::vector<float> x(static_cast<size_t>(engine->cols(h)), 0.5f);
      std::vector<float> y(static_cast<size_t>(engine->rows(h)));
      engine->forward(h, x.data(), 1, y.data(), nl::Precision::Int8);
    }
    EXPECT_EQ(int8 - f32, engine->resident_weight_bytes() - before);
    if (type != nl::QType::F16) {
      EXPECT_EQ(int8, f32);
    } else {
      EXPECT_GT(int8, f32);
    }
  }
}

TEST(StepRuntime, MemoryPlanKeepsWhatTheBudgetHolds) {
  nltest::TempDir dir;
  const auto model = tiny_model(dir, "tiny-llama", 6);
  const nl::LoraAdapter a = adapter_for(*model, 0.0f);
  const nl::MemoryPlan one = plan_for(*model, a, 128, 1);
  EXPECT_EQ(one.kept_blocks, 1);
  EXPECT_GT(one.block_bytes, 0u);
  EXPECT_EQ(plan_for(*model, a, 128, 100).kept_blocks, 6) << "clamped to the blocks there are";
  nl::MemoryRequest r;
  r.max_tokens = 128;
  r.rank = a.cfg.rank;
  r.n_adapter_params = a.n_params();
  r.loss_chunk = one.loss_chunk;
  r.max_memory = one.estimated_peak_bytes() + one.block_bytes * 5 / 2;  // room for 2 more blocks
  const nl::MemoryPlan fit = nl::plan_step_memory(*model, r);
  EXPECT_EQ(fit.kept_blocks, 3);
  EXPECT_LE(fit.estimated_peak_bytes(), r.max_memory);
  EXPECT_EQ(fit.arena_bytes(), one.arena_bytes() + 2 * one.block_bytes);
  EXPECT_NE(fit.describe().find("keeping activations of 3/6 blocks, recomputing 3"), std::string::npos)
      << fit.describe();
  r.max_memory = one.estimated_peak_bytes() * 100;
  EXPECT_EQ(nl::plan_step_memory(*model, r).kept_blocks, 6);
  r.max_memory = one.estimated_peak_bytes() - 1;
  try {
    nl::plan_step_memory(*model, r);
    FAIL() << "a budget below the minimum must be refused";
  } catch (const nl::Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("needs an estimated " + nl::format_mib(one.estimated_peak_bytes())), std::string::npos) << msg;
    EXPECT_NE(msg.find("raise --max-memory"), std::string::npos) << msg;
  }
}

TEST(StepRuntime, MemorySizesAsWritten) {
  EXPECT_EQ(nl::parse_memory_size("1500000000"), 1500000000u);
  EXPECT_EQ(nl::parse_memory_size("800MiB"), size_t{800} << 20);
  EXPECT_EQ(nl::parse_memory_size("800M"), size_t{800} << 20);
  EXPECT_EQ(nl::parse_memory_size("1.5GiB"), size_t{3} << 29);
  EXPECT_EQ(nl::parse_memory_size("2 gib"), size_t{2} << 30);
  EXPECT_EQ(nl::parse_memory_size("10MB"), 10000000u);
  EXPECT_EQ(nl::parse_memory_size("64KiB"), 65536u);
  for (const char* bad : {"", "MiB", "-5", "12XB", "1.2.3G", "0", "1e3"})
    EXPECT_THROW(nl::parse_memory_size(bad), nl::Error) << bad;
}

TEST(StepRuntime, BenchStepPrintsTheBreakdown) {
  nltest::TempDir dir;
  const fs::path json = dir / "bench.json";
  const auto r = nltest::run_cli("bench-step --preset tiny-llama --layers 3 --seq 48 --steps 2 --threads 2 "
                                 "--keep-blocks 2 --json " + nltest::shq(json.string()));
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  for (const char* want : {"memory plan: keeping activations of 2/3 blocks, recomputing 1", "adapter (LoRA) products",
                           "attention", "other host ops", "optimizer (clip + AdamW)", "waiting for the engine",
                           "frozen forward", "frozen recompute", "frozen input gradient", "overlap",
                           "outside the three frozen products", "process CPU time (all threads)", "tokens/s",
                           "peak RSS", "arena", "roofline:", "in CPU time: at the peaks per CPU second"})
    EXPECT_NE(r.out.find(want), std::string::npos) << "missing '" << want << "' in:\n" << r.out;
  const nlohmann::json j = nlohmann::json::parse(nltest::read_text(json));
  for (const char* key : {"tokens_per_s", "peak_rss_mib", "arena_mib", "frozen_forward_s", "frozen_recompute_s",
                          "frozen_input_grad_s", "adapter_s", "attention_s", "other_s", "optimizer_s", "wait_s",
                          "overlap_s", "outside_frozen_share", "cpu_s"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["kept_blocks"], 2);
  EXPECT_GT(j["tokens_per_s"].get<double>(), 0.0);
  EXPECT_GT(j["frozen_recompute_s"].get<double>(), 0.0);
  EXPECT_GT(j["cpu_s"].get<double>(), 0.0);  // the steps ran on this process's threads
}

TEST(StepRuntime, MaxMemoryRefusesBeforeTraining) {
  nltest::TempDir dir;
  auto r = nltest::run_cli("bench-step --preset tiny-llama --seq 48 --steps 1 --max-memory 1MiB");
  EXPECT_EQ(r.rc, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("--max-memory 1.0 MiB"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("needs an estimated"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("raise --max-memory to at least"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("step time breakdown"), std::string::npos) << "no step may run";

  r = nltest::run_cli("bench-step --preset tiny-llama --seq 48 --max-memory 12parsecs");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("not a memory size"), std::string::npos) << r.err;

  // train: refused before the output folder is touched.
  const fs::path model = dir / "tiny.gguf";
  ASSERT_EQ(nltest::run_cli("synth-model --preset tiny-llama --type q8_0 " + nltest::shq(model.string())).rc, 0);
  nltest::write_text(dir / "train.jsonl", "{\"text\": \"Zorbo was a dragon who liked tea.\"}\n");
  const fs::path out = dir / "out";
  r = nltest::run_cli("train --model " + nltest::shq(model.string()) + " --data " +
                      nltest::shq((dir / "train.jsonl").string()) + " --out " + nltest::shq(out.string()) +
                      " --iters 1 --max-memory 2MiB");
  EXPECT_EQ(r.rc, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("needs an estimated"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out)) << "nothing may be written when the plan does not fit";
}

// Each "train" row of log.jsonl carries the breakdown, peak RSS and the arena.
TEST(StepRuntime, TrainLogsTheBreakdownPerStep) {
  nltest::TempDir dir;
  const fs::path model = dir / "tiny.gguf";
  ASSERT_EQ(nltest::run_cli("synth-model --preset tiny-qwen2 --type q8_0 " + nltest::shq(model.string())).rc, 0);
  nltest::write_text(dir / "train.jsonl", "{\"text\": \"Zorbo was a dragon who liked tea.\"}\n"
                                          "{\"text\": \"The tea was green and the dragon was happy.\"}\n");
  const fs::path out = dir / "out";
  auto r = nltest::run_cli("train --model " + nltest::shq(model.string()) + " --data " +
                           nltest::shq((dir / "train.jsonl").string()) + " --out " + nltest::shq(out.string()) +
                           " --iters 2 --batch 1 --train-on all --threads 2 --max-memory 4GiB --save-every 0");
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("memory plan: keeping activations of 2/2 blocks, recomputing 0"), std::string::npos) << r.out;
  std::ifstream log(out / "log.jsonl");
  std::string line;
  int rows = 0;
  while (std::getline(log, line)) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j["type"] != "train") continue;
    ++rows;
    ASSERT_TRUE(j.contains("breakdown_s")) << line;
    const nlohmann::json& b = j["breakdown_s"];
    double host = 0;
    for (const char* k : {"adapter", "attention", "other", "optimizer", "wait"}) {
      ASSERT_TRUE(b.contains(k)) << k;
      host += b[k].get<double>();
    }
    for (const char* k : {"frozen_forward", "frozen_recompute", "frozen_input_grad", "overlap", "outside_frozen"})
      EXPECT_TRUE(b.contains(k)) << k;
    EXPECT_EQ(b["frozen_recompute"].get<double>(), 0.0) << "every block kept: nothing recomputed";
    const double step_s = j["step_s"].get<double>();
    EXPECT_NEAR(host, step_s, 0.02 * step_s + 1e-3);
    EXPECT_GT(b["optimizer"].get<double>(), 0.0);
    EXPECT_GT(j["peak_rss_mib"].get<double>(), 0.0);
    EXPECT_GT(j["arena_mib"].get<double>(), 0.0);
    EXPECT_TRUE(j.contains("tokens_per_s"));
  }
  EXPECT_EQ(rows, 2);
}

}  // namespace
