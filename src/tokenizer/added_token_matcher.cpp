// See added_token_matcher.h.
#include "tokenizer/added_token_matcher.h"

namespace nl {

AddedTokenMatcher::AddedTokenMatcher(const std::vector<Pattern>& patterns) : nodes_(1) {
  for (const auto& [pattern, t] : patterns) {
    if (pattern.empty()) continue;
    uint32_t at = 0;
    for (unsigned char b : pattern) {
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

AddedTokenMatcher::Match AddedTokenMatcher::match(std::string_view text, bool special_too) const {
  Match longest;
  uint32_t at = 0;
  size_t depth = 0;
  for (unsigned char b : text) {
    uint32_t next = 0;
    for (const auto& [byte, child] : nodes_[at].children)
      if (byte == b) next = child;
    if (next == 0) break;
    at = next;
    ++depth;
    for (const AddedToken* t : nodes_[at].ends)
      if (special_too || !t->special) {
        longest = {t, depth};
        break;
      }
  }
  return longest;
}

}  // namespace nl
