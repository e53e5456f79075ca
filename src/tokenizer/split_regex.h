// A pre-tokenizer split regex (Hugging Face's `Split` with behavior "Isolated"), compiled
// with PCRE2 in UTF + UCP mode. HF tokenizers run these patterns with Oniguruma, where `\s`
// is the Unicode White_Space property; PCRE2's `\s` lacks U+0085, so `\s`/`\S` are rewritten
// to an explicit White_Space class before compiling.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace nl {

class SplitRegex {
 public:
  // Throws nl::Error (naming `where`) when the pattern does not compile.
  SplitRegex(const std::string& hf_pattern, const std::string& where);
  ~SplitRegex();
  SplitRegex(const SplitRegex&) = delete;
  SplitRegex& operator=(const SplitRegex&) = delete;

  // Splits valid UTF-8 `text` into the matches and the gaps between them, in order.
  std::vector<std::string_view> split(std::string_view text) const;

  // The PCRE2 pattern actually compiled (for tests and messages).
  const std::string& pcre_pattern() const { return pattern_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string pattern_;
};

// Rewrites `\s` and `\S` (inside and outside character classes) to the White_Space class.
std::string rewrite_whitespace_classes(const std::string& hf_pattern);

}  // namespace nl
