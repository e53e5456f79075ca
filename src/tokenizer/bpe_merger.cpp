// See bpe_merger.h. The merge order is exactly that of the plain loop "merge the best
// adjacent pair, the leftmost of equals, until none can merge": the queue orders candidates
// by (priority, position of the left symbol), and a candidate whose symbols have changed
// since it was queued is stale and skipped, so the queue's best live entry is always the
// pair that loop would pick.
#include "tokenizer/bpe_merger.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <queue>

#include "nightlora/util/error.h"
#include "tokenizer/unicode_text.h"

namespace nl {
namespace {

constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();

// A run of the word's bytes. Merging only ever joins neighbours, so every symbol is a
// contiguous piece of the word, named by the index of its first character. 32-bit fields
// keep the arrays small: a 1 MB line has a million symbols and about as many candidates.
struct Symbol {
  uint32_t start, len;  // len 0: merged into its left neighbour
  uint32_t prev, next;  // kNone at the ends
};

struct Candidate {
  uint64_t order;      // priority << 32 | left symbol index: lower merges first
  uint32_t right;      // the right symbol's index
  uint32_t right_len;  // its length when queued (the left one's follows from `right`)
  uint32_t left() const { return uint32_t(order); }
};

// std::priority_queue pops the greatest: a candidate is "less" when it is worse.
struct WorseCandidate {
  bool operator()(const Candidate& a, const Candidate& b) const { return a.order > b.order; }
};

// An unsigned key that orders floats as < does, with -0 equal to +0 (they tie, as before).
// NaN (a damaged file) sorts after everything: such a token merges last.
uint32_t float_order(float f) {
  if (std::isnan(f)) return std::numeric_limits<uint32_t>::max();
  if (f == 0.f) f = 0.f;
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

}  // namespace

BpeMerger::BpeMerger(const std::vector<std::pair<std::string, std::string>>& merges,
                     const std::vector<std::string>& tokens, const std::vector<float>& scores)
    : by_rank_(!merges.empty()), table_(by_rank_ ? merges.size() : tokens.size()) {
  if (by_rank_) {
    std::string key;
    for (size_t i = 0; i < merges.size(); ++i) {
      key = merges[i].first;
      key += '\0';
      key += merges[i].second;
      table_.insert(key, int32_t(i));  // a repeated merge keeps its first (best) rank
    }
    return;
  }
  for (size_t id = 0; id < tokens.size(); ++id) {
    if (tokens[id].empty()) continue;
    const uint32_t order = float_order(id < scores.size() ? -scores[id] : 0.f);  // the best score first
    table_.insert(tokens[id], std::bit_cast<int32_t>(order));  // a repeated text keeps its first id
  }
}

bool BpeMerger::priority(std::string_view a, std::string_view b, std::string& key, uint32_t& out) const {
  int32_t value = 0;
  if (by_rank_) {
    key.assign(a);
    key += '\0';
    key += b;
    if (!table_.find(key, value)) return false;
  } else {
    // Neighbours are adjacent in the word, so their concatenation is a piece of it.
    if (!table_.find(std::string_view(a.data(), a.size() + b.size()), value)) return false;
  }
  out = std::bit_cast<uint32_t>(value);
  return true;
}

std::vector<std::string_view> BpeMerger::merge(std::string_view word) const {
  if (word.size() >= kNone)
    fail("tokenizer", "a pre-token of " + std::to_string(word.size()) + " bytes is too long to BPE-merge",
         "split the text into lines shorter than 4 GiB");
  std::vector<Symbol> sym;
  sym.reserve(word.size());
  for (size_t i = 0; i < word.size();) {
    size_t n = unicode::utf8_len((unsigned char)word[i]);
    if (i + n > word.size()) n = word.size() - i;
    const uint32_t at = uint32_t(sym.size());
    sym.push_back({uint32_t(i), uint32_t(n), at == 0 ? kNone : at - 1, at + 1});
    i += n;
  }
  if (sym.empty()) return {};
  sym.back().next = kNone;
  auto text = [&](uint32_t i) { return word.substr(sym[i].start, sym[i].len); };

  std::string key;
  // The candidate merge of symbol `left` with its right neighbour, if that pair can merge.
  auto candidate = [&](uint32_t left, Candidate& c) {
    const uint32_t right = sym[left].next;
    uint32_t p = 0;
    if (right == kNone || !priority(text(left), text(right), key, p)) return false;
    c = {uint64_t(p) << 32 | left, right, sym[right].len};
    return true;
  };
  std::vector<Candidate> initial;
  initial.reserve(sym.size());
  Candidate c;
  for (uint32_t i = 0; i + 1 < sym.size(); ++i)
    if (candidate(i, c)) initial.push_back(c);
  std::priority_queue<Candidate, std::vector<Candidate>, WorseCandidate> queue(WorseCandidate{}, std::move(initial));

  while (!queue.empty()) {
    const Candidate best = queue.top();
    queue.pop();
    Symbol& left = sym[best.left()];
    Symbol& right = sym[best.right];
    if (left.len == 0 || left.next != best.right || right.len != best.right_len) continue;  // stale
    left.len += right.len;
    right.len = 0;
    left.next = right.next;
    if (right.next != kNone) sym[right.next].prev = best.left();
    if (left.prev != kNone && candidate(left.prev, c)) queue.push(c);
    if (candidate(best.left(), c)) queue.push(c);
  }

  std::vector<std::string_view> out;
  for (uint32_t i = 0; i != kNone; i = sym[i].next) out.push_back(text(i));
  return out;
}

}  // namespace nl
