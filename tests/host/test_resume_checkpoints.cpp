// Checkpoints on disk: damaged ones (truncated, bit-flipped) are skipped for the previous good
// one with a message and the run still ends byte-identical; checkpoints of another model or
// configuration are refused with a clear error and left untouched; SIGTERM and --max-steps
// stop at a step boundary with a checkpoint; the state encoding rejects malformed bytes.
#include <gtest/gtest.h>

#include <cstring>

#include "nightlora/util/error.h"
#include "resume_util.h"

namespace {

namespace fs = std::filesystem;
using namespace resume_test;
using nltest::run_cli;

constexpr int kIters = 6;
const std::string kOpts = "--save-every 2 --save-every-sec 0 --keep 3";

struct Reference {
  std::string safetensors, state;
};

Reference reference_run(const fs::path& model, const fs::path& out) {
  auto r = run_cli(train_args(model, out, kIters, kOpts));
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  auto ck = checkpoints(out);
  return {nltest::read_text(out / "adapter_model.safetensors"), ck.empty() ? "" : state_bytes(ck.back())};
}

// A run stopped after 4 steps: checkpoints at steps 2 and 4.
void interrupted_run(const fs::path& model, const fs::path& out) {
  auto r = run_cli(train_args(model, out, kIters, kOpts + " --max-steps 4"));
  ASSERT_EQ(r.rc, 75) << r.out << r.err;  // stopped, resumable
  EXPECT_NE(r.out.find("stopped at step 4/6"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(out / "adapter_model.safetensors"));
  ASSERT_EQ(checkpoints(out).size(), 2u);
}

void expect_same_as_reference(const Reference& ref, const fs::path& out) {
  EXPECT_TRUE(nltest::read_text(out / "adapter_model.safetensors") == ref.safetensors);
  auto ck = checkpoints(out);
  ASSERT_FALSE(ck.empty());
  EXPECT_TRUE(state_bytes(ck.back()) == ref.state);
}

TEST(ResumeCheckpoints, DamagedNewestIsSkippedForThePreviousGoodOne) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", model);
  nltest::TempDir td;
  Reference ref = reference_run(model, td / "ref");
  ASSERT_FALSE(ref.state.empty());
  for (const char* damage : {"truncated", "bitflip"}) {
    SCOPED_TRACE(damage);
    const fs::path out = td / damage;
    interrupted_run(model, out);
    const fs::path newest = checkpoints(out).back();
    std::string bytes = nltest::read_text(newest);
    if (std::string(damage) == "truncated") bytes.resize(bytes.size() / 2);
    else bytes[bytes.size() / 3] ^= 0x10;
    nltest::write_text(newest, bytes);

    auto r = run_cli(train_args(model, out, kIters, kOpts));
    ASSERT_EQ(r.rc, 0) << r.out << r.err;
    EXPECT_NE(r.err.find("damaged checkpoint skipped"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(newest.filename().string()), std::string::npos) << r.err;
    EXPECT_NE(r.out.find("step 2/6"), std::string::npos) << r.out;  // resumed from step 2
    expect_same_as_reference(ref, out);
  }
}

TEST(ResumeCheckpoints, StoppedRunContinuesByteIdenticallyAndAFinishedRunOnlyRewritesItsFiles) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", model);
  nltest::TempDir td;
  Reference ref = reference_run(model, td / "ref");
  const fs::path out = td / "run";
  interrupted_run(model, out);
  auto r = run_cli(train_args(model, out, kIters, kOpts + " --resume"));
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("resuming from"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("step 4/6  loss"), std::string::npos) << "step 4 was run again:\n" << r.out;
  expect_same_as_reference(ref, out);
  // Again: already finished, nothing is trained and the files stay the same.
  auto again = run_cli(train_args(model, out, kIters, kOpts));
  ASSERT_EQ(again.rc, 0) << again.out << again.err;
  EXPECT_EQ(again.out.find("  loss "), std::string::npos) << again.out;
  expect_same_as_reference(ref, out);
}

TEST(ResumeCheckpoints, AnotherModelOrConfigurationIsRefusedAndNothingIsLost) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", model);
  nltest::TempDir td;
  const fs::path out = td / "run";
  interrupted_run(model, out);
  auto before = checkpoints(out);
  std::vector<std::string> bytes;
  for (const auto& p : before) bytes.push_back(nltest::read_text(p));

  // The same model in another file with one byte of its tensor data changed: a different model.
  const fs::path other = td / "other.gguf";
  std::string m = nltest::read_text(model);
  m[m.size() - 100] ^= 0x01;
  nltest::write_text(other, m);
  auto r = run_cli(train_args(other, out, kIters, kOpts));
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.err.find("belongs to a different run"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("model:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("new --out"), std::string::npos) << r.err;

  auto r2 = run_cli(train_args(model, out, kIters, kOpts + " --lr 1e-3"));
  EXPECT_NE(r2.rc, 0);
  EXPECT_NE(r2.err.find("--lr"), std::string::npos) << r2.err;

  // A copy of the same model elsewhere is the same model.
  const fs::path copy = td / "copy.gguf";
  fs::copy_file(model, copy);
  auto after = checkpoints(out);
  ASSERT_EQ(after.size(), before.size());
  for (size_t i = 0; i < after.size(); ++i) EXPECT_TRUE(nltest::read_text(after[i]) == bytes[i]) << after[i];
  auto r3 = run_cli(train_args(copy, out, kIters, kOpts));
  EXPECT_EQ(r3.rc, 0) << r3.out << r3.err;
}

TEST(ResumeCheckpoints, AllDamagedOrNoneWithResumeIsAClearError) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", model);
  nltest::TempDir td;
  auto none = run_cli(train_args(model, td / "fresh", kIters, kOpts + " --resume"));
  EXPECT_NE(none.rc, 0);
  EXPECT_NE(none.err.find("no checkpoint to resume from"), std::string::npos) << none.err;

  const fs::path out = td / "run";
  interrupted_run(model, out);
  for (const auto& p : checkpoints(out)) nltest::write_text(p, "garbage");
  auto r = run_cli(train_args(model, out, kIters, kOpts));
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.err.find("ckpt-"), std::string::npos) << r.err;
  EXPECT_EQ(checkpoints(out).size(), 2u);  // the damaged files are left for the user to inspect
}

TEST(ResumeCheckpoints, SigtermStopsAtAStepBoundaryWithACheckpoint) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", model);
  nltest::TempDir td;
  const fs::path out = td / "run";
  // The shell sends SIGTERM once the first step is logged; the run must stop with a checkpoint.
  const std::string cli = nltest::shq(NL_CLI_PATH) + " " + train_args(model, out, 400, "--save-every 0 --save-every-sec 0");
  const std::string script = cli + " > " + nltest::shq((td / "o.txt").string()) + " 2>&1 & pid=$!; "
                             "while ! grep -q '\"step\":1,' " + nltest::shq((out / "log.jsonl").string()) +
                             " 2>/dev/null; do sleep 0.05; done; kill -TERM $pid; wait $pid; echo rc=$?";
  auto r = nltest::run_cmd(script);
  const std::string o = nltest::read_text(td / "o.txt");
  EXPECT_NE(r.out.find("rc=143"), std::string::npos) << r.out << o;
  EXPECT_NE(o.find("stopped at step"), std::string::npos) << o;
  EXPECT_NE(o.find("SIGTERM"), std::string::npos) << o;
  EXPECT_EQ(checkpoints(out).size(), 1u);
}

nl::TrainState small_state() {
  nl::TrainState s;
  s.step = 3;
  s.data_pos = 24;
  s.adam_t = 3;
  s.adapter.cfg.rank = 2;
  s.adapter.n_layer = 1;
  s.adapter.pairs.resize(nl::kNumProj);
  s.adapter.pairs[0] = {true, 3, 4, {1, 2, 3, 4, 5, 6}, {7, 8, 9, 10, 11, 12, 13, 14}};
  s.adam_m = s.adapter;
  s.adam_v = s.adapter;
  s.adam_v.pairs[0].A[0] = 0.5f;
  return s;
}

TEST(ResumeCheckpoints, StateEncodingRoundTripsAndRejectsEveryTruncation) {
  nl::TrainState s = small_state();
  const std::string bytes = nl::encode_train_state(s);
  nl::TrainState back = nl::decode_train_state(bytes, "mem");
  EXPECT_EQ(nl::encode_train_state(back), bytes);
  EXPECT_EQ(back.data_pos, 24);
  EXPECT_EQ(back.adam_v.pairs[0].A[0], 0.5f);
  for (size_t n = 0; n < bytes.size(); ++n)
    EXPECT_THROW(nl::decode_train_state(std::string_view(bytes).substr(0, n), "mem"), nl::Error) << n;
  std::string extra = bytes + "x";
  EXPECT_THROW(nl::decode_train_state(extra, "mem"), nl::Error);
  // A huge stored length must fail cleanly, not allocate.
  std::string huge = bytes;
  std::memset(&huge[3 * 8], 0xff, 8);  // the rank
  EXPECT_THROW(nl::decode_train_state(huge, "mem"), nl::Error);

  nl::Checkpoint c;
  c.meta.identity = {{"model", "m"}};
  c.meta.progress = {{"elapsed_s", 1.5}};
  c.state = s;
  const std::string payload = nl::encode_checkpoint(c);
  EXPECT_EQ(std::string(nl::checkpoint_state_bytes(payload, "mem")), bytes);
  EXPECT_EQ(nl::decode_checkpoint(payload, "mem").meta.progress["elapsed_s"], 1.5);
  EXPECT_THROW(nl::decode_checkpoint("NLTRAIN1\xff\xff\xff\xff\xff\xff\xff\xff", "mem"), nl::Error);
  EXPECT_THROW(nl::decode_checkpoint("not a checkpoint", "mem"), nl::Error);
}

}  // namespace
