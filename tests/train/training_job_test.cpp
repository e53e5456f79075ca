// The training job through the library, as an app that embeds training calls it: progress
// reaches the output object, a step limit stops the run with a checkpoint, the same options
// continue it to the same adapter bytes as an uninterrupted run, and bad options fail
// before the run folder exists.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "nightlora/modelio/synth.h"
#include "nightlora/train/training_job.h"
#include "nightlora/util/error.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;

struct Recorder : nl::TrainingJobOutput {
  std::vector<std::string> lines, warnings, steps;
  void line(const std::string& t) override { lines.push_back(t); }
  void warning(const std::string& t) override { warnings.push_back(t); }
  void step_status(const std::string& t) override { steps.push_back(t); }
  bool said(const std::string& prefix) const {
    for (const std::string& l : lines)
      if (l.rfind(prefix, 0) == 0) return true;
    return false;
  }
};

struct Job {
  nltest::TempDir td;
  nl::TrainingJobOptions o;
  Job() {
    nl::SynthOptions so;
    so.preset = "tiny-qwen2";
    so.type = nl::QType::Q8_0;
    so.seed = 2;
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
  }
};

TEST(TrainingJob, StopsAtAStepLimitAndContinuesToTheBytesOfAnUninterruptedRun) {
  Job j;
  j.o.out = (j.td / "whole").string();
  Recorder whole;
  const nl::TrainingJobResult r = nl::run_training_job(j.o, whole);
  EXPECT_TRUE(r.finished);
  EXPECT_EQ(r.step, 6);
  EXPECT_EQ(r.total_steps, 6);
  EXPECT_EQ(whole.steps.size(), 6u);
  EXPECT_EQ(whole.steps.back().rfind("step 6/6", 0), 0u) << whole.steps.back();
  EXPECT_TRUE(whole.said("model: ")) << "no model line";
  EXPECT_TRUE(whole.said("precision plan (auto)")) << "no plan table (auto is the default)";
  EXPECT_TRUE(whole.said("saved: ")) << "no saved line";
  for (const char* f : {"log.jsonl", "run.json", "precision_plan.json", "adapter.gguf", "adapter_model.safetensors"})
    EXPECT_TRUE(fs::exists(j.td / "whole" / f)) << f;

  j.o.out = (j.td / "parts").string();
  j.o.max_steps = 4;
  Recorder first;
  const nl::TrainingJobResult stopped = nl::run_training_job(j.o, first);
  EXPECT_FALSE(stopped.finished);
  EXPECT_EQ(stopped.step, 4);
  EXPECT_EQ(stopped.stop_reason, "--max-steps reached");
  EXPECT_EQ(stopped.signal, 0);
  EXPECT_FALSE(fs::exists(j.td / "parts/adapter.gguf"));
  EXPECT_TRUE(first.said("stopped at step 4/6"));

  j.o.max_steps = 0;
  Recorder second;
  const nl::TrainingJobResult done = nl::run_training_job(j.o, second);
  EXPECT_TRUE(done.finished);
  EXPECT_TRUE(second.said("resuming from ")) << "did not resume";
  EXPECT_EQ(second.steps.size(), 2u);
  EXPECT_EQ(nltest::read_text(j.td / "parts/adapter.gguf"), nltest::read_text(j.td / "whole/adapter.gguf"));
}

TEST(TrainingJob, BadOptionsFailBeforeTheFolderIsWritten) {
  Job j;
  j.o.out = (j.td / "run").string();
  Recorder out;
  j.o.schedule = "zigzag";
  EXPECT_THROW(nl::run_training_job(j.o, out), nl::Error);
  j.o.schedule = "cosine";
  j.o.precision = "int4";
  EXPECT_THROW(nl::run_training_job(j.o, out), nl::Error);
  j.o.precision = "f32";
  j.o.data = (j.td / "missing.jsonl").string();
  EXPECT_THROW(nl::run_training_job(j.o, out), nl::Error);
  EXPECT_FALSE(fs::exists(j.td / "run"));
}

}  // namespace
