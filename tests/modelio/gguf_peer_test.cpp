// Files we write are read the same way by someone else's parser (@huggingface/gguf).
// Other tests call expect_gguf_matches_peer on the GGUFs they produce (converted,
// quantized, synthetic, adapters); this one covers the writer itself and a real file.
#include "gguf_peer.h"
#include "nightlora/modelio/gguf.h"
#include "test_util.h"

using namespace nltest;

TEST(GgufPeer, RealFileReadsTheSame) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", path);
  if (!expect_gguf_matches_peer(path)) GTEST_SKIP() << "node oracles missing";
}

TEST(GgufPeer, EveryValueTypeWeWrite) {
  TempDir td;
  nl::GgufWriter w;
  nl::GgufValue v;
  w.set("t.str", nl::GgufValue::str("héllo\nworld"));
  w.set("t.u32", nl::GgufValue::u32(4000000000u));
  w.set("t.i32", nl::GgufValue::i32(-7));
  w.set("t.u64", nl::GgufValue::u64(1ull << 40));
  w.set("t.f32", nl::GgufValue::f32(0.1f));
  w.set("t.bool", nl::GgufValue::boolean(true));
  w.set("t.strs", nl::GgufValue::str_array({"a", "", "日本"}));
  w.set("t.f32s", nl::GgufValue::f32_array({1.0f, -0.25f, 1e-8f}));
  w.set("t.i32s", nl::GgufValue::i32_array({-1, 0, 2147483647}));
  std::vector<float> data(96 * 3, 0.25f);
  w.add_tensor_data("x.weight", nl::QType::F32, {96, 3}, data.data());
  w.add_tensor_data("y.weight", nl::QType::F32, {5}, data.data());
  w.set_alignment(64);
  w.write((td / "t.gguf").string());
  if (!expect_gguf_matches_peer(td / "t.gguf")) GTEST_SKIP() << "node oracles missing";
}
