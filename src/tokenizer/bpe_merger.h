// The BPE merge loop shared by both tokenizer kinds. Symbols start as the characters of a
// pre-token and adjacent pairs are merged, best pair first (leftmost on ties), until no pair
// can merge. "Best" is either the rank of the pair in the merges list (Hugging Face BPE,
// llama.cpp gpt2) or the score of the merged token (llama.cpp's SentencePiece, no merges).
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
  BpeMerger(const std::vector<std::pair<std::string, std::string>>& merges,
            const std::unordered_map<std::string, int32_t>& vocab, const std::vector<float>& scores);

  // Splits `word` (valid UTF-8) into the final symbol strings.
  std::vector<std::string> merge(std::string_view word) const;

 private:
  // Lower is better; returns false when the pair cannot merge.
  bool priority(const std::string& a, const std::string& b, double& out) const;

  std::unordered_map<std::string, int32_t> ranks_;  // key: a + '\0' + b
  const std::unordered_map<std::string, int32_t>& vocab_;
  const std::vector<float>& scores_;
  bool by_rank_;
};

}  // namespace nl
