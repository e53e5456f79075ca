// See bpe_merger.h. The loop is quadratic in the number of characters of one pre-token,
// which is short for byte-level BPE (words) and a line for SentencePiece-style BPE.
#include "tokenizer/bpe_merger.h"

#include "tokenizer/unicode_text.h"

namespace nl {

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

bool BpeMerger::priority(const std::string& a, const std::string& b, double& out) const {
  if (by_rank_) {
    std::string key = a;
    key += '\0';
    key += b;
    auto it = ranks_.find(key);
    if (it == ranks_.end()) return false;
    out = it->second;
    return true;
  }
  auto it = vocab_.find(a + b);
  if (it == vocab_.end()) return false;
  const int32_t id = it->second;
  out = (size_t(id) < scores_.size()) ? -double(scores_[size_t(id)]) : 0.0;
  return true;
}

std::vector<std::string> BpeMerger::merge(std::string_view word) const {
  std::vector<std::string> sym;
  for (size_t i = 0; i < word.size();) {
    size_t n = unicode::utf8_len((unsigned char)word[i]);
    if (i + n > word.size()) n = word.size() - i;
    sym.emplace_back(word.substr(i, n));
    i += n;
  }
  // pri[i]: priority of merging sym[i] and sym[i+1] (NaN-free: `ok[i]` says if it can merge).
  std::vector<double> pri(sym.size(), 0);
  std::vector<char> ok(sym.size(), 0);
  auto refresh = [&](size_t i) {
    if (i + 1 < sym.size()) ok[i] = priority(sym[i], sym[i + 1], pri[i]);
    else ok[i] = 0;
  };
  for (size_t i = 0; i + 1 < sym.size(); ++i) refresh(i);
  while (sym.size() > 1) {
    size_t best = sym.size();
    for (size_t i = 0; i + 1 < sym.size(); ++i)
      if (ok[i] && (best == sym.size() || pri[i] < pri[best])) best = i;
    if (best == sym.size()) break;
    sym[best] += sym[best + 1];
    sym.erase(sym.begin() + long(best) + 1);
    pri.erase(pri.begin() + long(best) + 1);
    ok.erase(ok.begin() + long(best) + 1);
    refresh(best);
    if (best > 0) refresh(best - 1);
  }
  return sym;
}

}  // namespace nl
