// Added tokens marked "normalized": true, on a tokenizer.json small enough to read: the
// SentencePiece-style normalizer (prepend "▁", spaces -> "▁") runs first, and such a token is
// found in the normalized text by its own normalized form ("▁<unk>"), taking the "▁" before
// it; decoding gives that form back. The expected ids and texts are those of Hugging Face's
// Rust library (npm tokenizers 0.23.2, tools/js/hf_tokenizers_oracle.mjs), which the parity
// tests compare on a whole corpus; this test needs neither node nor ../shared.
#include <gtest/gtest.h>

#include "nightlora/tokenizer/tokenizer.h"
#include "test_util.h"

namespace {

const std::string kTokenizer = R"({
 "added_tokens": [{"id": 0, "content": "<unk>", "single_word": false, "lstrip": false, "rstrip": false,
                   "normalized": true, "special": true}],
 "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"},
                {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
 "pre_tokenizer": null,
 "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
             {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
 "model": {"type": "BPE", "dropout": null, "unk_token": "<unk>", "fuse_unk": true, "byte_fallback": false,
   "vocab": {"<unk>": 0, "▁": 1, "h": 2, "i": 3, "▁h": 4, "▁hi": 5, "<": 6, ">": 7, "u": 8, "n": 9, "k": 10, "hi": 11},
   "merges": ["▁ h", "▁h i", "h i"]}})";

TEST(NormalizedAddedToken, IsFoundByItsNormalizedFormAndDecodesThroughIt) {
  nltest::TempDir tmp;
  nltest::write_text(tmp / "tokenizer.json", kTokenizer);
  auto tok = nl::Tokenizer::from_hf_dir(tmp.path.string());
  using Ids = std::vector<int32_t>;
  EXPECT_EQ(tok->encode("hi <unk> hi", false), (Ids{5, 0, 5})) << "the token takes the space before it";
  EXPECT_EQ(tok->encode("<unk> hi", false), (Ids{0, 5})) << "at the start: the prepended \"▁\" goes with it";
  EXPECT_EQ(tok->encode("hi<unk>", false), (Ids{5, 6, 8, 9, 10, 7})) << "no \"▁\" before it: not the token";
  EXPECT_EQ(tok->encode("hi  <unk>", false), (Ids{5, 1, 0}));
  EXPECT_EQ(tok->decode({5, 0, 5}), "hi <unk> hi");
  EXPECT_EQ(tok->decode({0, 5}), "<unk> hi");
  EXPECT_EQ(tok->decode({1, 0}), " <unk>");
}

}  // namespace
