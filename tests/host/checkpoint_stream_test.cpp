// A checkpoint save streams the trainer's state into the file in bounded pieces
// (write_checkpoint -> CheckpointStore::save -> write_file_checked_streamed) instead of
// building the payload as one string from copies of the state. The file must stay exactly
// what it was: the checkpoints the earlier, string-building encoder wrote (the fuzz corpus,
// fuzz/corpus/checkpoint) re-encode to the same bytes; a state spanning several pieces
// matches a byte-by-byte reference encoder written from the format's description; the file
// on disk equals write_file_checked of that payload. And a save allocates one piece, not the
// state. (Resumed runs ending byte-identical: test_resume_checkpoints.cpp, the power-loss
// and disk-fault tests in tests/job.)
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "alloc_counter.h"
#include "nightlora/host/checkpoint.h"
#include "nightlora/job/atomic_file.h"
#include "nightlora/job/checkpoint_store.h"
#include "test_util.h"

namespace checkpoint_stream_test {

namespace fs = std::filesystem;

// The state layout (checkpoint.h), byte by byte, as the encoder wrote it before it streamed.
void ref_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void ref_floats(std::string& out, const std::vector<float>& v) {
  ref_u64(out, v.size());
  for (float f : v) {
    uint32_t b;
    std::memcpy(&b, &f, 4);
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((b >> (8 * i)) & 0xff));
  }
}
std::string reference_state_bytes(const nl::TrainState& s) {
  std::string out;
  ref_u64(out, static_cast<uint64_t>(s.step));
  ref_u64(out, static_cast<uint64_t>(s.data_pos));
  ref_u64(out, static_cast<uint64_t>(s.adam_t));
  const nl::LoraAdapter& a = s.adapter;
  ref_u64(out, static_cast<uint64_t>(a.cfg.rank));
  uint32_t bits;
  std::memcpy(&bits, &a.cfg.alpha, 4);
  ref_u64(out, bits);
  std::memcpy(&bits, &a.cfg.dropout, 4);
  ref_u64(out, bits);
  uint64_t targets = 0;
  for (int i = 0; i < nl::kNumProj; ++i) targets |= (a.cfg.targets[i] ? 1ull : 0ull) << i;
  ref_u64(out, targets);
  ref_u64(out, a.cfg.seed);
  ref_u64(out, static_cast<uint64_t>(a.n_layer));
  ref_u64(out, a.pairs.size());
  for (size_t i = 0; i < a.pairs.size(); ++i) {
    const nl::LoraPair& p = a.pairs[i];
    ref_u64(out, p.enabled ? 1 : 0);
    ref_u64(out, static_cast<uint64_t>(p.in));
    ref_u64(out, static_cast<uint64_t>(p.out));
    for (const std::vector<float>* v : {&p.A, &p.B, &s.adam_m.pairs[i].A, &s.adam_m.pairs[i].B,
                                        &s.adam_v.pairs[i].A, &s.adam_v.pairs[i].B})
      ref_floats(out, *v);
  }
  return out;
}
// "NLTRAIN1" | u64 header length | header JSON | state.
std::string reference_payload(const std::string& header_json, const nl::TrainState& s) {
  std::string out = "NLTRAIN1";
  ref_u64(out, header_json.size());
  return out + header_json + reference_state_bytes(s);
}

// A state of `n_layer` layers with every projection adapted at rank 8, in 896-wide
// projections: 4 layers are 1.5 MiB of state, several pieces. Values differ everywhere
// (no piece boundary can hide a misplaced byte), moments included.
nl::TrainState large_state(int64_t n_layer) {
  nl::TrainState s;
  s.step = 12;
  s.data_pos = 48;
  s.adam_t = 11;
  s.adapter.cfg.rank = 8;
  s.adapter.cfg.alpha = 16;
  s.adapter.cfg.dropout = 0.05f;
  s.adapter.cfg.seed = 1234567;
  for (bool& t : s.adapter.cfg.targets) t = true;
  s.adapter.n_layer = n_layer;
  s.adapter.pairs.resize(static_cast<size_t>(n_layer * nl::kNumProj));
  s.adam_m = s.adapter;
  s.adam_v = s.adapter;
  uint32_t x = 12345;
  auto next = [&] {
    x = x * 1664525u + 1013904223u;
    return static_cast<float>(static_cast<int32_t>(x)) * 1e-9f;
  };
  for (nl::LoraAdapter* a : {&s.adapter, &s.adam_m, &s.adam_v})
    for (size_t i = 0; i < a->pairs.size(); ++i) {
      nl::LoraPair& p = a->pairs[i];
      p.enabled = i % nl::kNumProj != 3;  // one projection of each layer off: empty A and B
      p.in = 896;
      p.out = i % nl::kNumProj == 1 ? 128 : 896;
      if (!p.enabled) continue;
      p.A.resize(static_cast<size_t>(8 * p.in));
      p.B.resize(static_cast<size_t>(p.out * 8));
      for (float& f : p.A) f = next();
      for (float& f : p.B) f = next();
    }
  return s;
}

nl::CheckpointMeta some_meta() {
  nl::CheckpointMeta m;
  m.identity = {{"model", "m.gguf:123"}, {"data", "d.jsonl:45"}, {"config", {{"lr", 0.001}, {"rank", 8}}}};
  m.progress = {{"elapsed_s", 12.5}, {"tokens", 4096}};
  return m;
}

// write_checkpoint's pieces, checked against the piece bound as they come.
std::string streamed(const nl::CheckpointMeta& meta, const nl::TrainStateView& state,
                     const std::optional<nl::PrecisionPlan>& plan, size_t* pieces = nullptr) {
  std::string out;
  size_t n = 0;
  nl::write_checkpoint(meta, state, plan, [&](std::string_view piece) {
    EXPECT_GT(piece.size(), 0u);
    EXPECT_LE(piece.size(), nl::kCheckpointPieceBytes);
    out += piece;
    ++n;
  });
  if (pieces) *pieces = n;
  return out;
}

TEST(CheckpointStream, CheckpointsOfTheEarlierEncoderReencodeByteForByte) {
  const fs::path corpus = nltest::source_dir() / "fuzz/corpus/checkpoint";
  int files = 0;
  for (const char* name : {"stories260K-step3.nlck", "stories260K-step3-noplan.nlck"}) {
    SCOPED_TRACE(name);
    const std::string before = nltest::read_text(corpus / name);
    ASSERT_GT(before.size(), 1000u) << "the corpus checkpoint is missing: " << (corpus / name);
    const nl::Checkpoint c = nl::decode_checkpoint(before, name);
    EXPECT_TRUE(nl::encode_checkpoint(c) == before);
    EXPECT_TRUE(streamed(c.meta, c.state, c.precision) == before);
    EXPECT_TRUE(nl::encode_train_state(c.state) == std::string(nl::checkpoint_state_bytes(before, name)));
    EXPECT_TRUE(reference_state_bytes(c.state) == std::string(nl::checkpoint_state_bytes(before, name)));
    ++files;
  }
  EXPECT_EQ(files, 2);
}

TEST(CheckpointStream, AStateOfManyPiecesMatchesTheReferenceEncoding) {
  const nl::TrainState s = large_state(4);
  const nl::CheckpointMeta meta = some_meta();
  const std::string header = nlohmann::json({{"format", "nightlora-train-checkpoint"}, {"version", 1},
                                             {"identity", meta.identity}, {"progress", meta.progress}})
                                 .dump();
  const std::string want = reference_payload(header, s);
  ASSERT_GT(want.size(), 3 * nl::kCheckpointPieceBytes);
  size_t pieces = 0;
  const std::string got = streamed(meta, s, std::nullopt, &pieces);
  EXPECT_EQ(got.size(), want.size());
  EXPECT_TRUE(got == want) << "the streamed payload differs from the reference encoding";
  EXPECT_EQ(pieces, (want.size() + nl::kCheckpointPieceBytes - 1) / nl::kCheckpointPieceBytes);
  // The view of the trainer's buffers and the state itself write the same bytes, and they decode back.
  const nl::TrainStateView view(s.step, s.data_pos, s.adapter, s.adam_m, s.adam_v, s.adam_t);
  EXPECT_TRUE(streamed(meta, view, std::nullopt) == want);
  const nl::Checkpoint back = nl::decode_checkpoint(got, "mem");
  EXPECT_TRUE(nl::encode_train_state(back.state) == reference_state_bytes(s));
}

TEST(CheckpointStream, TheSavedFileIsTheCheckedFileOfThePayload) {
  nltest::TempDir dir;
  const nl::TrainState s = large_state(3);
  const nl::CheckpointMeta meta = some_meta();
  const std::string payload = nl::encode_checkpoint({meta, s, std::nullopt});
  nl::CheckpointStore store((dir / "ck").string(), 2);
  const std::string path = store.save(s.step, [&](const nl::ByteSink& emit) { nl::write_checkpoint(meta, s, std::nullopt, emit); });
  nl::write_file_checked((dir / "whole.nlck").string(), payload);
  EXPECT_TRUE(nltest::read_text(path) == nltest::read_text(dir / "whole.nlck"));
  const std::optional<nl::LoadedCheckpoint> loaded = store.load_latest();
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->step, 12);
  EXPECT_TRUE(loaded->payload == payload);
}

TEST(CheckpointStream, AFailingProducerLeavesThePreviousFile) {
  nltest::TempDir dir;
  const std::string path = (dir / "file.nlck").string();
  nl::write_file_checked(path, "the previous payload");
  EXPECT_THROW(nl::write_file_checked_streamed(path,
                                               [](const nl::PieceEmitter& emit) {
                                                 emit("half of a new");
                                                 throw std::runtime_error("the producer failed");
                                               }),
               std::runtime_error);
  EXPECT_EQ(nl::read_file_checked_or_throw(path), "the previous payload");
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  // Pieces of any size, empty ones included, make the same file as the payload in one piece.
  nl::write_file_checked_streamed(path, [](const nl::PieceEmitter& emit) {
    for (const char* p : {"a ", "", "new ", "payload"}) emit(p);
  });
  EXPECT_EQ(nl::read_file_checked_or_throw(path), "a new payload");
  nl::write_file_checked((dir / "whole").string(), "a new payload");
  EXPECT_TRUE(nltest::read_text(path) == nltest::read_text(dir / "whole"));
}

// The point of streaming: a save holds one piece of the file, not copies of the state. The
// same save through the whole-payload encoder allocates more than the state (the counter sees it).
TEST(CheckpointStream, ASaveAllocatesOnePieceNotTheState) {
  nltest::TempDir dir;
  const nl::TrainState s = large_state(8);
  const nl::CheckpointMeta meta = some_meta();
  const size_t state_bytes = reference_state_bytes(s).size();
  ASSERT_GT(state_bytes, 6 * nl::kCheckpointPieceBytes);
  nl::CheckpointStore store((dir / "ck").string(), 2);
  int64_t streamed_bytes = 0, whole_bytes = 0;
  {
    nltest::AllocCounter count;
    store.save(1, [&](const nl::ByteSink& emit) { nl::write_checkpoint(meta, s, std::nullopt, emit); });
    streamed_bytes = count.allocated_bytes();
  }
  {
    nltest::AllocCounter count;
    store.save(2, nl::encode_checkpoint({meta, s, std::nullopt}));
    whole_bytes = count.allocated_bytes();
  }
  std::printf("[checkpoint stream] state %.1f MiB: a streamed save allocates %.2f MiB, a whole-payload save %.1f MiB\n",
              static_cast<double>(state_bytes) / (1 << 20), static_cast<double>(streamed_bytes) / (1 << 20),
              static_cast<double>(whole_bytes) / (1 << 20));
  EXPECT_LE(streamed_bytes, static_cast<int64_t>(nl::kCheckpointPieceBytes + (256 << 10)));
  EXPECT_GE(whole_bytes, static_cast<int64_t>(state_bytes));
  const std::vector<nl::CheckpointEntry> files = store.list();
  ASSERT_EQ(files.size(), 2u);
  EXPECT_TRUE(nltest::read_text(files[0].path) == nltest::read_text(files[1].path)) << "both saves hold the same payload";
}

}  // namespace checkpoint_stream_test
