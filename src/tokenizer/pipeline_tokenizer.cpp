// The one Tokenizer implementation: a pipeline in the order Hugging Face tokenizers runs it.
//   1. split out added tokens matched in the raw text (special tokens, unless parse_special
//      is off), absorbing whitespace where a token says lstrip/rstrip;
//   2. normalize each remaining piece (NFC; or SentencePiece's "prepend ▁, spaces -> ▁"),
//      then split out added tokens that are matched in normalized text (by their own
//      normalized content: "▁<unk>" for <unk> under "prepend ▁");
//   3. pre-tokenize (byte-level: the split regex, then bytes -> visible characters;
//      SentencePiece-style: the whole piece is one word);
//   4. BPE-merge each word; characters missing from the vocabulary become <0xXX> byte
//      tokens (byte fallback) or <unk>.
#include <algorithm>
#include <array>
#include <cstdio>
#include <unordered_map>

#include "nightlora/modelio/gguf.h"
#include "nightlora/util/error.h"
#include "tokenizer/added_token_matcher.h"
#include "tokenizer/bpe_merger.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/flat_string_table.h"
#include "tokenizer/split_regex.h"
#include "tokenizer/tokenizer_spec.h"
#include "tokenizer/unicode_text.h"

namespace nl {
namespace {

const std::string kSpace = "\xE2\x96\x81";  // U+2581 "▁", SentencePiece's visible space

bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char b = (unsigned char)s[i];
    if (b < 0x80) { ++i; continue; }
    const size_t n = unicode::utf8_len(b);
    if (n == 1 || i + n > s.size()) return false;
    std::string_view seq = s.substr(i, n);
    std::vector<char32_t> cps = unicode::decode_utf8(seq);
    if (cps.size() != 1 || cps[0] == 0xFFFD) {
      if (!(cps.size() == 1 && seq == "\xEF\xBF\xBD")) return false;  // a real U+FFFD is fine
    }
    i += n;
  }
  return true;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  if (from.empty()) return s;
  std::string out;
  size_t pos = 0;
  for (size_t hit; (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size()) {
    out.append(s, pos, hit - pos);
    out += to;
  }
  out.append(s, pos, std::string::npos);
  return out;
}

// Length in bytes of the run of White_Space characters ending at `end` / starting at `begin`.
size_t trailing_ws(std::string_view s) {
  size_t n = s.size();
  while (n > 0) {
    size_t start = n - 1;
    while (start > 0 && ((unsigned char)s[start] & 0xC0) == 0x80) --start;
    auto cps = unicode::decode_utf8(s.substr(start, n - start));
    if (cps.size() != 1 || !unicode::is_white_space(cps[0])) break;
    n = start;
  }
  return s.size() - n;
}
size_t leading_ws(std::string_view s) {
  size_t n = 0;
  while (n < s.size()) {
    size_t len = std::min(unicode::utf8_len((unsigned char)s[n]), s.size() - n);
    auto cps = unicode::decode_utf8(s.substr(n, len));
    if (cps.size() != 1 || !unicode::is_white_space(cps[0])) break;
    n += len;
  }
  return n;
}

// The byte a "<0xXX>" token stands for, or -1 when the text is not of that form.
int byte_token_value(const std::string& t) {
  auto hex = [](char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; };
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>' || hex(t[3]) < 0 || hex(t[4]) < 0) return -1;
  return hex(t[3]) * 16 + hex(t[4]);
}

// A piece of input: plain text, or an added token.
struct Segment {
  std::string_view text;
  const AddedToken* token = nullptr;
};

class PipelineTokenizer final : public Tokenizer {
 public:
  explicit PipelineTokenizer(TokenizerSpec spec) : s_(std::move(spec)) {
    bos_ = s_.bos;
    eos_ = s_.eos;
    eog_ = s_.eog;
    add_bos_ = s_.add_bos;
    chat_template_ = s_.chat_template;
    vocab_ = FlatStringTable(s_.tokens.size());
    for (size_t i = 0; i < s_.tokens.size(); ++i)
      if (!s_.tokens[i].empty()) vocab_.insert(s_.tokens[i], int32_t(i));  // a repeated text keeps its first id
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      byte_ids_[size_t(b)] = id_of(name);
    }
    // Tokens marked "normalized" are found in the normalized text by their normalized
    // content, as Hugging Face tokenizers does (added_token_matcher.h).
    std::vector<AddedTokenMatcher::Pattern> raw, normalized;
    for (const AddedToken& t : s_.added) {
      if (t.content.empty()) continue;
      if (t.normalized) {
        normalized.push_back({normalize(t.content), &t});
        normalized_added_text_[t.id] = normalized.back().text;
      } else {
        raw.push_back({t.content, &t});
      }
      added_by_id_[t.id] = &t;
    }
    raw_added_ = std::make_unique<AddedTokenMatcher>(raw);
    normalized_added_ = std::make_unique<AddedTokenMatcher>(normalized);
    if (s_.kind == TokenizerKind::ByteLevelBpe) regex_ = std::make_unique<SplitRegex>(s_.pre_regex, s_.source);
    merger_ = std::make_unique<BpeMerger>(s_.merges, s_.tokens, s_.scores);
  }

  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special) const override {
    std::string cleaned;
    if (!valid_utf8(text)) {  // HF tokenizers only take valid strings; invalid bytes become U+FFFD
      cleaned = unicode::encode_utf8(unicode::decode_utf8(text));
      text = cleaned;
    }
    std::vector<int32_t> out;
    if (add_bos && bos_ >= 0) out.push_back(bos_);
    for (const Segment& seg : split_added(text, *raw_added_, parse_special)) {
      if (seg.token) { out.push_back(seg.token->id); continue; }
      if (seg.text.empty()) continue;
      const std::string normalized = normalize(seg.text);
      for (const Segment& inner : split_added(normalized, *normalized_added_, parse_special)) {
        if (inner.token) out.push_back(inner.token->id);
        else if (!inner.text.empty()) encode_piece(inner.text, out);
      }
    }
    return out;
  }

  std::string decode(const std::vector<int32_t>& ids, bool skip_special) const override {
    std::string out;
    for (int32_t id : ids) {
      if (id < 0 || size_t(id) >= s_.tokens.size())
        fail(s_.source, "cannot decode token id " + std::to_string(id) + ": the vocabulary has " +
                            std::to_string(s_.tokens.size()) + " tokens",
             "ids must be in [0, " + std::to_string(s_.tokens.size()) + ")");
      if (skip_special && is_special(id)) continue;
      auto added = added_by_id_.find(id);
      // An added token is its content, except one marked "normalized" in a SentencePiece-style
      // tokenizer: it stands for its normalized form ("▁<unk>", the space it took when
      // encoding), which goes through the decoder like any token, as in Hugging Face
      // tokenizers ("he <unk>" from "▁", "he", <unk>).
      if (added != added_by_id_.end() && !(added->second->normalized && s_.kind != TokenizerKind::ByteLevelBpe)) {
        out += added->second->content;
        continue;
      }
      const std::string& t = added != added_by_id_.end() ? normalized_added_text_.at(id) : s_.tokens[size_t(id)];
      if (s_.kind == TokenizerKind::ByteLevelBpe) {
        out += byte_level::decode(t);
      } else if (int byte = byte_token_value(t); s_.types[size_t(id)] == kTokByte && byte >= 0) {
        out += char(byte);
      } else {
        out += replace_all(t, kSpace, " ");
      }
    }
    if (s_.strip_leading_space && !out.empty() && out[0] == ' ') out.erase(0, 1);
    return out;
  }

  TokenizerKind kind() const override { return s_.kind; }
  std::string describe() const override {
    if (s_.kind == TokenizerKind::ByteLevelBpe) return "gpt2/" + s_.pre_name + " (byte-level BPE)";
    return std::string("llama (SentencePiece-style BPE") + (s_.merges.empty() ? ", merges by score" : ", merges") +
           (byte_fallback_usable() ? ", byte fallback)" : ")");
  }
  int32_t vocab_size() const override { return int32_t(s_.tokens.size()); }
  std::string token_text(int32_t id) const override {
    return (id >= 0 && size_t(id) < s_.tokens.size()) ? s_.tokens[size_t(id)] : std::string();
  }
  int32_t token_id(const std::string& text) const override { return id_of(text); }
  bool is_special(int32_t id) const override {
    if (id < 0 || size_t(id) >= s_.types.size()) return false;
    return s_.types[size_t(id)] == kTokControl || s_.types[size_t(id)] == kTokUnknown;
  }

  void write_gguf(GgufWriter& w) const override;

 private:
  int32_t id_of(std::string_view text) const {
    int32_t id = -1;
    return vocab_.find(text, id) ? id : -1;
  }

  bool byte_fallback_usable() const {
    return s_.byte_fallback && std::all_of(byte_ids_.begin(), byte_ids_.end(), [](int32_t i) { return i >= 0; });
  }

  // Finds added tokens (longest match at the earliest position) and applies lstrip/rstrip.
  std::vector<Segment> split_added(std::string_view text, const AddedTokenMatcher& tokens, bool parse_special) const {
    std::vector<Segment> segs;
    size_t gap = 0;
    for (size_t i = 0; i < text.size();) {
      const AddedTokenMatcher::Match hit = tokens.match(text.substr(i), parse_special);
      if (!hit.token) { ++i; continue; }
      std::string_view before = text.substr(gap, i - gap);
      if (hit.token->lstrip) before.remove_suffix(trailing_ws(before));
      segs.push_back({before, nullptr});
      segs.push_back({hit.token->content, hit.token});
      i += hit.length;
      if (hit.token->rstrip) i += leading_ws(text.substr(i));
      gap = i;
    }
    segs.push_back({text.substr(gap), nullptr});
    return segs;
  }

  std::string normalize(std::string_view text) const {
    std::string s(text);
    for (const NormalizerStep& step : s_.normalizer) {
      switch (step.kind) {
        case NormalizerStep::Nfc: s = unicode::nfc(s); break;
        case NormalizerStep::Prepend: if (!s.empty()) s = step.a + s; break;
        case NormalizerStep::Replace: s = replace_all(std::move(s), step.a, step.b); break;
      }
    }
    return s;
  }

  void encode_piece(std::string_view text, std::vector<int32_t>& out) const {
    if (s_.kind == TokenizerKind::ByteLevelBpe) {
      for (std::string_view word : regex_->split(text)) encode_word(byte_level::encode(word), out);
    } else {
      encode_word(text, out);
    }
  }

  void encode_word(std::string_view word, std::vector<int32_t>& out) const {
    if (s_.ignore_merges) {
      if (int32_t id = id_of(word); id >= 0) { out.push_back(id); return; }
    }
    bool prev_unk = false;
    for (std::string_view sym : merger_->merge(word)) {
      if (int32_t id = id_of(sym); id >= 0) { out.push_back(id); prev_unk = false; continue; }
      if (s_.byte_fallback) {
        bool all = true;
        for (unsigned char b : sym) all = all && byte_ids_[b] >= 0;
        if (all) {
          for (unsigned char b : sym) out.push_back(byte_ids_[b]);
          prev_unk = false;
          continue;
        }
      }
      if (s_.unk < 0)
        fail(s_.source, "the text has a character the vocabulary cannot represent and there is no <unk> token",
             "this tokenizer cannot encode this text");
      if (!(s_.fuse_unk && prev_unk)) out.push_back(s_.unk);
      prev_unk = true;
    }
  }

  TokenizerSpec s_;
  FlatStringTable vocab_;  // text -> id (a flat table: encoding looks up every symbol)
  std::array<int32_t, 256> byte_ids_{};
  std::unique_ptr<AddedTokenMatcher> raw_added_, normalized_added_;  // point into s_.added
  std::unordered_map<int32_t, const AddedToken*> added_by_id_;
  std::unordered_map<int32_t, std::string> normalized_added_text_;  // id -> normalized content
  std::unique_ptr<SplitRegex> regex_;
  std::unique_ptr<BpeMerger> merger_;
};

void PipelineTokenizer::write_gguf(GgufWriter& w) const {
  const bool bl = s_.kind == TokenizerKind::ByteLevelBpe;
  // Only write what a reader can reproduce exactly; anything else is an error, not a guess.
  bool nfc = false, prepend = false, escape = false;
  for (const NormalizerStep& st : s_.normalizer) {
    if (st.kind == NormalizerStep::Nfc) nfc = true;
    else if (st.kind == NormalizerStep::Prepend && st.a == kSpace) prepend = true;
    else if (st.kind == NormalizerStep::Replace && st.a == " " && st.b == kSpace) escape = true;
    else fail(s_.source, "this tokenizer's normalizer has a step GGUF tokenizer metadata cannot express",
              "only NFC (byte-level) and SentencePiece's prepend/replace of \"▁\" are supported");
  }
  if (bl) {
    const bool known = (s_.pre_name == "qwen2" && s_.pre_regex == kQwen2Regex && nfc && !s_.ignore_merges) ||
                       (s_.pre_name == "llama-bpe" && s_.pre_regex == kLlama3Regex && !nfc && s_.ignore_merges) ||
                       (s_.pre_name == "gpt2" && s_.pre_regex == kGpt2Regex && !nfc && !s_.ignore_merges);
    if (!known)
      fail(s_.source, "this byte-level tokenizer's pre-tokenizer is not one GGUF can name (qwen2, llama-bpe, gpt2)",
           "supported: Qwen2/3 and Llama 3 tokenizers");
  } else if (nfc || !escape) {
    fail(s_.source, "this SentencePiece-style tokenizer's normalizer cannot be written as GGUF metadata");
  }

  w.set("tokenizer.ggml.model", GgufValue::str(bl ? "gpt2" : "llama"));
  if (bl) w.set("tokenizer.ggml.pre", GgufValue::str(s_.pre_name));
  w.set("tokenizer.ggml.tokens", GgufValue::str_array(s_.tokens));
  if (!bl) {
    std::vector<float> scores = s_.scores;
    if (scores.size() != s_.tokens.size()) {
      // Derived from merges: a token made by an earlier merge scores higher, which is what
      // a score-driven SentencePiece merger needs to follow the same order.
      scores.assign(s_.tokens.size(), 0.f);
      std::vector<char> seen(s_.tokens.size(), 0);
      for (size_t r = 0; r < s_.merges.size(); ++r) {
        const int32_t id = id_of(s_.merges[r].first + s_.merges[r].second);
        if (id >= 0 && !seen[size_t(id)]) {
          scores[size_t(id)] = -float(r + 1);
          seen[size_t(id)] = 1;
        }
      }
    }
    w.set("tokenizer.ggml.scores", GgufValue::f32_array(scores));
  }
  w.set("tokenizer.ggml.token_type", GgufValue::i32_array(s_.types));
  if (!s_.merges.empty()) {
    std::vector<std::string> merges;
    merges.reserve(s_.merges.size());
    for (const auto& m : s_.merges) merges.push_back(m.first + " " + m.second);
    w.set("tokenizer.ggml.merges", GgufValue::str_array(std::move(merges)));
  }
  if (s_.bos >= 0) w.set("tokenizer.ggml.bos_token_id", GgufValue::u32(uint32_t(s_.bos)));
  if (s_.eos >= 0) w.set("tokenizer.ggml.eos_token_id", GgufValue::u32(uint32_t(s_.eos)));
  if (s_.eot >= 0) w.set("tokenizer.ggml.eot_token_id", GgufValue::u32(uint32_t(s_.eot)));
  if (s_.unk >= 0) w.set("tokenizer.ggml.unknown_token_id", GgufValue::u32(uint32_t(s_.unk)));
  w.set("tokenizer.ggml.add_bos_token", GgufValue::boolean(s_.add_bos));
  if (!bl) w.set("tokenizer.ggml.add_space_prefix", GgufValue::boolean(prepend));
  if (!s_.chat_template.empty()) w.set("tokenizer.chat_template", GgufValue::str(s_.chat_template));
  // Facts of Hugging Face tokenizers that llama.cpp's keys have no place for (llama.cpp
  // ignores these keys; our reader uses them to reproduce the same encodings).
  std::vector<int32_t> normalized_added;
  for (const AddedToken& t : s_.added)
    if (t.normalized) normalized_added.push_back(t.id);
  if (!normalized_added.empty())
    w.set("tokenizer.nightlora.normalized_added_tokens", GgufValue::i32_array(normalized_added));
  if (s_.fuse_unk) w.set("tokenizer.nightlora.fuse_unk", GgufValue::boolean(true));
  if (!bl && !s_.byte_fallback) w.set("tokenizer.nightlora.byte_fallback", GgufValue::boolean(false));
}

}  // namespace

std::unique_ptr<Tokenizer> make_pipeline_tokenizer(TokenizerSpec spec) {
  if (spec.types.size() != spec.tokens.size()) spec.types.resize(spec.tokens.size(), kTokNormal);
  return std::make_unique<PipelineTokenizer>(std::move(spec));
}

void collect_end_of_generation(TokenizerSpec& spec) {
  auto add = [&](int32_t id) {
    if (id >= 0 && std::find(spec.eog.begin(), spec.eog.end(), id) == spec.eog.end()) spec.eog.push_back(id);
  };
  add(spec.eos);
  add(spec.eot);
  for (const char* name : {"<|eot_id|>", "<|eom_id|>", "<|im_end|>", "<|endoftext|>", "<|end_of_text|>"}) {
    for (size_t i = 0; i < spec.tokens.size(); ++i)
      if (spec.tokens[i] == name && (spec.types[i] == kTokControl)) add(int32_t(i));
  }
}

const char* const kQwen2Regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char* const kLlama3Regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char* const kGpt2Regex = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

}  // namespace nl
