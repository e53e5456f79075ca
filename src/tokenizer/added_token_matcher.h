// Finds the added tokens (special tokens such as <|im_start|>, user-added ones) at a place in
// the text: the longest one that starts there, the first in the tokenizer's order among
// equals. A byte trie, so the cost per position is the length of the longest token, not the
// number of tokens (Llama 3 has 256 added tokens, and the pipeline asks at every byte).
#pragma once
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/tokenizer_spec.h"

namespace nl {

class AddedTokenMatcher {
 public:
  // `tokens` must outlive the matcher; empty contents are ignored.
  explicit AddedTokenMatcher(const std::vector<const AddedToken*>& tokens);

  // The longest token that `text` starts with (special ones only when `special_too`), or null.
  const AddedToken* match(std::string_view text, bool special_too) const;

 private:
  struct Node {
    std::vector<std::pair<unsigned char, uint32_t>> children;  // byte -> node index
    std::vector<const AddedToken*> ends;                       // tokens ending here, in order
  };
  std::vector<Node> nodes_;  // [0] is the root
};

}  // namespace nl
