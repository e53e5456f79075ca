// nightlora tokenize --model M [--bos] [--escaped] [--no-special] [--decode]
// Reads text lines on stdin and prints each line's token ids, space-separated, one output
// line per input line, so anyone can compare our tokenizer with another. Only the tokenizer
// is loaded (a GGUF, or a folder with tokenizer.json), never the weights.
#include <iostream>
#include <sstream>
#include <string>

#include "command.h"
#include "nightlora/tokenizer/tokenizer.h"
#include "nightlora/util/error.h"

namespace {

// "\n", "\t" and "\\" stand for newline, tab and backslash; any other backslash is literal.
std::string unescape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
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

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\\') out += "\\\\";
    else out += c;
  }
  return out;
}

struct Options {
  std::string model;
  bool bos = false, escaped = false, no_special = false, decode = false, skip_special = false;
};

int run_tokenize(const Options& o) {
  auto tok = nl::Tokenizer::from_path(o.model);
  std::ios::sync_with_stdio(false);
  std::string line;
  size_t line_no = 0;
  while (std::getline(std::cin, line)) {
    ++line_no;
    if (o.decode) {
      std::vector<int32_t> ids;
      std::istringstream in(line);
      std::string word;
      while (in >> word) {
        char* end = nullptr;
        const long v = std::strtol(word.c_str(), &end, 10);
        if (*end || word.empty() || v < 0 || v > INT32_MAX)
          nl::fail("stdin line " + std::to_string(line_no), "\"" + word + "\" is not a token id",
                   "--decode reads space-separated non-negative integers");
        ids.push_back(int32_t(v));
      }
      const std::string text = tok->decode(ids, o.skip_special);
      std::cout << (o.escaped ? escape(text) : text) << '\n';
    } else {
      const std::string text = o.escaped ? unescape(line) : line;
      const std::vector<int32_t> ids = tok->encode(text, o.bos, !o.no_special);
      for (size_t i = 0; i < ids.size(); ++i) std::cout << (i ? " " : "") << ids[i];
      std::cout << '\n';
    }
  }
  std::cout.flush();
  return 0;
}

nlcli::Register reg("tokenize", "Print the token ids of each line of stdin (or decode ids with --decode)",
                    [](CLI::App& sub) -> nlcli::Run {
                      auto o = std::make_shared<Options>();
                      sub.add_option("--model,-m", o->model, "GGUF file, or a folder with tokenizer.json")->required();
                      sub.add_flag("--bos", o->bos, "Prepend the BOS token (when the tokenizer has one)");
                      sub.add_flag("--escaped", o->escaped,
                                   "Lines use \\n, \\t and \\\\ for newline, tab and backslash (also in --decode output)");
                      sub.add_flag("--no-special", o->no_special, "Encode special tokens' text as plain text");
                      sub.add_flag("--decode", o->decode, "Read lines of ids and print the decoded text");
                      sub.add_flag("--skip-special", o->skip_special, "With --decode: leave out special tokens");
                      return [o] { return run_tokenize(*o); };
                    });

}  // namespace
