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
#include <vector>

#include "flat_string_table.h"  // same folder: the tests include this header by path

namespace nl {

class BpeMerger {
 public:
  // With merges: priority by rank. Without: by score of the concatenation, the token of a
  // text being its first id in `tokens` (id -> text); an id past `scores` scores 0.
  BpeMerger(const std::vector<std::pair<std::string, std::string>>& merges, const std::vector<std::string>& tokens,
            const std::vector<float>& scores);

  // Splits `word` (valid UTF-8) into the final symbols, as views into `word`.
  std::vector<std::string_view> merge(std::string_view word) const;

 private:
  // Of two neighbouring symbols: lower is better (the rank, or the score mapped to an
  // unsigned key in reverse order); returns false when the pair cannot merge. `key` is
  // scratch space, kept by the caller so that looking up a pair allocates nothing.
  bool priority(std::string_view a, std::string_view b, std::string& key, uint32_t& out) const;

  bool by_rank_;
  // By rank: a + '\0' + b -> rank. By score: token -> its order (see float_order).
  FlatStringTable table_;
};

}  // namespace nl
