// `nightlora info`: the key facts of a Hugging Face folder and of a GGUF file.
#include "test_util.h"

namespace {

using nltest::TempDir;
namespace fs = std::filesystem;

void expect_has(const std::string& out, const std::vector<std::string>& facts) {
  for (const auto& f : facts) EXPECT_NE(out.find(f), std::string::npos) << "missing '" << f << "' in:\n" << out;
}

TEST(Info, HuggingFaceFolder) {
  NL_REQUIRE_SHARED("tinystories-656k", dir);
  nltest::CmdResult r = nltest::run_cli("info " + nltest::shq(dir.string()));
  ASSERT_EQ(r.rc, 0) << r.err;
  expect_has(r.out, {"source format: Hugging Face folder", "architecture: llama", "layers: 2", "d_model: 128",
                     "heads: 8 (kv heads 4, head_dim 16)", "ffn: 384", "vocab: 2048", "half-split", "tied",
                     "f32: 20 tensors", "lm_head.weight", "[128, 2048]", "model.layers.0.self_attn.k_proj.weight",
                     "2626168 bytes", "tokenizer: ", "chat template: "});
}

TEST(Info, SyntheticGguf) {
  TempDir tmp;
  const fs::path out = tmp / "t.gguf";
  nltest::CmdResult r = nltest::run_cli("synth-model --preset tiny-qwen3 --type q8_0 --tokenizer generated " + nltest::shq(out.string()));
  ASSERT_EQ(r.rc, 0) << r.err;
  r = nltest::run_cli("info " + nltest::shq(out.string()));
  ASSERT_EQ(r.rc, 0) << r.err;
  expect_has(r.out, {"source format: GGUF v3", "architecture: qwen3", "head_dim 32", "qk norm: yes", "q8_0: ",
                     "blk.0.attn_q_norm.weight", "mostly Q8_0", "GENERATED", "chat template: chatml",
                     "file size: " + std::to_string(fs::file_size(out)) + " bytes"});
  EXPECT_EQ(r.out.find("blk.1.attn_q.weight"), std::string::npos);  // blocks after the first are summarised
  r = nltest::run_cli("info --tensors " + nltest::shq(out.string()));
  EXPECT_NE(r.out.find("blk.1.attn_q.weight"), std::string::npos);

  r = nltest::run_cli("info " + nltest::shq((tmp / "missing.gguf").string()));
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.err.find("missing.gguf"), std::string::npos);
}

}  // namespace
