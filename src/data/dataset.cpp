#include "nightlora/data/dataset.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
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

namespace {

const char* kFormatHint =
    "each line must be one of {\"text\": ...}, {\"prompt\": ..., \"completion\": ...} or "
    "{\"messages\": [{\"role\": ..., \"content\": ...}, ...]}";

// Length of the common prefix of two token sequences. Used to find where a span of text
// starts in the tokens of the whole text: tokenizing text[0:k] and the whole text agree on
// every token that lies entirely before k, so the first disagreement is the first token
// that (partly) belongs to the span.
size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t n = std::min(a.size(), b.size()), i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

struct Parser {
  std::string source;
  const Tokenizer& tok;
  const DataOptions& opt;
  std::optional<DataFormat> format;
  int64_t first_line = 0;
  std::optional<ChatFormat> chat;

  std::string where(int64_t line) const { return source + ":" + std::to_string(line); }

  std::string get_string(const json& obj, const char* key, int64_t line) const {
    const json& v = obj.at(key);
    if (!v.is_string())
      fail(where(line), std::string("\"") + key + "\" must be a string, found " + v.type_name());
    return v.get<std::string>();
  }

  DataFormat detect(const json& obj, int64_t line) const {
    std::set<std::string> keys;
    for (auto it = obj.begin(); it != obj.end(); ++it) keys.insert(it.key());
    DataFormat f;
    std::set<std::string> allowed;
    if (keys.count("messages")) {
      f = DataFormat::Messages;
      allowed = {"messages"};
    } else if (keys.count("prompt") || keys.count("completion")) {
      f = DataFormat::PromptCompletion;
      allowed = {"prompt", "completion"};
      for (const char* k : {"prompt", "completion"})
        if (!keys.count(k)) fail(where(line), std::string("missing \"") + k + "\" in a prompt/completion line", kFormatHint);
    } else if (keys.count("text")) {
      f = DataFormat::Text;
      allowed = {"text"};
    } else {
      std::string found;
      for (const auto& k : keys) found += (found.empty() ? "" : ", ") + ("\"" + k + "\"");
      fail(where(line), "no known key (found " + (found.empty() ? std::string("an empty object") : found) + ")",
           kFormatHint);
    }
    for (const auto& k : keys)
      if (!allowed.count(k))
        fail(where(line), "unknown key \"" + k + "\" in a " + data_format_name(f) + " line",
             "remove it; a line holds exactly the keys of one format: " + std::string(kFormatHint));
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

  // Tokenizes `text` and marks as supervised every token from the one containing char
  // `supervised_from` on (before any TrainOn::All override).
  Example tokenize_from(const std::string& text, size_t supervised_from) const {
    bool bos = want_bos(text);
    Example e;
    e.tokens = tok.encode(text, bos, true);
    size_t start = 0;
    if (supervised_from > 0) start = common_prefix(tok.encode(text.substr(0, supervised_from), bos, true), e.tokens);
    e.supervised.assign(e.tokens.size(), 0);
    for (size_t t = start; t < e.tokens.size(); ++t) e.supervised[t] = 1;
    return e;
  }

  Example from_messages(const json& msgs, int64_t line) {
    if (!msgs.is_array() || msgs.empty())
      fail(where(line), "\"messages\" must be a non-empty array of {\"role\", \"content\"} objects");
    std::vector<ChatMessage> conv;
    for (size_t i = 0; i < msgs.size(); ++i) {
      const json& m = msgs[i];
      std::string at = "messages[" + std::to_string(i) + "]";
      if (!m.is_object()) fail(where(line), at + " must be an object with \"role\" and \"content\"");
      for (auto it = m.begin(); it != m.end(); ++it)
        if (it.key() != "role" && it.key() != "content")
          fail(where(line), "unknown key \"" + it.key() + "\" in " + at, "a message has only \"role\" and \"content\"");
      if (!m.contains("role") || !m.contains("content"))
        fail(where(line), at + " needs both \"role\" and \"content\"");
      std::string role = get_string(m, "role", line), content = get_string(m, "content", line);
      if (role != "system" && role != "user" && role != "assistant")
        fail(where(line), at + " has unknown role \"" + role + "\"", "use system, user or assistant");
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
    bool bos = want_bos(text);
    Example e;
    e.tokens = tok.encode(text, bos, true);
    e.supervised.assign(e.tokens.size(), 0);
    for (auto [b, end] : spans) {
      size_t t0 = common_prefix(tok.encode(text.substr(0, b), bos, true), e.tokens);
      size_t t1 = e.tokens.size();
      if (end < text.size()) {
        std::vector<int32_t> upto = tok.encode(text.substr(0, end), bos, true);
        t1 = common_prefix(upto, e.tokens);
        // A token straddling the span's end also holds trainable text: keep it supervised.
        if (t1 < upto.size()) t1 = std::min(e.tokens.size(), t1 + 1);
      }
      for (size_t t = t0; t < t1; ++t) e.supervised[t] = 1;
    }
    return e;
  }

  Example parse_line(std::string_view raw, int64_t line) {
    json obj;
    try {
      obj = json::parse(raw);
    } catch (const json::parse_error& ex) {
      std::string what = ex.what();
      // nlohmann's message starts with "[json.exception.parse_error.101] parse error at ...".
      auto pos = what.find("] ");
      fail(where(line), "malformed JSON: " + (pos == std::string::npos ? what : what.substr(pos + 2)),
           "each line must be one complete JSON object");
    } catch (const json::out_of_range& ex) {
      // The parser refuses a number beyond a double's range (e.g. 1e400) with
      // "[json.exception.out_of_range.406] number overflow parsing '1e400'".
      std::string what = ex.what();
      auto pos = what.find("] ");
      fail(where(line), "a number too large for a double: " + (pos == std::string::npos ? what : what.substr(pos + 2)),
           "numbers must lie within about +-1.8e308; data lines hold strings, so quote it if it is text");
    }
    if (!obj.is_object()) fail(where(line), std::string("expected a JSON object, found ") + obj.type_name(), kFormatHint);
    DataFormat f = detect(obj, line);
    if (!format) {
      format = f;
      first_line = line;
    } else if (*format != f) {
      fail(where(line), std::string("this line is ") + data_format_name(f) + " but line " + std::to_string(first_line) +
                            " is " + data_format_name(*format),
           "a data file uses one format throughout");
    }
    Example e;
    switch (f) {
      case DataFormat::Text: {
        e = tokenize_from(get_string(obj, "text", line), 0);
        append_eos(e);
        break;
      }
      case DataFormat::PromptCompletion: {
        std::string prompt = get_string(obj, "prompt", line), completion = get_string(obj, "completion", line);
        e = tokenize_from(prompt + completion, prompt.size());
        append_eos(e);
        break;
      }
      case DataFormat::Messages: e = from_messages(obj.at("messages"), line); break;
    }
    if (opt.train_on == TrainOn::All) std::fill(e.supervised.begin(), e.supervised.end(), 1);
    if (!e.supervised.empty()) e.supervised[0] = 0;  // nothing predicts the first token
    e.line = line;
    return e;
  }
};

}  // namespace

Dataset parse_jsonl_dataset(std::string_view text, const std::string& source, const Tokenizer& tok,
                            const DataOptions& opt) {
  if (opt.max_tokens < 2) fail("--seq-len", "must be at least 2, got " + std::to_string(opt.max_tokens));
  Parser p{source, tok, opt, std::nullopt, 0, std::nullopt};
  Dataset ds;
  ds.source = source;
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
    Example e = p.parse_line(raw, line);
    if (static_cast<int64_t>(e.tokens.size()) > opt.max_tokens) {
      ds.n_truncated++;
      ds.n_dropped_tokens += static_cast<int64_t>(e.tokens.size()) - opt.max_tokens;
      e.tokens.resize(static_cast<size_t>(opt.max_tokens));
      e.supervised.resize(static_cast<size_t>(opt.max_tokens));
    }
    if (e.n_supervised() == 0)
      fail(p.where(line), "this example has no token to train on",
           opt.train_on == TrainOn::All
               ? "it is too short: give it at least two tokens of text"
               : "its completion / assistant part is empty or was cut off by the sequence-length cap; "
                 "fix the line, raise --seq-len, or use --train-on all");
    ds.examples.push_back(std::move(e));
  }
  if (ds.examples.empty())
    fail(source, "the data set is empty (no non-blank lines)", std::string("add examples: ") + kFormatHint);
  ds.format = *p.format;
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
