// Resuming from a checkpoint's bytes straight into the trainer (Trainer::resume_from,
// decode_train_state_into): the same run as an uninterrupted one, no decoded copy of the state
// next to the trainer's, and a refused checkpoint leaves the trainer as it was. And run()
// hands out the trainer's own adapter, not a copy.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>

#include "alloc_counter.h"
#include "nightlora/host/checkpoint.h"
#include "nightlora/host/trainer.h"
#include "nightlora/util/error.h"
#include "tiny_model.h"

namespace {

// Counting sequences on the tiny model's 40-token vocabulary (names apart from mezo_test's:
// the test files share one unity translation unit).
nl::Dataset resume_dataset(int n) {
  std::mt19937 rng(11);
  nl::Dataset ds;
  ds.source = "counting";
  for (int k = 0; k < n; ++k) {
    nl::Example e;
    int32_t t = static_cast<int32_t>(rng() % 40);
    for (int i = 0; i < 12; ++i, t = (t + 5) % 40) e.tokens.push_back(t);
    e.supervised.assign(e.tokens.size(), 1);
    e.supervised[0] = 0;
    e.line = k + 1;
    ds.examples.push_back(e);
  }
  return ds;
}

// First-order, with dropout, warmup, cosine and weight decay: every part of the state matters.
nl::TrainConfig resume_config() {
  nl::TrainConfig tc;
  tc.lr = 1e-2;
  tc.iters = 8;
  tc.batch = 2;
  tc.warmup = 2;
  tc.seed = 5;
  tc.threads = 2;
  tc.adamw.weight_decay = 0.01;
  return tc;
}

nl::LoraConfig resume_lora(int64_t rank = 8) {
  nl::LoraConfig lc;
  lc.rank = rank;
  lc.dropout = 0.1f;
  lc.seed = 4;
  return lc;
}

struct ResumeFixture : ::testing::Test {
  nltest::TinyModel tm = nltest::make_tiny_model("qwen2", nl::QType::Q8_0, 7);
  nl::Dataset ds = resume_dataset(12);
  nl::LoraAdapter init = nl::LoraAdapter::init(tm.model->config, resume_lora());

  // The trajectory bytes of a run stopped after `steps` steps.
  std::string state_after(int64_t steps) {
    nl::Trainer t(*tm.model, ds, nullptr, resume_config(), init);
    t.run(nullptr, nullptr, [&](int64_t done) { return done < steps; });
    EXPECT_EQ(t.steps_done(), steps);
    return nl::encode_train_state(t.state_view());
  }
};

TEST_F(ResumeFixture, ResumeFromBytesContinuesExactly) {
  nl::Trainer whole(*tm.model, ds, nullptr, resume_config(), init);
  whole.run(nullptr, nullptr);
  const std::string bytes = state_after(3);
  nl::Trainer second(*tm.model, ds, nullptr, resume_config(), init);
  second.resume_from(bytes, "memory");
  EXPECT_EQ(second.steps_done(), 3);
  EXPECT_EQ(nl::encode_train_state(second.state_view()), bytes);  // adapter, moments, counters
  second.run(nullptr, nullptr);
  EXPECT_EQ(nl::encode_train_state(second.state_view()), nl::encode_train_state(whole.state_view()));
}

TEST_F(ResumeFixture, ResumeFromHoldsNoCopyOfTheState) {
  const std::string bytes = state_after(2);
  const int64_t vector_bytes = init.n_params() * static_cast<int64_t>(sizeof(float));
  nl::Trainer in_place(*tm.model, ds, nullptr, resume_config(), init);
  int64_t in_place_bytes = 0;
  {
    nltest::AllocCounter counter;
    in_place.resume_from(bytes, "memory");
    in_place_bytes = counter.allocated_bytes();
  }
  // The decoded-copy path, for contrast (and to show the counter sees such copies): the
  // state decoded on its own (adapter and two moments) before the trainer copies it in.
  nl::Trainer copied(*tm.model, ds, nullptr, resume_config(), init);
  int64_t copied_bytes = 0;
  {
    nltest::AllocCounter counter;
    copied.resume(nl::decode_train_state(bytes, "memory"));
    copied_bytes = counter.allocated_bytes();
  }
  std::printf("[resume] state vector %lld bytes; resume_from allocated %lld, decode + resume %lld\n",
              static_cast<long long>(vector_bytes), static_cast<long long>(in_place_bytes),
              static_cast<long long>(copied_bytes));
  EXPECT_GE(copied_bytes, 3 * vector_bytes);
  // The layout's pair shapes (a few dozen bytes a pair), nothing the size of the values.
  EXPECT_LT(in_place_bytes, vector_bytes / 4);
  EXPECT_EQ(nl::encode_train_state(in_place.state_view()), nl::encode_train_state(copied.state_view()));
}

TEST_F(ResumeFixture, RefusedCheckpointLeavesTheTrainerAsItWas) {
  const std::string good = state_after(2);
  nl::Trainer t(*tm.model, ds, nullptr, resume_config(), init);
  const std::string before = nl::encode_train_state(t.state_view());
  auto put_u64 = [](std::string& s, size_t at, uint64_t v) {
    for (int i = 0; i < 8; ++i) s[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
  };
  std::string nan_last = good;  // the last value (v.B of the last pair) made a NaN
  const uint32_t nan_bits = 0x7fc00000u;
  for (int i = 0; i < 4; ++i) nan_last[nan_last.size() - 4 + i] = static_cast<char>((nan_bits >> (8 * i)) & 0xff);
  std::string beyond = good;  // step 1000 (data position to match) of an 8-step run
  put_u64(beyond, 0, 1000);
  put_u64(beyond, 8, 2000);
  std::string other_batch = good;  // a data position that is not step x batch
  put_u64(other_batch, 8, 3);
  nl::Trainer small(*tm.model, ds, nullptr, resume_config(), nl::LoraAdapter::init(tm.model->config, resume_lora(2)));
  const std::string other_rank = nl::encode_train_state(small.state_view());
  const std::string cut = good.substr(0, good.size() - 5);
  struct Case {
    const char* name;
    const std::string& bytes;
    const char* says;
  };
  for (const Case& c : {Case{"non-finite", nan_last, "non-finite"}, Case{"beyond the run", beyond, "only 8 steps"},
                        Case{"data position", other_batch, "data position 3"},
                        Case{"other rank", other_rank, "shapes do not match"}, Case{"cut short", cut, "ends early"}}) {
    try {
      t.resume_from(c.bytes, "memory");
      ADD_FAILURE() << c.name << ": accepted";
    } catch (const nl::Error& e) {
      EXPECT_NE(std::string(e.what()).find(c.says), std::string::npos) << c.name << ": " << e.what();
    }
    EXPECT_EQ(nl::encode_train_state(t.state_view()), before) << c.name << ": the trainer's state changed";
    EXPECT_EQ(t.steps_done(), 0) << c.name;
  }
}

TEST_F(ResumeFixture, DecodeIntoRefusesOtherShapesBeforeWriting) {
  const std::string bytes = state_after(1);
  nl::LoraAdapter a = nl::LoraAdapter::init(tm.model->config, resume_lora(2));
  nl::LoraAdapter m = a.zeros_like(), v = a.zeros_like();
  const nl::LoraAdapter a0 = a;
  EXPECT_THROW(nl::decode_train_state_into(bytes, "memory", a, m, v), nl::Error);
  for (size_t i = 0; i < a.pairs.size(); ++i) EXPECT_EQ(a.pairs[i].A, a0.pairs[i].A) << i;
  // With the stored shapes it fills them with the stored values.
  nl::LoraAdapter b = init, bm = init.zeros_like(), bv = init.zeros_like();
  nl::decode_train_state_into(bytes, "memory", b, bm, bv);
  const nl::TrainState decoded = nl::decode_train_state(bytes, "memory");
  for (size_t i = 0; i < b.pairs.size(); ++i) {
    EXPECT_EQ(b.pairs[i].A, decoded.adapter.pairs[i].A) << i;
    EXPECT_EQ(bm.pairs[i].B, decoded.adam_m.pairs[i].B) << i;
    EXPECT_EQ(bv.pairs[i].A, decoded.adam_v.pairs[i].A) << i;
  }
}

TEST_F(ResumeFixture, RunReturnsTheTrainersOwnAdapter) {
  nl::Trainer t(*tm.model, ds, nullptr, resume_config(), init);
  const nl::LoraAdapter& trained = t.run(nullptr, nullptr);
  EXPECT_EQ(&trained, &t.state_view().adapter);
}

}  // namespace
