// A training batch: several sequences packed back to back without padding. Positions
// restart at each sequence start and attention never crosses a sequence boundary.
#pragma once
#include <cstdint>
#include <vector>

namespace nl {

struct Batch {
  std::vector<int32_t> tokens;     // all sequences concatenated, T tokens
  // labels[t] is the token that position t must predict (normally tokens[t+1] of the same
  // sequence), or -1 when position t is not supervised (prompt, last token of a sequence).
  std::vector<int32_t> labels;
  std::vector<int64_t> seq_start;  // n_seq + 1 offsets into tokens; seq_start.back() == T

  int64_t n_tokens() const { return static_cast<int64_t>(tokens.size()); }
  int64_t n_seqs() const { return static_cast<int64_t>(seq_start.size()) - 1; }
  int64_t n_supervised() const {
    int64_t n = 0;
    for (int32_t l : labels) n += l >= 0;
    return n;
  }
};

}  // namespace nl
