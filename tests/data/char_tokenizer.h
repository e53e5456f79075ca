// A tiny tokenizer for data tests: one token per byte (id = byte + 3), BOS 1, EOS 2.
// One token per character makes "which characters are supervised" exact and easy to read.
#pragma once
#include <string>
#include <vector>

#include "nightlora/tokenizer/tokenizer.h"

namespace nltest {

class CharTokenizer : public nl::Tokenizer {
 public:
  explicit CharTokenizer(bool add_bos = true, bool has_eos = true) {
    bos_ = 1;
    eos_ = has_eos ? 2 : -1;
    add_bos_ = add_bos;
  }
  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool) const override {
    std::vector<int32_t> ids;
    if (add_bos) ids.push_back(1);
    for (unsigned char c : text) ids.push_back(static_cast<int32_t>(c) + 3);
    return ids;
  }
  std::string decode(const std::vector<int32_t>& ids, bool = false) const override {
    std::string s;
    for (int32_t id : ids)
      if (id >= 3) s += static_cast<char>(id - 3);
      else s += id == 1 ? "<s>" : id == 2 ? "</s>" : "<unk>";
    return s;
  }
  nl::TokenizerKind kind() const override { return nl::TokenizerKind::ByteLevelBpe; }
  std::string describe() const override { return "test chars"; }
  int32_t vocab_size() const override { return 259; }
  std::string token_text(int32_t id) const override { return decode({id}); }
  int32_t token_id(const std::string& text) const override { return text.size() == 1 ? (unsigned char)text[0] + 3 : -1; }
  bool is_special(int32_t id) const override { return id < 3; }
  void write_gguf(nl::GgufWriter&) const override {}
  void set_template(const std::string& t) { chat_template_ = t; }
};

// The text of the supervised tokens of an example (EOS shown as "</s>").
inline std::string supervised_text(const CharTokenizer& tok, const nl::Example& e) {
  std::vector<int32_t> ids;
  for (size_t t = 0; t < e.tokens.size(); ++t)
    if (e.supervised[t]) ids.push_back(e.tokens[t]);
  return tok.decode(ids);
}

}  // namespace nltest
