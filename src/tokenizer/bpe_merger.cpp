// See bpe_merger.h. The merge order is exactly that of the plain loop "merge the best
// adjacent pair, the leftmost of equals, until none can merge": the queue orders candidates
// by (priority, position of the left symbol), and a candidate whose symbols have changed
// since it was queued is stale and skipped, so the queue's best live entry is always the
// pair that loop would pick.
#include "tokenizer/bpe_merger.h"

#include <cmath>
#include <limits>
#include <queue>

#include "tokenizer/unicode_text.h"

namespace nl {
namespace {

constexpr size_t kNone = std::numeric_limits<size_t>::max();

// A run of the word's bytes. Merging only ever joins neighbours, so every symbol is a
// contiguous piece of the word, named by the index of its first character.
struct Symbol {
  size_t start, len;  // len 0: merged into its left neighbour
  size_t prev, next;  // kNone at the ends
};

struct Candidate {
  double priority;
  size_t left, right;  // symbol indices
  size_t right_len;    // the right symbol's length when queued (the left one's follows from `right`)
};

// std::priority_queue pops the greatest: a candidate is "less" when it is worse.
struct WorseCandidate {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.priority != b.priority ? a.priority > b.priority : a.left > b.left;
  }
};

}  // namespace

BpeMerger::BpeMerger(const std::vector<std::pair<std::string, std::string>>& merges,
                     const std::unordered_map<std::string, int32_t>& vocab, const std::vector<float>& scores)
    : vocab_(vocab), scores_(scores), by_rank_(!merges.empty()) {
  ranks_.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    std::string key = merges[i].first;
    key += '\0';
    key += merges[i].second;
    ranks_.emplace(std::move(key), int32_t(i));  // a repeated merge keeps its first (best) rank
  }
}

bool BpeMerger::priority(std::string_view a, std::string_view b, std::string& key, double& out) const {
  if (by_rank_) {
    key.assign(a);
    key += '\0';
    key += b;
    auto it = ranks_.find(std::string_view(key));
    if (it == ranks_.end()) return false;
    out = it->second;
    return true;
  }
  key.assign(a);
  key += b;
  auto it = vocab_.find(key);
  if (it == vocab_.end()) return false;
  const int32_t id = it->second;
  out = (size_t(id) < scores_.size()) ? -double(scores_[size_t(id)]) : 0.0;
  // A NaN score (a damaged file) would break the queue's ordering: such a token merges last.
  if (std::isnan(out)) out = std::numeric_limits<double>::infinity();
  return true;
}

std::vector<std::string_view> BpeMerger::merge(std::string_view word) const {
  std::vector<Symbol> sym;
  sym.reserve(word.size());
  for (size_t i = 0; i < word.size();) {
    size_t n = unicode::utf8_len((unsigned char)word[i]);
    if (i + n > word.size()) n = word.size() - i;
    sym.push_back({i, n, sym.empty() ? kNone : sym.size() - 1, sym.size() + 1});
    i += n;
  }
  if (sym.empty()) return {};
  sym.back().next = kNone;
  auto text = [&](size_t i) { return word.substr(sym[i].start, sym[i].len); };

  std::string key;
  // The candidate merge of symbol `left` with its right neighbour, if that pair can merge.
  auto candidate = [&](size_t left, Candidate& c) {
    const size_t right = sym[left].next;
    c = {0.0, left, right, right == kNone ? 0 : sym[right].len};
    return right != kNone && priority(text(left), text(right), key, c.priority);
  };
  std::vector<Candidate> initial;
  initial.reserve(sym.size());
  Candidate c;
  for (size_t i = 0; i + 1 < sym.size(); ++i)
    if (candidate(i, c)) initial.push_back(c);
  std::priority_queue<Candidate, std::vector<Candidate>, WorseCandidate> queue(WorseCandidate{}, std::move(initial));

  while (!queue.empty()) {
    const Candidate best = queue.top();
    queue.pop();
    Symbol& left = sym[best.left];
    Symbol& right = sym[best.right];
    if (left.len == 0 || left.next != best.right || right.len != best.right_len) continue;  // stale
    left.len += right.len;
    right.len = 0;
    left.next = right.next;
    if (right.next != kNone) sym[right.next].prev = best.left;
    if (left.prev != kNone && candidate(left.prev, c)) queue.push(c);
    if (candidate(best.left, c)) queue.push(c);
  }

  std::vector<std::string_view> out;
  for (size_t i = 0; i != kNone; i = sym[i].next) out.push_back(text(i));
  return out;
}

}  // namespace nl
