// Allocation failure of the large buffers: the training step's arena and the engine's
// staging panels for a batch's tokens. A request far beyond the machine is made under an
// address-space limit (RLIMIT_AS, so the allocation fails at once instead of the kernel's
// OOM killer stepping in), and must end in an nl::Error that says which buffers and what to
// do, with the process and the model still usable afterwards.
#include <sys/resource.h>

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "nightlora/engine/frozen_engine.h"
#include "nightlora/host/memory_plan.h"
#include "nightlora/host/train_step.h"
#include "crash_disk.h"
#include "nightlora/modelio/model.h"
#include "nightlora/modelio/synth.h"
#include "nightlora/util/error.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;

// Address space in use now (VmSize), in bytes.
size_t address_space_in_use() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmSize:", 0) == 0) return static_cast<size_t>(std::stoull(line.substr(7))) * 1024;
  return 0;
}

// Caps the address space at what is in use plus `headroom` while it lives.
class AddressSpaceLimit {
 public:
  explicit AddressSpaceLimit(size_t headroom) {
    getrlimit(RLIMIT_AS, &old_);
    rlimit r = old_;
    r.rlim_cur = address_space_in_use() + headroom;
    ok_ = address_space_in_use() > 0 && setrlimit(RLIMIT_AS, &r) == 0;
  }
  ~AddressSpaceLimit() { setrlimit(RLIMIT_AS, &old_); }
  bool ok() const { return ok_; }

 private:
  rlimit old_{};
  bool ok_ = false;
};

constexpr size_t kHeadroom = size_t{1} << 30;  // 1 GiB: all that small allocations need
constexpr int64_t kHugeTokens = int64_t{1} << 26;  // 64M tokens: tens of GiB of buffers

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const nl::Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not an nl::Error: " << e.what();
  }
  return "";
}

TEST(OutOfMemory, TrainingStepArenaIsAClearError) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", model_path);
  const std::unique_ptr<nl::Model> m = nl::Model::load(model_path.string());
  nl::EngineOptions eo;
  eo.threads = 1;
  const std::unique_ptr<nl::FrozenEngine> engine = nl::make_engine(*m, eo);
  nl::MemoryPlan plan;
  plan.n_layer = m->config.n_layer;
  plan.kept_blocks = m->config.n_layer;
  plan.max_tokens = kHugeTokens;
  plan.rank = 4;
  nl::StepOptions so;
  so.threads = 1;
  so.memory = &plan;
  std::string msg;
  {
    AddressSpaceLimit limit(kHeadroom);
    if (!limit.ok()) GTEST_SKIP() << "cannot set RLIMIT_AS here";
    msg = message_of([&] { nl::TrainStep step(*m, *engine, so); });
  }
  EXPECT_NE(msg.find("out of memory"), std::string::npos) << msg;
  EXPECT_NE(msg.find(std::to_string(kHugeTokens) + " tokens"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--seq-len"), std::string::npos) << msg;
  // Nothing is left broken: a step of a sane size is made on the same engine.
  plan.max_tokens = 64;
  EXPECT_NO_THROW(nl::TrainStep(*m, *engine, so));
}

TEST(OutOfMemory, EnginePanelsForTooManyTokensAreAClearError) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", model_path);
  const std::unique_ptr<nl::Model> m = nl::Model::load(model_path.string());
  nl::EngineOptions eo;
  eo.threads = 1;
  const std::unique_ptr<nl::FrozenEngine> engine = nl::make_engine(*m, eo);
  const nl::WeightHandle h = engine->handle(0, nl::Proj::Up);
  for (nl::Precision p : {nl::Precision::Int8, nl::Precision::F16}) {
    SCOPED_TRACE(p == nl::Precision::Int8 ? "int8" : "f16");
    std::string fwd, grad;
    {
      AddressSpaceLimit limit(kHeadroom);
      if (!limit.ok()) GTEST_SKIP() << "cannot set RLIMIT_AS here";
      fwd = message_of([&] { engine->reserve_forward(h, kHugeTokens * 16, p); });
      grad = message_of([&] { engine->reserve_input_grad(h, kHugeTokens * 16, p); });
    }
    for (const std::string& msg : {fwd, grad}) {
      EXPECT_NE(msg.find("cpu engine"), std::string::npos) << msg;
      EXPECT_NE(msg.find("out of memory") == std::string::npos ? msg.find("cannot allocate") : 0, std::string::npos) << msg;
      EXPECT_NE(msg.find("--seq-len"), std::string::npos) << msg;
    }
    EXPECT_NO_THROW(engine->reserve_forward(h, 256, p));  // a sane size still works
  }
}

// The engine's own copy of the weights (tiles) and its workers' panels, made when the
// engine is: a model whose tiles (the tied 151936 x 896 output, ~145 MiB in q8_0) do not fit
// what is left of the address space.
TEST(OutOfMemory, EngineTilesOfALargeModelAreAClearError) {
  const crash::ScratchDir scratch;
  const std::string path = scratch / "qwen-shapes-1-layer.gguf";
  nl::SynthOptions so;
  so.preset = "qwen2.5-0.5b";
  so.layers = 1;
  so.type = nl::QType::Q8_0;
  so.tokenizer = "generated";
  nl::synth_model(path, so);
  const std::unique_ptr<nl::Model> m = nl::Model::load(path);
  nl::EngineOptions eo;
  eo.threads = 1;
  std::string msg;
  {
    AddressSpaceLimit limit(size_t{48} << 20);  // the stacks of its threads fit, the tiles do not
    if (!limit.ok()) GTEST_SKIP() << "cannot set RLIMIT_AS here";
    msg = message_of([&] { nl::make_engine(*m, eo); });
  }
  EXPECT_NE(msg.find("cpu engine: out of memory allocating the weights' tiles"), std::string::npos) << msg;
  EXPECT_NE(msg.find("smaller model"), std::string::npos) << msg;
  EXPECT_NO_THROW(nl::make_engine(*m, eo));  // with the memory back, the same model loads
}

}  // namespace
