// Finds the added tokens (special tokens such as <|im_start|>, user-added ones) at a place in
// the text: the longest one that starts there, the first in the tokenizer's order among
// equals. A byte trie, so the cost per position is the length of the longest token, not the
// number of tokens (Llama 3 has 256 added tokens, and the pipeline asks at every byte).
//
// What is matched is a token's pattern: its content, or, for a token marked "normalized":
// true, its content passed through the tokenizer's normalizer (Hugging Face tokenizers
// matches those in the normalized text by their normalized form: with SentencePiece's
// "prepend ▁" normalizer, TinyStories' <unk> is found as "▁<unk>", space included).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/tokenizer_spec.h"

namespace nl {

class AddedTokenMatcher {
 public:
  // A token and the text it is found by (empty patterns are ignored). Tokens must outlive
  // the matcher.
  struct Pattern {
    std::string text;
    const AddedToken* token;
  };
  explicit AddedTokenMatcher(const std::vector<Pattern>& patterns);

  struct Match {
    const AddedToken* token = nullptr;  // null: none
    size_t length = 0;                  // bytes of the text the pattern covers
  };
  // The longest pattern that `text` starts with (special tokens only when `special_too`).
  Match match(std::string_view text, bool special_too) const;

 private:
  struct Node {
    std::vector<std::pair<unsigned char, uint32_t>> children;  // byte -> node index
    std::vector<const AddedToken*> ends;                       // tokens whose pattern ends here, in order
  };
  std::vector<Node> nodes_;  // [0] is the root
};

}  // namespace nl
