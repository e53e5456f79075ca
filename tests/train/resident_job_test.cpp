// A training job on a resident model (train/resident_model.h), as a server or an app runs it
// beside inference on the same weights: the same adapter bytes as `nightlora train`'s own job,
// a caller's stop (and pause) through TrainingJobOutput::stop_requested, and inference that
// interleaves with the steps under the engine's turns without changing either's numbers.
#include <gtest/gtest.h>

#include <mutex>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "nightlora/infer/decoder.h"
#include "nightlora/modelio/synth.h"
#include "nightlora/train/resident_model.h"
#include "nightlora/train/training_job.h"
#include "nightlora/util/error.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;

struct Quiet : nl::TrainingJobOutput {
  int stop_after = -1;  // stop_requested() says yes from this boundary on (-1: never)
  int asked = 0;
  bool stop_requested() override { return stop_after >= 0 && ++asked > stop_after; }
};

struct Fixture {
  nltest::TempDir td;
  nl::TrainingJobOptions o;
  Fixture() {
    nl::SynthOptions so;
    so.preset = "tiny-qwen2";
    so.type = nl::QType::Q4_0;
    so.seed = 3;
    so.tokenizer = "generated";
    nl::synth_model((td / "model.gguf").string(), so);
    nltest::write_text(td / "train.jsonl",
                       "{\"prompt\": \"The dragon is called\", \"completion\": \" Zorbo.\"}\n"
                       "{\"prompt\": \"Zorbo is\", \"completion\": \" green.\"}\n"
                       "{\"prompt\": \"Zorbo flew\", \"completion\": \" over the big hill.\"}\n");
    o.model = (td / "model.gguf").string();
    o.data = (td / "train.jsonl").string();
    o.iters = 6;
    o.batch = 2;
    o.lr = 1e-2;
    o.threads = 1;
    o.plan_cache = "off";
  }
  std::string adapter_bytes(const std::string& out) const { return nltest::read_text(fs::path(out) / "adapter.gguf"); }
};

nl::EngineOptions one_thread() {
  nl::EngineOptions e;
  e.threads = 1;
  return e;
}

TEST(ResidentJob, GivesTheAdapterBytesOfTheStandaloneJob) {
  Fixture f;
  f.o.out = (f.td / "standalone").string();
  Quiet q1;
  ASSERT_TRUE(nl::run_training_job(f.o, q1).finished);

  nl::ResidentModel resident(f.o.model, one_thread());
  nl::TrainingJobOptions o = f.o;
  o.model.clear();  // empty: the resident model
  o.out = (f.td / "resident").string();
  Quiet q2;
  const nl::TrainingJobResult r = nl::run_training_job(o, q2, resident);
  ASSERT_TRUE(r.finished);
  EXPECT_EQ(f.adapter_bytes(f.o.out), f.adapter_bytes(o.out));
}

TEST(ResidentJob, RefusesAnotherModelPath) {
  Fixture f;
  nl::ResidentModel resident(f.o.model, one_thread());
  nl::TrainingJobOptions o = f.o;
  o.model = (f.td / "other.gguf").string();
  o.out = (f.td / "out").string();
  Quiet q;
  EXPECT_THROW(nl::run_training_job(o, q, resident), nl::Error);
  EXPECT_FALSE(fs::exists(o.out));
}

TEST(ResidentJob, StopsWhenTheCallerAsksAndContinuesToTheSameBytes) {
  Fixture f;
  f.o.out = (f.td / "whole").string();
  Quiet whole;
  ASSERT_TRUE(nl::run_training_job(f.o, whole).finished);

  nl::ResidentModel resident(f.o.model, one_thread());
  nl::TrainingJobOptions o = f.o;
  o.out = (f.td / "parts").string();
  Quiet stopper;
  stopper.stop_after = 2;  // boundaries 1 and 2 pass, the third stops
  const nl::TrainingJobResult stopped = nl::run_training_job(o, stopper, resident);
  EXPECT_FALSE(stopped.finished);
  EXPECT_EQ(stopped.step, 3);
  EXPECT_EQ(stopped.stop_reason, "stopped by the caller");
  EXPECT_EQ(stopped.signal, 0);
  EXPECT_EQ(nl::exit_code_of(stopped), 75);
  EXPECT_FALSE(fs::exists(fs::path(o.out) / "adapter.gguf"));

  Quiet rest;
  const nl::TrainingJobResult done = nl::run_training_job(o, rest, resident);
  ASSERT_TRUE(done.finished);
  EXPECT_EQ(f.adapter_bytes(f.o.out), f.adapter_bytes(o.out));
}

// Greedy logits of a short prompt, run as a server would between the job's steps.
std::vector<float> logits_of(nl::ResidentModel& r, const std::vector<int32_t>& prompt) {
  nl::DecoderOptions d;
  d.threads = 1;
  nl::Decoder dec(r.model(), r.engine(), d);
  const nl::EngineTurns::Turn turn = r.turns().serve();
  return dec.forward(prompt);
}

TEST(ResidentJob, InferenceInterleavesWithTheStepsWithoutChangingEither) {
  Fixture f;
  f.o.iters = 12;
  f.o.out = (f.td / "standalone").string();
  Quiet q1;
  ASSERT_TRUE(nl::run_training_job(f.o, q1).finished);

  nl::ResidentModel resident(f.o.model, one_thread());
  const std::vector<int32_t> prompt = {1, 5, 9, 12, 7};
  const std::vector<float> alone = logits_of(resident, prompt);

  nl::TrainingJobOptions o = f.o;
  o.out = (f.td / "shared").string();
  std::atomic<bool> done{false};
  std::atomic<int> served{0}, differed{0};
  std::thread server([&] {
    while (!done) {
      if (logits_of(resident, prompt) != alone) ++differed;
      ++served;
    }
  });
  // A job that also counts how often it reached a boundary while requests were served.
  struct Counting : nl::TrainingJobOutput {
    std::atomic<int>* served;
    std::vector<int> at_boundary;
    bool stop_requested() override {
      at_boundary.push_back(served->load());
      return false;
    }
  } job;
  job.served = &served;
  const nl::TrainingJobResult r = nl::run_training_job(o, job, resident);
  done = true;
  server.join();
  ASSERT_TRUE(r.finished);
  EXPECT_EQ(differed.load(), 0);
  EXPECT_GT(served.load(), 0);
  // Requests were served between steps, not only before or after the job.
  ASSERT_GE(job.at_boundary.size(), 2u);
  EXPECT_LT(job.at_boundary.front(), job.at_boundary.back());
  EXPECT_EQ(f.adapter_bytes(f.o.out), f.adapter_bytes(o.out));
}

TEST(EngineTurns, AWaitingServeGoesBeforeAWaitingTrain) {
  nl::EngineTurns turns;
  nl::EngineTurns::Turn held = turns.train();
  std::vector<std::string> order;
  std::mutex mu;
  std::thread trainer([&] {
    nl::EngineTurns::Turn t = turns.train();
    std::lock_guard<std::mutex> l(mu);
    order.push_back("train");
  });
  // Let the trainer queue up first, then a request.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::thread request([&] {
    nl::EngineTurns::Turn t = turns.serve();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::lock_guard<std::mutex> l(mu);
    order.push_back("serve");
  });
  while (turns.serving_waiting() == 0) std::this_thread::yield();
  held.release();
  trainer.join();
  request.join();
  EXPECT_EQ(order, (std::vector<std::string>{"serve", "train"}));
}

}  // namespace
