// PCRE2-backed split regex; see split_regex.h for why `\s` is rewritten.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/split_regex.h"

#include <pcre2.h>

#include "nightlora/util/error.h"

namespace nl {

namespace {
// Unicode White_Space: the C0 controls TAB..CR, U+0085 and the Z categories (Zs, Zl, Zp).
constexpr const char* kWhiteSpaceItems = "\\t-\\r\\x{85}\\p{Z}";
}  // namespace

std::string rewrite_whitespace_classes(const std::string& p) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char n = p[i + 1];
      if (n == 's') {
        out += in_class ? std::string(kWhiteSpaceItems) : "[" + std::string(kWhiteSpaceItems) + "]";
      } else if (n == 'S' && !in_class) {
        out += "[^" + std::string(kWhiteSpaceItems) + "]";
      } else {
        out += c;
        out += n;  // any other escape (including \S inside a class, kept as PCRE2's) passes through
      }
      ++i;
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal, not the end of the class.
      if (i + 1 < p.size() && p[i + 1] == '^') { out += '^'; ++i; }
      if (i + 1 < p.size() && p[i + 1] == ']') { out += ']'; ++i; }
      continue;
    }
    if (c == ']' && in_class) in_class = false;
    out += c;
  }
  return out;
}

struct SplitRegex::Impl {
  pcre2_code* code = nullptr;
  ~Impl() { if (code) pcre2_code_free(code); }
};

SplitRegex::SplitRegex(const std::string& hf_pattern, const std::string& where)
    : impl_(std::make_unique<Impl>()), pattern_(rewrite_whitespace_classes(hf_pattern)) {
  int err = 0;
  PCRE2_SIZE off = 0;
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern_.data()), pattern_.size(),
                              PCRE2_UTF | PCRE2_UCP, &err, &off, nullptr);
  if (!impl_->code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    fail(where, "pre-tokenizer regex does not compile at offset " + std::to_string(off) + ": " +
                    reinterpret_cast<const char*>(msg),
         "the pattern was: " + hf_pattern);
  }
  pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE);  // optional speed-up; matching works without it
}

SplitRegex::~SplitRegex() = default;

std::vector<std::string_view> SplitRegex::split(std::string_view text) const {
  std::vector<std::string_view> out;
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(impl_->code, nullptr);
  size_t pos = 0, gap_start = 0;
  while (pos <= text.size()) {
    const int rc = pcre2_match(impl_->code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), pos,
                               PCRE2_NO_UTF_CHECK, md, nullptr);
    if (rc < 0) break;
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    size_t s = ov[0], e = ov[1];
    if (e == s) {  // empty match: step over one character and keep looking
      if (s >= text.size()) break;
      pos = s + 1;
      while (pos < text.size() && ((unsigned char)text[pos] & 0xC0) == 0x80) ++pos;
      continue;
    }
    if (s > gap_start) out.push_back(text.substr(gap_start, s - gap_start));
    out.push_back(text.substr(s, e - s));
    pos = gap_start = e;
  }
  if (gap_start < text.size()) out.push_back(text.substr(gap_start));
  pcre2_match_data_free(md);
  return out;
}

}  // namespace nl
