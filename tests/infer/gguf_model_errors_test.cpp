// A GGUF model whose tensors do not match its configuration fails to load with a message
// that names the tensor and the expected and found shapes or types (files made from
// stories260K with one thing broken).
#include <gtest/gtest.h>

#include "infer_test_util.h"
#include "nightlora/modelio/model.h"
#include "nightlora/util/error.h"

using namespace nltest;

namespace {

// Loads `p` and returns the error message (fails the test when it loads).
std::string load_error(const fs::path& p) {
  try {
    nl::Model::load(p.string());
  } catch (const nl::Error& e) {
    return e.what();
  }
  ADD_FAILURE() << p << " loaded although it is broken";
  return "";
}

void expect_contains(const std::string& msg, const std::vector<std::string>& parts) {
  for (const auto& s : parts) EXPECT_NE(msg.find(s), std::string::npos) << "'" << s << "' not in: " << msg;
}

}  // namespace

TEST(GgufModelErrors, MissingTensor) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", path);
  TempDir tmp;
  copy_gguf(path, tmp / "m.gguf", {}, {"blk.2.attn_v.weight"});
  expect_contains(load_error(tmp / "m.gguf"), {"m.gguf", "blk.2.attn_v.weight", "missing", "[64, 32]"});
}

TEST(GgufModelErrors, WrongShape) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", path);
  TempDir tmp;
  copy_gguf(path, tmp / "m.gguf", [](const nl::GgufTensorInfo& t) -> std::optional<TensorEdit> {
    if (t.name != "blk.0.ffn_up.weight") return std::nullopt;
    return TensorEdit{nl::QType::F32, {64, 100}, std::vector<uint8_t>(64 * 100 * 4)};
  });
  expect_contains(load_error(tmp / "m.gguf"), {"blk.0.ffn_up.weight", "[64, 100]", "expected [64, 172]"});
}

TEST(GgufModelErrors, WrongNormShape) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", path);
  TempDir tmp;
  copy_gguf(path, tmp / "m.gguf", [](const nl::GgufTensorInfo& t) -> std::optional<TensorEdit> {
    if (t.name != "output_norm.weight") return std::nullopt;
    return TensorEdit{nl::QType::F32, {32}, std::vector<uint8_t>(32 * 4)};
  });
  expect_contains(load_error(tmp / "m.gguf"), {"output_norm.weight", "[32]", "expected [64]"});
}

TEST(GgufModelErrors, UnsupportedTensorType) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", path);
  TempDir tmp;
  // I8 is a valid GGUF type but not a weight format anyone quantizes LLMs to.
  copy_gguf(path, tmp / "m.gguf", [](const nl::GgufTensorInfo& t) -> std::optional<TensorEdit> {
    if (t.name != "blk.1.attn_q.weight") return std::nullopt;
    return TensorEdit{nl::QType::I8, t.ne, std::vector<uint8_t>(64 * 64)};
  });
  std::string msg;
  try {
    nl::Model::load((tmp / "m.gguf").string());
    ADD_FAILURE() << "loaded a model with an i8 weight";
  } catch (const nl::Error& e) {
    msg = e.what();
  }
  // Either our loader or the GGUF reader may reject it; both must say which type.
  expect_contains(msg, {"i8"});
}

TEST(GgufModelErrors, UnknownArchitectureAndBadMetadata) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", path);
  TempDir tmp;
  copy_gguf(path, tmp / "a.gguf", {}, {}, [](nl::GgufWriter& w) { w.set("general.architecture", nl::GgufValue::str("mamba")); });
  expect_contains(load_error(tmp / "a.gguf"), {"mamba", "not supported"});

  // 8 heads but 3 KV heads: no whole groups.
  copy_gguf(path, tmp / "b.gguf", {}, {}, [](nl::GgufWriter& w) { w.set("llama.attention.head_count_kv", nl::GgufValue::u32(3)); });
  expect_contains(load_error(tmp / "b.gguf"), {"head_count_kv"});

  copy_gguf(path, tmp / "c.gguf", {}, {}, [](nl::GgufWriter& w) { w.set("llama.block_count", nl::GgufValue::u32(0)); });
  expect_contains(load_error(tmp / "c.gguf"), {"llama.block_count"});

  // One layer more than the file holds: the first tensor of layer 5 is missing.
  copy_gguf(path, tmp / "d.gguf", {}, {}, [](nl::GgufWriter& w) { w.set("llama.block_count", nl::GgufValue::u32(6)); });
  expect_contains(load_error(tmp / "d.gguf"), {"blk.5.", "missing"});
}
