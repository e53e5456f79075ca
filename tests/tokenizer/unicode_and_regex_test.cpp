// The Unicode pieces the tokenizers stand on: NFC (checked against hand-picked cases and
// against node's String.prototype.normalize on the whole corpus), and the split regexes'
// `\s`, `\p{L}`, `\p{N}` and `(?i:...)` behaving as Hugging Face tokenizers' Oniguruma does.
#include <gtest/gtest.h>

#include "../../src/tokenizer/split_regex.h"
#include "../../src/tokenizer/tokenizer_spec.h"
#include "../../src/tokenizer/unicode_text.h"
#include "corpus_util.h"
#include "nightlora/util/error.h"

using namespace nltest;
namespace u = nl::unicode;

namespace {

TEST(Nfc, ComposesReordersAndKeepsExclusions) {
  EXPECT_EQ(u::nfc("plain ASCII"), "plain ASCII");
  EXPECT_EQ(u::nfc("cafe\u0301"), "caf\u00E9");
  EXPECT_EQ(u::nfc("\u1100\u1161\u11A8"), "\uAC01");          // Hangul jamo -> syllable
  EXPECT_EQ(u::nfc("a\u0323\u0302"), "\u1EAD");               // dot below (220) + circumflex (230)
  EXPECT_EQ(u::nfc("a\u0302\u0323"), "\u1EAD");               // same after canonical reordering
  EXPECT_EQ(u::nfc("\u212B"), "\u00C5");                      // ANGSTROM SIGN -> Å (singleton)
  EXPECT_EQ(u::nfc("\u0344"), "\u0308\u0301");                // non-starter decomposition
  EXPECT_EQ(u::nfc("\u0958"), "\u0915\u093C");                // composition exclusion stays decomposed
  EXPECT_EQ(u::nfc("e\u0301\u0301"), "\u00E9\u0301");         // second acute is blocked
  EXPECT_EQ(u::nfc("\u00C5\u0301"), "\u01FA");                // Å + acute -> Ǻ
  EXPECT_EQ(u::nfc("\xFF ok"), "\uFFFD ok");                  // invalid UTF-8 becomes U+FFFD
}

TEST(Nfc, MatchesNodeOnTheWholeCorpus) {
  if (node_with_oracles().empty()) GTEST_SKIP() << "node missing";
  const std::string corpus = read_text(tokt::corpus_path());
  // node: unescape, normalize, escape again (same convention as the corpus).
  const char* script =
      "const s=require('fs').readFileSync(0,'utf8').split('\\n');s.pop();"
      "const un=l=>l.replace(/\\\\(\\\\|n|t)/g,(_,c)=>c==='n'?'\\n':c==='t'?'\\t':'\\\\');"
      "const es=t=>t.replace(/\\\\/g,'\\\\\\\\').replace(/\\n/g,'\\\\n').replace(/\\t/g,'\\\\t');"
      "process.stdout.write(s.map(l=>es(un(l).normalize('NFC'))).join('\\n')+'\\n');";
  CmdResult r = run_cmd("node -e " + shq(script), corpus);
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto want = tokt::split_lines(r.out);
  const auto lines = tokt::corpus_escaped();
  ASSERT_EQ(want.size(), lines.size());
  int changed = 0, failures = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string text = tokt::unescape(lines[i]);
    const std::string got = u::nfc(text);
    changed += got != text;
    if (got != tokt::unescape(want[i]) && failures++ < 5) ADD_FAILURE() << "line " << i + 1 << ": " << lines[i];
  }
  EXPECT_EQ(failures, 0);
  EXPECT_GT(changed, 50) << "the corpus should exercise composition";
}

std::vector<std::string> split(const nl::SplitRegex& re, const std::string& text) {
  std::vector<std::string> out;
  for (std::string_view p : re.split(text)) out.emplace_back(p);
  return out;
}

TEST(SplitRegex, WhitespaceIsUnicodeWhiteSpaceAsInOniguruma) {
  nl::SplitRegex ws("\\s+|\\S+", "test");
  // U+0085 (NEXT LINE) is White_Space: PCRE2's own \s would not match it.
  EXPECT_EQ(split(ws, "a\u0085\u3000b"), (std::vector<std::string>{"a", "\u0085\u3000", "b"}));
  // U+FEFF is not White_Space (JavaScript's \s would match it).
  EXPECT_EQ(split(ws, "a\uFEFFb"), (std::vector<std::string>{"a\uFEFFb"}));
  EXPECT_EQ(nl::rewrite_whitespace_classes("[^\\s\\p{L}]\\s(?!\\S)"),
            "[^\\t-\\r\\x{85}\\p{Z}\\p{L}][\\t-\\r\\x{85}\\p{Z}](?![^\\t-\\r\\x{85}\\p{Z}])");
}

TEST(SplitRegex, Llama3PatternSplitsLikeTheReference) {
  nl::SplitRegex re(nl::kLlama3Regex, "test");
  EXPECT_EQ(split(re, "I'M here, it's 12345 caf\u00E9\u4E2D\u6587!!\n\n  x"),
            (std::vector<std::string>{"I", "'M", " here", ",", " it", "'s", " ", "123", "45", " caf\u00E9\u4E2D\u6587", "!!\n\n",
                                      " ", " x"}));
  nl::SplitRegex q(nl::kQwen2Regex, "test");
  EXPECT_EQ(split(q, "\u0663\u0664 1x"), (std::vector<std::string>{"\u0663", "\u0664", " ", "1", "x"}));
}

TEST(SplitRegex, BadPatternIsAClearError) {
  try {
    nl::SplitRegex re("(unclosed", "tok.json");
    FAIL() << "expected an error";
  } catch (const nl::Error& e) {
    EXPECT_NE(std::string(e.what()).find("tok.json"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("regex"), std::string::npos) << e.what();
  }
}

}  // namespace
