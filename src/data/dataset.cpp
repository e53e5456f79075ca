#include "nightlora/data/dataset.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <functional>
#include <sstream>

#include "nightlora/tokenizer/tokenizer.h"
#include "nightlora/util/error.h"

namespace nl {

using json = nlohmann::json;

TrainOn parse_train_on(const std::string& s) {
  if (s == "completion") return TrainOn::Completion;
  if (s == "all") return TrainOn::All;
  fail("--train-on", "unknown value '" + s + "'", "use 'completion' (loss on completions/assistant turns) or 'all'");
}

LongExamples parse_long_examples(const std::string& s) {
  if (s == "truncate") return LongExamples::Truncate;
  if (s == "skip") return LongExamples::Skip;
  if (s == "error") return LongExamples::Error;
  fail("--long-examples", "unknown value '" + s + "'", "use truncate (keep the first --seq-len tokens), skip or error");
}

BadLines parse_bad_lines(const std::string& s) {
  if (s == "skip") return BadLines::Skip;
  if (s == "error") return BadLines::Error;
  fail("--bad-lines", "unknown value '" + s + "'", "use skip (leave bad lines out and count them) or error");
}

const char* data_format_name(DataFormat f) {
  switch (f) {
    case DataFormat::Text: return "text";
    case DataFormat::PromptCompletion: return "prompt/completion";
    case DataFormat::Messages: return "messages";
  }
  return "?";
}

int64_t Example::n_supervised() const {
  int64_t n = 0;
  for (uint8_t s : supervised) n += s != 0;
  return n;
}

int64_t Dataset::n_tokens() const {
  int64_t n = 0;
  for (const auto& e : examples) n += static_cast<int64_t>(e.tokens.size());
  return n;
}

int64_t Dataset::n_supervised() const {
  int64_t n = 0;
  for (const auto& e : examples) n += e.n_supervised();
  return n;
}

int64_t Dataset::n_skipped() const {
  int64_t n = 0;
  for (const auto& s : skipped) n += s.count;
  return n;
}

std::string Dataset::describe_skipped() const {
  std::string out;
  const char* unit = json_array ? "element" : "line";
  for (const SkippedLines& s : skipped) {
    out += (out.empty() ? "" : "; ") + std::to_string(s.count) + " " + unit + (s.count == 1 ? "" : "s") + " " +
           s.reason + " (" + unit + (s.first_lines.size() == 1 ? " " : "s ");
    for (size_t i = 0; i < s.first_lines.size(); ++i) out += (i ? ", " : "") + std::to_string(s.first_lines[i]);
    out += static_cast<size_t>(s.count) > s.first_lines.size() ? ", ...)" : ")";
  }
  return out;
}

std::string Dataset::describe_ignored_keys() const {
  std::string out;
  for (const auto& [key, n] : ignored_keys)
    out += (out.empty() ? "" : ", ") + ("\"" + key + "\" (" + std::to_string(n) + (n == 1 ? " line)" : " lines)"));
  return out;
}

namespace {

const char* kFormatHint =
    "each line must be one of {\"text\": ...}, {\"prompt\": ..., \"completion\": ...} or "
    "{\"messages\": [{\"role\": ..., \"content\": ...}, ...]}";

// A line that cannot become an example. `reason` groups lines in the count of skipped lines
// ("malformed JSON"); `detail` and `hint` make the error of BadLines::Error.
struct BadLine {
  std::string reason, detail, hint;
};
[[noreturn]] void bad_line(std::string reason, std::string detail, std::string hint = "") {
  throw BadLine{std::move(reason), std::move(detail), std::move(hint)};
}

// nlohmann's messages start with "[json.exception.parse_error.101] ": keep what follows.
std::string json_message(const std::exception& ex) {
  std::string what = ex.what();
  auto pos = what.find("] ");
  return pos == std::string::npos ? what : what.substr(pos + 2);
}

// Length of the common prefix of two token sequences. Used to find where a span of text
// starts in the tokens of the whole text: tokenizing text[0:k] and the whole text agree on
// every token that lies entirely before k, so the first disagreement is the first token
// that (partly) belongs to the span.
size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t n = std::min(a.size(), b.size()), i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

// An example as tokenized; `cut`: its text was longer than any max_tokens tokens can cover,
// so it was cut before tokenizing and is over-long for sure.
struct Tokenized {
  Example e;
  bool cut = false;
};

struct Parser {
  std::string source;
  const Tokenizer& tok;
  const DataOptions& opt;
  std::optional<DataFormat> format{};
  bool mixed = false;
  std::optional<ChatFormat> chat{};
  std::vector<std::pair<std::string, int64_t>> ignored_keys{};
  size_t cap_bytes = 0;  // see cut(); 0 until first needed

  std::string where(int64_t line) const { return source + ":" + std::to_string(line); }

  void ignore_key(const std::string& key) {
    for (auto& [k, n] : ignored_keys)
      if (k == key) {
        ++n;
        return;
      }
    ignored_keys.emplace_back(key, 1);
  }

  std::string get_string(const json& obj, const char* key) const {
    const json& v = obj.at(key);
    if (!v.is_string())
      bad_line("with a value of the wrong type", std::string("\"") + key + "\" must be a string, found " + v.type_name());
    return v.get<std::string>();
  }

  DataFormat detect(const json& obj) {
    const bool msgs = obj.contains("messages"), pc = obj.contains("prompt") || obj.contains("completion"),
               text = obj.contains("text");
    if (msgs + pc + text > 1)
      bad_line("with the keys of two formats", "this line has keys of more than one format",
               std::string("keep one: ") + kFormatHint);
    DataFormat f;
    if (msgs) f = DataFormat::Messages;
    else if (pc) f = DataFormat::PromptCompletion;
    else if (text) f = DataFormat::Text;
    else {
      std::string found;
      for (auto it = obj.begin(); it != obj.end(); ++it) found += (found.empty() ? "" : ", ") + ("\"" + it.key() + "\"");
      bad_line("with no known key",
               "no known key (found " + (found.empty() ? std::string("an empty object") : found) + ")", kFormatHint);
    }
    if (f == DataFormat::PromptCompletion)
      for (const char* k : {"prompt", "completion"})
        if (!obj.contains(k))
          bad_line("with a missing key", std::string("missing \"") + k + "\" in a prompt/completion line", kFormatHint);
    for (auto it = obj.begin(); it != obj.end(); ++it)
      if (it.key() != "messages" && it.key() != "prompt" && it.key() != "completion" && it.key() != "text")
        ignore_key(it.key());
    return f;
  }

  bool want_bos(const std::string& text) const {
    if (!tok.add_bos_default() || tok.bos() < 0) return false;
    // Chat templates such as Llama 3's write the BOS marker themselves.
    std::string bos_text = tok.token_text(tok.bos());
    return bos_text.empty() || text.compare(0, bos_text.size(), bos_text) != 0;
  }

  void append_eos(Example& e) const {
    if (tok.eos() < 0) return;
    if (!e.tokens.empty() && e.tokens.back() == tok.eos()) {
      e.supervised.back() = 1;
      return;
    }
    e.tokens.push_back(tok.eos());
    e.supervised.push_back(1);
  }

  // Text beyond cap_bytes cannot be among the first max_tokens tokens: no token covers more
  // input bytes than 4 times its vocabulary entry's length (the entry spells its bytes, escaped
  // at most 4:1 by byte-level and SentencePiece vocabularies, and normalization never shrinks
  // text more than that). Cuts `text` there (on a UTF-8 boundary); true when it did.
  bool cut(std::string& text) {
    if (cap_bytes == 0) {
      size_t longest = 1;
      for (int32_t id = 0; id < tok.vocab_size(); ++id) longest = std::max(longest, tok.token_text(id).size());
      cap_bytes = static_cast<size_t>(opt.max_tokens) * longest * 4 + 4096;
    }
    if (text.size() <= cap_bytes) return false;
    size_t n = cap_bytes;
    while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;
    text.resize(n);
    return true;
  }

  // Tokenizes `text` and marks as supervised every token from the one containing char
  // `supervised_from` on (before any TrainOn::All override).
  Tokenized tokenize_from(std::string text, size_t supervised_from) {
    Tokenized t;
    t.cut = cut(text);
    bool bos = want_bos(text);
    Example& e = t.e;
    e.tokens = tok.encode(text, bos, true);
    e.supervised.assign(e.tokens.size(), 0);
    if (t.cut && supervised_from >= text.size()) return t;  // the supervised part was cut off
    size_t start = 0;
    if (supervised_from > 0) start = common_prefix(tok.encode(text.substr(0, supervised_from), bos, true), e.tokens);
    for (size_t i = start; i < e.tokens.size(); ++i) e.supervised[i] = 1;
    if (!t.cut) append_eos(e);
    return t;
  }

  Tokenized from_messages(const json& msgs, int64_t line) {
    if (!msgs.is_array() || msgs.empty())
      bad_line("with a bad \"messages\" value", "\"messages\" must be a non-empty array of {\"role\", \"content\"} objects");
    std::vector<ChatMessage> conv;
    for (size_t i = 0; i < msgs.size(); ++i) {
      const json& m = msgs[i];
      std::string at = "messages[" + std::to_string(i) + "]";
      if (!m.is_object()) bad_line("with a bad \"messages\" value", at + " must be an object with \"role\" and \"content\"");
      if (!m.contains("role") || !m.contains("content"))
        bad_line("with a bad \"messages\" value", at + " needs both \"role\" and \"content\"");
      for (auto it = m.begin(); it != m.end(); ++it)
        if (it.key() != "role" && it.key() != "content") ignore_key("messages[]." + it.key());
      std::string role = get_string(m, "role"), content = get_string(m, "content");
      if (role != "system" && role != "user" && role != "assistant")
        bad_line("with a message of unknown role", at + " has unknown role \"" + role + "\"",
                 "use system, user or assistant");
      conv.push_back({role, content});
    }
    if (!chat) {
      if (opt.chat_format) chat = opt.chat_format;
      else if (tok.chat_template().empty())
        fail(where(line), "\"messages\" data needs a chat template, but the model has none",
             "use {\"text\"} or {\"prompt\", \"completion\"} lines for this model");
      else chat = detect_chat_format(tok.chat_template(), source);
    }
    std::vector<ChatPiece> pieces = render_chat(*chat, conv, false);
    std::string text;
    std::vector<std::pair<size_t, size_t>> spans;  // char ranges of trainable pieces
    for (const auto& p : pieces) {
      if (p.trainable && !p.text.empty()) {
        if (!spans.empty() && spans.back().second == text.size()) spans.back().second += p.text.size();
        else spans.emplace_back(text.size(), text.size() + p.text.size());
      }
      text += p.text;
    }
    Tokenized t;
    t.cut = cut(text);
    bool bos = want_bos(text);
    Example& e = t.e;
    e.tokens = tok.encode(text, bos, true);
    e.supervised.assign(e.tokens.size(), 0);
    for (auto [b, end] : spans) {
      if (b >= text.size()) break;  // cut off
      size_t t0 = common_prefix(tok.encode(text.substr(0, b), bos, true), e.tokens);
      size_t t1 = e.tokens.size();
      if (end < text.size()) {
        std::vector<int32_t> upto = tok.encode(text.substr(0, end), bos, true);
        t1 = common_prefix(upto, e.tokens);
        // A token straddling the span's end also holds trainable text: keep it supervised.
        if (t1 < upto.size()) t1 = std::min(e.tokens.size(), t1 + 1);
      }
      for (size_t i = t0; i < t1; ++i) e.supervised[i] = 1;
    }
    return t;
  }

  Tokenized parse_line(std::string_view raw, int64_t line) {
    json obj;
    try {
      obj = json::parse(raw);
    } catch (const json::parse_error& ex) {
      bad_line("of malformed JSON", "malformed JSON: " + json_message(ex), "each line must be one complete JSON object");
    } catch (const json::out_of_range& ex) {
      // The parser refuses a number beyond a double's range (e.g. 1e400) with out_of_range.406.
      bad_line("with a number too large for a double", "a number too large for a double: " + json_message(ex),
               "numbers must lie within about +-1.8e308; data lines hold strings, so quote it if it is text");
    }
    return from_object(obj, line);
  }

  Tokenized from_object(const json& obj, int64_t line) {
    if (!obj.is_object())
      bad_line("that are not a JSON object", std::string("expected a JSON object, found ") + obj.type_name(), kFormatHint);
    DataFormat f = detect(obj);
    if (!format) format = f;
    else if (*format != f) mixed = true;
    Tokenized t;
    switch (f) {
      case DataFormat::Text: t = tokenize_from(get_string(obj, "text"), 0); break;
      case DataFormat::PromptCompletion: {
        std::string prompt = get_string(obj, "prompt"), completion = get_string(obj, "completion");
        t = tokenize_from(prompt + completion, prompt.size());
        break;
      }
      case DataFormat::Messages: t = from_messages(obj.at("messages"), line); break;
    }
    Example& e = t.e;
    if (opt.train_on == TrainOn::All) std::fill(e.supervised.begin(), e.supervised.end(), 1);
    if (!e.supervised.empty()) e.supervised[0] = 0;  // nothing predicts the first token
    e.line = line;
    return t;
  }
};

// Counts a left-out line under its reason.
void count_skipped(Dataset& ds, const std::string& reason, int64_t line) {
  for (SkippedLines& s : ds.skipped)
    if (s.reason == reason) {
      if (s.first_lines.size() < SkippedLines::kFirstLines) s.first_lines.push_back(line);
      ++s.count;
      return;
    }
  ds.skipped.push_back({reason, 1, {line}});
}

}  // namespace

Dataset parse_jsonl_dataset(std::string_view text, const std::string& source, const Tokenizer& tok,
                            const DataOptions& opt) {
  if (opt.max_tokens < 2) fail("--seq-len", "must be at least 2, got " + std::to_string(opt.max_tokens));
  Parser p{source, tok, opt};
  Dataset ds;
  ds.source = source;
  if (text.substr(0, 3) == "\xEF\xBB\xBF") {
    ds.byte_order_mark = true;
    text.remove_prefix(3);
  }
  const size_t first_char = text.find_first_not_of(" \t\r\n");
  ds.json_array = first_char != std::string_view::npos && text[first_char] == '[';

  // Turns one line (or array element) into an example or a counted skip.
  auto take = [&](int64_t line, const std::function<Tokenized()>& parse) {
    const bool errors = opt.bad_lines == BadLines::Error;
    try {
      Tokenized t = parse();
      Example& e = t.e;
      const bool over = t.cut || static_cast<int64_t>(e.tokens.size()) > opt.max_tokens;
      if (over && opt.long_examples == LongExamples::Error)
        fail(p.where(line), "this example is longer than --seq-len " + std::to_string(opt.max_tokens) + " tokens",
             "raise --seq-len, shorten it, or use --long-examples truncate|skip");
      if (over && opt.long_examples == LongExamples::Skip)
        bad_line("longer than --seq-len (--long-examples skip)", "longer than --seq-len");
      if (over) {
        ds.n_truncated++;
        if (static_cast<int64_t>(e.tokens.size()) > opt.max_tokens) {
          ds.n_dropped_tokens += static_cast<int64_t>(e.tokens.size()) - opt.max_tokens;
          e.tokens.resize(static_cast<size_t>(opt.max_tokens));
          e.supervised.resize(static_cast<size_t>(opt.max_tokens));
        }
      }
      if (e.n_supervised() == 0) {
        if (opt.train_on == TrainOn::All)
          bad_line("too short to train on", "this example has no token to train on",
                   "it is too short: give it at least two tokens of text");
        if (over)
          bad_line("with no token to train on within --seq-len",
                   "this example has no token to train on within --seq-len " + std::to_string(opt.max_tokens),
                   "its prompt fills the sequence-length cap: raise --seq-len or shorten the prompt");
        bad_line("with no token to train on", "this example has no token to train on",
                 "its completion / assistant part is empty: fix the line, or use --train-on all");
      }
      ds.examples.push_back(std::move(e));
    } catch (const BadLine& b) {
      if (errors) fail(p.where(line), b.detail, b.hint);
      count_skipped(ds, b.reason, line);
    }
  };

  if (ds.json_array) {
    json all;
    try {
      all = json::parse(text);
    } catch (const std::exception& ex) {
      fail(source, "the file starts with '[' but is not one valid JSON array: " + json_message(ex),
           "give JSONL (one JSON object per line) or one JSON array of such objects");
    }
    if (!all.is_array()) fail(source, "the file starts with '[' but is not one JSON array");
    for (size_t i = 0; i < all.size(); ++i)
      take(static_cast<int64_t>(i) + 1, [&] { return p.from_object(all[i], static_cast<int64_t>(i) + 1); });
  } else {
    int64_t line = 0;
    size_t pos = 0;
    while (pos < text.size()) {
      size_t nl = text.find('\n', pos);
      if (nl == std::string_view::npos) nl = text.size();
      std::string_view raw = text.substr(pos, nl - pos);
      pos = nl + 1;
      ++line;
      if (!raw.empty() && raw.back() == '\r') raw.remove_suffix(1);
      if (raw.find_first_not_of(" \t") == std::string_view::npos) continue;
      take(line, [&] { return p.parse_line(raw, line); });
    }
  }
  ds.ignored_keys = std::move(p.ignored_keys);
  if (ds.examples.empty()) {
    if (ds.skipped.empty())
      fail(source, "the data set is empty (no non-blank lines)", std::string("add examples: ") + kFormatHint);
    fail(source, "nothing left to train on: " + ds.describe_skipped(),
         "fix those lines (--bad-lines error stops at the first one and says what is wrong)");
  }
  ds.format = *p.format;
  ds.mixed_formats = p.mixed;
  return ds;
}

Dataset load_jsonl_dataset(const std::string& path, const Tokenizer& tok, const DataOptions& opt) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(path, "cannot open the data file", "check the path");
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_jsonl_dataset(ss.str(), path, tok, opt);
}

}  // namespace nl
