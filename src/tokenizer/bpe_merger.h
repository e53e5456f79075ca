// The BPE merge loop shared by both tokenizer kinds. Symbols start as the characters of a
// pre-token and adjacent pairs are merged, best pair first (leftmost on ties), until no pair
// can merge. "Best" is either the rank of the pair in the merges list (Hugging Face BPE,
// llama.cpp gpt2) or the score of the merged token (llama.cpp's SentencePiece, no merges).
//
// A SentencePiece-style tokenizer merges a whole line at once (and a byte-level one a whole
// run without spaces), so the loop is O(n log n) in the characters of the pre-token: the
// symbols are a doubly linked list and the candidate merges a priority queue, as in Hugging
// Face tokenizers' Word::merge_all and llama.cpp's tokenizers.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace nl {

class BpeMerger {
 public:
  // With merges: priority by rank. Without: by score of the concatenation (needs scores).
  // `vocab` and `scores` must outlive the merger.
  BpeMerger(const std::vector<std::pair<std::string, std::string>>& merges,
            const std::unordered_map<std::string, int32_t>& vocab, const std::vector<float>& scores);

  // Splits `word` (valid UTF-8) into the final symbols, as views into `word`.
  std::vector<std::string_view> merge(std::string_view word) const;

 private:
  // Lower is better (the rank, or the score mapped to an unsigned key in reverse order);
  // returns false when the pair cannot merge. `key` is scratch space, kept by the caller so
  // that looking up a pair allocates nothing.
  bool priority(std::string_view a, std::string_view b, std::string& key, uint32_t& out) const;

  struct ViewHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, int32_t, ViewHash, std::equal_to<>> ranks_;  // key: a + '\0' + b
  const std::unordered_map<std::string, int32_t>& vocab_;
  const std::vector<float>& scores_;
  bool by_rank_;
};

}  // namespace nl
