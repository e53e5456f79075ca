#include "nightlora/eval/text_windows.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "nightlora/tokenizer/tokenizer.h"
#include "nightlora/util/error.h"

namespace nl {

Dataset text_windows(const std::vector<int32_t>& tokens, const TextWindowOptions& opt, const std::string& source) {
  if (opt.seq_len < 2) fail(source, "--seq-len must be at least 2 tokens");
  if (opt.stride < 1 || opt.stride > opt.seq_len)
    fail(source, "--stride must be between 1 and --seq-len (" + std::to_string(opt.seq_len) + ")",
         "e.g. half the window: --stride " + std::to_string(std::max<int64_t>(1, opt.seq_len / 2)));
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n < 2) fail(source, "the text has " + std::to_string(n) + " token(s); perplexity needs at least 2", "give a longer text");
  Dataset d;
  d.source = source;
  d.format = DataFormat::Text;
  int64_t scored_up_to = 0;  // tokens before this index were scored by an earlier window (or are token 0)
  for (int64_t begin = 0;; begin += opt.stride) {
    const int64_t end = std::min(begin + opt.seq_len, n);
    Example e;
    e.tokens.assign(tokens.begin() + begin, tokens.begin() + end);
    e.supervised.assign(e.tokens.size(), 0);
    // Token t is predicted from the tokens before it in this window: t = begin has none.
    for (int64_t t = std::max(scored_up_to, begin + 1); t < end; ++t) e.supervised[static_cast<size_t>(t - begin)] = 1;
    e.line = static_cast<int64_t>(d.examples.size()) + 1;  // the window's number, for messages
    scored_up_to = end;
    if (e.n_supervised() > 0) d.examples.push_back(std::move(e));
    if (end == n) break;
  }
  return d;
}

std::vector<int32_t> text_tokens(std::string text, const Tokenizer& tok) {
  if (text.rfind("\xEF\xBB\xBF", 0) == 0) text.erase(0, 3);  // a UTF-8 byte-order mark is not text
  return tok.encode(text, tok.add_bos_default(), /*parse_special=*/false);
}

std::vector<int32_t> load_text_tokens(const std::string& path, const Tokenizer& tok) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot read the text file", "check the path");
  std::ostringstream buf;
  buf << in.rdbuf();
  return text_tokens(buf.str(), tok);
}

}  // namespace nl
