// Decoder::forward_tree: a tree of continuations of the cached context in one block. Each
// tree token's logits must be the bits the last row of a forward of its root-to-token path
// after the same cache gives (a few tokens there: the engine's matrix-vector kernels; 20 in
// the tree: its block kernels), in the exact f32 mode and in the int8 mode. On stories260K (skipped with a message when ../shared is absent) and the tiny synthetic
// presets (llama Q4_0, qwen2 Q8_0 with QKV bias, qwen3 F16 with Q/K norm), with and without a
// LoRA adapter, f32 and f16 caches. The cache holds the context alone afterwards; bad trees
// are refused with nl::Error.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "nightlora/host/lora.h"
#include "nightlora/infer/decoder.h"
#include "nightlora/modelio/model.h"
#include "nightlora/modelio/synth.h"
#include "nightlora/tokenizer/tokenizer.h"
#include "nightlora/util/error.h"
#include "decoder_test_models.h"
#include "test_util.h"

using namespace nltest;

namespace decode_tree_test {

using decoder_test_models::NamedModel;

std::vector<NamedModel> tree_models() { return decoder_test_models::stories_and_tiny_presets("decode tree", 7); }

nl::LoraAdapter filled_adapter(const nl::Model& m, uint32_t seed) { return decoder_test_models::filled_adapter(m, seed, seed); }

// 20 tokens: three roots, siblings, depths up to 5, a node whose children come after other
// subtrees (7 -> 19) and one past the first block of 8 query rows (2 -> 11).
const std::vector<int32_t> kParent = {-1, 0, 1, 1, -1, 4, 5, 6, 6, -1, 9, 2, 11, 12, -1, 14, 15, 14, 3, 7};

std::vector<int32_t> path_to(int64_t t) {
  std::vector<int32_t> rows;
  for (int32_t r = static_cast<int32_t>(t); r >= 0; r = kParent[static_cast<size_t>(r)]) rows.insert(rows.begin(), r);
  return rows;
}

TEST(DecodeTree, EachTokenGetsTheBitsOfItsPathRunAfterTheCache) {
  for (const NamedModel& tm : tree_models()) {
    const nl::Model& m = *tm.model;
    const int64_t V = m.config.vocab;
    const nl::LoraAdapter ad = filled_adapter(m, 3);
    const int32_t bos = m.tokenizer && m.tokenizer->bos() >= 0 ? m.tokenizer->bos() : 1;
    std::vector<int32_t> prompt = {bos};
    for (int t = 0; t < 30; ++t) prompt.push_back(static_cast<int32_t>((37 * t + 11) % std::min<int64_t>(V, 250)));
    std::vector<int32_t> tokens;
    for (size_t i = 0; i < kParent.size(); ++i) tokens.push_back(static_cast<int32_t>((53 * i + 7) % std::min<int64_t>(V, 250)));
    const int64_t T = static_cast<int64_t>(tokens.size());

    for (const bool exact : {true, false})
      for (const bool adapted : {false, true}) {
        nl::DecoderOptions o = exact ? nl::DecoderOptions::exact(2) : nl::DecoderOptions{};
        o.threads = 2;
        const std::string what = tm.name + (exact ? ", f32" : ", int8") + (adapted ? ", adapter" : "");
        nl::Decoder dec(m, o);
        dec.set_adapter(adapted ? &ad : nullptr);
        dec.forward(prompt);
        const int64_t n_past = dec.n_past();
        const std::vector<float> tree = dec.forward_tree(tokens, kParent);
        ASSERT_EQ(tree.size(), static_cast<size_t>(T * V)) << what;
        EXPECT_EQ(dec.n_past(), n_past) << what << ": the tree stays out of the cache";
        for (int64_t t = 0; t < T; ++t) {
          std::vector<int32_t> path;
          for (int32_t r : path_to(t)) path.push_back(tokens[static_cast<size_t>(r)]);
          dec.truncate(n_past);
          const std::vector<float> rows = dec.forward(path, /*all_logits=*/true);
          const std::vector<float> want(rows.end() - V, rows.end());
          const std::vector<float> got(tree.begin() + t * V, tree.begin() + (t + 1) * V);
          ASSERT_EQ(got, want) << what << ": token " << t << " (depth " << path.size() - 1 << ")";
        }
        // The cache holds the context alone: a token after it gets the bits of a fresh run.
        dec.truncate(n_past);
        dec.forward_tree(tokens, kParent);
        const std::vector<float> next = dec.forward(std::vector<int32_t>{tokens[5]});
        nl::Decoder fresh(m, o);
        fresh.set_adapter(adapted ? &ad : nullptr);
        fresh.forward(prompt);
        EXPECT_EQ(next, fresh.forward(std::vector<int32_t>{tokens[5]})) << what << ": after the tree";
      }
  }
}

TEST(DecodeTree, RefusesBadTrees) {
  auto m = nl::Model::load(decoder_test_models::tiny_preset("tiny-llama", nl::QType::Q4_0, 7).string());
  nl::DecoderOptions o;
  o.threads = 2;
  o.max_context = 8;
  nl::Decoder dec(*m, o);
  dec.forward(std::vector<int32_t>{1, 2, 3});
  const auto refused = [&](std::vector<int32_t> tokens, std::vector<int32_t> parent, const std::string& why) {
    try {
      dec.forward_tree(tokens, parent);
      ADD_FAILURE() << "accepted: " << why;
    } catch (const nl::Error& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
    EXPECT_EQ(dec.n_past(), 3);
  };
  refused({}, {}, "no tokens");
  refused({4, 5}, {-1}, "2 tokens but 1 parents");
  refused({4, 5}, {-1, 1}, "token 1 of a tree has parent 1");
  refused({4, 5}, {-2, 0}, "token 0 of a tree has parent -2");
  refused({4, 5, 6, 7, 8, 9}, {-1, 0, 1, 2, 3, 4}, "context of 8 tokens exceeded");
  refused({4, static_cast<int32_t>(m->config.vocab)}, {-1, 0}, "outside the vocabulary");
  // Five tokens fit: the cache then still holds the three.
  EXPECT_EQ(dec.forward_tree(std::vector<int32_t>{4, 5, 6, 7, 8}, std::vector<int32_t>{-1, 0, 0, -1, 3}).size(),
            static_cast<size_t>(5 * m->config.vocab));
  EXPECT_EQ(dec.n_past(), 3);
}

}  // namespace decode_tree_test
