// Training checkpoints whose checksum is valid but whose contents are absurd (a forged or
// miswritten file): refused with an nl::Error naming the file and the field, never trusted and
// never a parser's exception. The payloads are made with the encoder (from an edited state) or
// edited as bytes; CheckpointStore's CRC footer wraps a payload unchanged, so each is exactly what
// a verified checkpoint hands the decoder. (Also run under ASan/UBSan: test_hostile_sanitized.)
#include <cstdint>
#include <functional>
#include <limits>

#include "input_error.h"
#include "nightlora/host/checkpoint.h"
#include "test_util.h"

namespace {

using nltest::expect_mentions;
using nltest::input_error_of;

// A one-layer adapter with its q projection enabled (rank 2, 4 -> 4), a few steps in.
nl::Checkpoint small_checkpoint() {
  nl::Checkpoint c;
  nl::TrainState& s = c.state;
  s.step = 4;
  s.data_pos = 16;
  s.adam_t = 4;
  nl::LoraAdapter& a = s.adapter;
  a.cfg.rank = 2;
  a.n_layer = 1;
  a.pairs.resize(nl::kNumProj);
  nl::LoraPair& q = a.pairs[0];
  q.enabled = true;
  q.in = 4;
  q.out = 4;
  q.A.assign(8, 0.25f);
  q.B.assign(8, 0.5f);
  s.adam_m = a;
  s.adam_v = a;
  c.meta.identity = {{"model", "m"}, {"data", "d"}, {"config", {{"lr", 0.001}}}};
  c.meta.progress = {{"elapsed_s", 1.5}, {"tokens", 640}};
  return c;
}

const std::string kFile = "run/checkpoints/ckpt-000000000004.nlck";

// The error of decoding `payload` as the checkpoint kFile.
std::string decode_error(const std::string& payload) {
  std::string msg = input_error_of([&] { nl::decode_checkpoint(payload, kFile); });
  EXPECT_NE(msg.find(kFile), std::string::npos) << "the message should name the file: " << msg;
  return msg;
}

std::string edited(const std::function<void(nl::Checkpoint&)>& edit) {
  nl::Checkpoint c = small_checkpoint();
  edit(c);
  return nl::encode_checkpoint(c);
}

// The payload with its JSON header replaced by `header` (the state bytes kept).
std::string with_header(const std::string& header) {
  const std::string payload = nl::encode_checkpoint(small_checkpoint());
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(static_cast<unsigned char>(payload[8 + i])) << (8 * i);
  std::string out = payload.substr(0, 8);
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(header.size() >> (8 * i)));
  return out + header + payload.substr(16 + n);
}

TEST(CheckpointHostile, TheUntouchedCheckpointDecodes) {
  nl::Checkpoint back = nl::decode_checkpoint(nl::encode_checkpoint(small_checkpoint()), kFile);
  EXPECT_EQ(back.state.step, 4);
  EXPECT_EQ(back.state.data_pos, 16);
  EXPECT_EQ(back.state.adapter.pairs[0].A, small_checkpoint().state.adapter.pairs[0].A);
  EXPECT_EQ(back.meta.progress["tokens"], 640);
}

TEST(CheckpointHostile, AbsurdCountersAreRefused) {
  expect_mentions(decode_error(edited([](nl::Checkpoint& c) { c.state.adam_t = std::numeric_limits<int64_t>::max(); })),
                  {"AdamW step count", "9223372036854775807"});
  expect_mentions(decode_error(edited([](nl::Checkpoint& c) { c.state.data_pos = int64_t{1} << 62; })),
                  {"data position", "4611686018427387904"});
  expect_mentions(decode_error(edited([](nl::Checkpoint& c) { c.state.step = -3; })), {"step -3 is negative"});
  expect_mentions(decode_error(edited([](nl::Checkpoint& c) { c.state.adam_t = 5; })),
                  {"AdamW step count 5 exceeds the step 4"});
  expect_mentions(decode_error(edited([](nl::Checkpoint& c) { c.state.adapter.cfg.alpha = std::numeric_limits<float>::infinity(); })),
                  {"LoRA alpha", "not finite"});
}

TEST(CheckpointHostile, ShapesThatDoNotFitThePayloadAreRefused) {
  // The pair claims 5 inputs, so rank x in = 10 values of A, but 8 are stored.
  expect_mentions(decode_error(edited([](nl::Checkpoint& c) {
                    c.state.adapter.pairs[0].in = 5;
                    c.state.adam_m.pairs[0].in = 5;
                    c.state.adam_v.pairs[0].in = 5;
                  })),
                  {"A: 8 values, expected 10"});
  // A layer count of 2^31 with a matching pair count: refused before anything is allocated.
  std::string payload = nl::encode_checkpoint(small_checkpoint());
  uint64_t header_len = 0;
  for (int i = 0; i < 8; ++i) header_len |= static_cast<uint64_t>(static_cast<unsigned char>(payload[8 + i])) << (8 * i);
  const size_t state = 16 + header_len;  // step, data_pos, adam_t, rank, alpha, dropout, targets, seed, n_layer, n_pairs
  auto put = [&](size_t at, uint64_t v) {
    for (int i = 0; i < 8; ++i) payload[at + i] = static_cast<char>(v >> (8 * i));
  };
  put(state + 64, uint64_t{1} << 31);
  put(state + 72, (uint64_t{1} << 31) * nl::kNumProj);
  expect_mentions(decode_error(payload), {"LoRA pairs cannot fit"});
}

TEST(CheckpointHostile, HeaderFieldsOfTheWrongTypeNameTheKey) {
  const std::string ok_rest = R"("identity": {"model": "m", "data": "d", "config": {"lr": 0.001}}, "progress": {"elapsed_s": 1.5, "tokens": 640})";
  const std::string format = R"("format": "nightlora-train-checkpoint")";
  struct Case {
    std::string header;
    const char* place;
    const char* problem;
  };
  const Case cases[] = {
      {"{" + format + R"(, "version": "1", )" + ok_rest + "}", "\"version\"", "expected an integer, found string \"1\""},
      {"{" + format + R"(, "version": 1e506, )" + ok_rest + "}", "\"version\"", "out of range"},
      {"{" + format + R"(, "version": 1, "identity": 5})", "\"identity\"", "expected an object, found number 5"},
      {"{" + format + R"(, "version": 1, "identity": {"config": [1]}})", "\"identity.config\"", "expected an object"},
      {"{" + format + R"(, "version": 1, "progress": {"elapsed_s": "long"}})", "\"progress.elapsed_s\"", "expected a number"},
      {"{" + format + R"(, "version": 1, "progress": {"tokens": -5}})", "\"progress.tokens\"", "out of range"},
      {"{" + format + R"(, "version": 1, "progress": {"tokens": null}})", "\"progress.tokens\"", "expected an integer"},
      {R"({"format": 7, "version": 1})", "\"format\"", "expected a string"},
      {"{" + format + R"(, "version": 1, "precision_plan": {"format": "nightlora-precision-plan", "version": 1, "n_layer": "1"}})",
       "precision_plan", "\"n_layer\" must be a non-negative integer, found string \"1\""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.header);
    expect_mentions(decode_error(with_header(c.header)), {c.place, c.problem});
  }
}

}  // namespace
