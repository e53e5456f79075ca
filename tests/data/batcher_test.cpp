// Packing examples into batches, the per-epoch shuffle, and masks with a real tokenizer.
#include "nightlora/data/batcher.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "char_tokenizer.h"
#include "nightlora/modelio/gguf.h"
#include "nightlora/tokenizer/tokenizer.h"
#include "test_util.h"

namespace {

using nltest::CharTokenizer;
namespace fs = std::filesystem;

TEST(Batcher, PackingLabelsFollowMasksAndStopAtSequenceEnds) {
  CharTokenizer tok;
  nl::Dataset ds = nl::parse_jsonl_dataset(
      "{\"prompt\": \"ab\", \"completion\": \"c\"}\n{\"prompt\": \"\", \"completion\": \"xy\"}\n", "d.jsonl", tok, {});
  nl::Batch b = nl::pack_batch(ds.examples, {1, 0});
  // "<s>xy</s>" then "<s>abc</s>".
  const int32_t x = 'x' + 3, y = 'y' + 3, a = 'a' + 3, bb = 'b' + 3, c = 'c' + 3;
  EXPECT_EQ(b.tokens, (std::vector<int32_t>{1, x, y, 2, 1, a, bb, c, 2}));
  EXPECT_EQ(b.seq_start, (std::vector<int64_t>{0, 4, 9}));
  // An empty prompt: every next token is a target; the last token of a sequence predicts nothing.
  // Prompt/completion: only positions whose next token is in the completion (c, EOS).
  EXPECT_EQ(b.labels, (std::vector<int32_t>{x, y, 2, -1, -1, -1, c, 2, -1}));
  EXPECT_EQ(b.n_seqs(), 2);
  EXPECT_EQ(b.n_supervised(), 5);
}

TEST(Batcher, EachEpochIsAPermutationDeterminedBySeed) {
  const int64_t n = 17;
  nl::DataOrder o1(n, 42), o2(n, 42), o3(n, 43);
  std::vector<int64_t> e0, e1, same, other;
  for (int64_t p = 0; p < n; ++p) e0.push_back(o1.at(p));
  for (int64_t p = n; p < 2 * n; ++p) e1.push_back(o1.at(p));
  for (int64_t p = 0; p < n; ++p) same.push_back(o2.at(p));
  for (int64_t p = 0; p < n; ++p) other.push_back(o3.at(p));
  for (auto* v : {&e0, &e1, &other}) {
    std::vector<int64_t> s = *v;
    std::sort(s.begin(), s.end());
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(s[static_cast<size_t>(i)], i);
  }
  EXPECT_EQ(e0, same);   // same seed, same order
  EXPECT_NE(e0, e1);     // a fresh shuffle each epoch
  EXPECT_NE(e0, other);  // the seed matters
  // Random access gives the same as sequential access (a resumed run continues the order).
  nl::DataOrder o4(n, 42);
  EXPECT_EQ(o4.at(n + 3), e1[3]);
  EXPECT_EQ(o4.at(2), e0[2]);
  EXPECT_EQ(o4.epoch_of(n + 3), 1);
}

TEST(Batcher, UnshuffledOrderAndBatchesInOrder) {
  CharTokenizer tok;
  nl::Dataset ds = nl::parse_jsonl_dataset("{\"text\":\"a\"}\n{\"text\":\"b\"}\n{\"text\":\"c\"}\n", "d", tok, {});
  nl::DataOrder o(3, 0, /*shuffle=*/false);
  EXPECT_EQ(o.at(4), 1);
  auto batches = nl::batches_in_order(ds, 2);
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(batches[0].n_seqs(), 2);
  EXPECT_EQ(batches[1].n_seqs(), 1);
  EXPECT_EQ(batches[1].tokens[1], 'c' + 3);
}

TEST(Batcher, ShuffleRngIsUniformEnoughAndStable) {
  nl::ShuffleRng r(7);
  std::vector<int> counts(5);
  for (int i = 0; i < 5000; ++i) counts[r.below(5)]++;
  for (int c : counts) EXPECT_GT(c, 850);
  // SplitMix64 from seed 0: the published first output.
  nl::ShuffleRng z(0);
  EXPECT_EQ(z.next(), 0xE220A8397B1DCDAFull);
}

// With a real SentencePiece tokenizer, tokens can merge across the prompt/completion
// boundary; the supervised tokens must still cover the whole completion.
TEST(Batcher, RealTokenizerMasksCoverTheCompletion) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", model_path);
  auto g = nl::GgufFile::open(model_path.string());
  auto tok = nl::Tokenizer::from_gguf(*g);
  nl::Dataset ds = nl::parse_jsonl_dataset(
      "{\"prompt\": \"Once upon a time, there was a dragon named\", \"completion\": \" Zorbo. He was kind.\"}\n",
      "d.jsonl", *tok, {});
  const nl::Example& e = ds.examples[0];
  std::vector<int32_t> sup, pre;
  for (size_t t = 0; t < e.tokens.size(); ++t) (e.supervised[t] ? sup : pre).push_back(e.tokens[t]);
  ASSERT_FALSE(sup.empty());
  EXPECT_EQ(sup.back(), tok->eos());
  std::string sup_text = tok->decode(std::vector<int32_t>(sup.begin(), sup.end() - 1), true);
  EXPECT_NE(sup_text.find("Zorbo. He was kind."), std::string::npos) << sup_text;
  EXPECT_EQ(tok->decode(pre, true).find("Zorbo"), std::string::npos);
  // Supervised tokens form one contiguous run at the end.
  size_t first = 0;
  while (!e.supervised[first]) ++first;
  for (size_t t = first; t < e.tokens.size(); ++t) EXPECT_TRUE(e.supervised[t]);
}

}  // namespace
