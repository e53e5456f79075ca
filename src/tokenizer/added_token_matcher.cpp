// See added_token_matcher.h.
#include "tokenizer/added_token_matcher.h"

namespace nl {

AddedTokenMatcher::AddedTokenMatcher(const std::vector<const AddedToken*>& tokens) : nodes_(1) {
  for (const AddedToken* t : tokens) {
    if (t->content.empty()) continue;
    uint32_t at = 0;
    for (unsigned char b : t->content) {
      uint32_t next = 0;
      for (const auto& [byte, child] : nodes_[at].children)
        if (byte == b) next = child;
      if (next == 0) {
        next = uint32_t(nodes_.size());
        nodes_[at].children.emplace_back(b, next);
        nodes_.emplace_back();
      }
      at = next;
    }
    nodes_[at].ends.push_back(t);
  }
}

const AddedToken* AddedTokenMatcher::match(std::string_view text, bool special_too) const {
  const AddedToken* longest = nullptr;
  uint32_t at = 0;
  for (unsigned char b : text) {
    uint32_t next = 0;
    for (const auto& [byte, child] : nodes_[at].children)
      if (byte == b) next = child;
    if (next == 0) break;
    at = next;
    for (const AddedToken* t : nodes_[at].ends)
      if (special_too || !t->special) {
        longest = t;
        break;
      }
  }
  return longest;
}

}  // namespace nl
