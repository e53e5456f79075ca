#include "nightlora/eval/bm25.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace nl {

namespace {
// Python's str.split() whitespace for ASCII text.
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
}  // namespace

std::vector<std::string> bm25_tokenize(std::string_view text) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && is_space(text[i])) ++i;
    size_t start = i;
    while (i < text.size() && !is_space(text[i])) ++i;
    if (i > start) out.emplace_back(text.substr(start, i - start));
  }
  return out;
}

Bm25::Bm25(const std::vector<std::string>& documents, const Bm25Params& p) : p_(p) {
  std::unordered_map<std::string, int> doc_freq;
  size_t total_len = 0;
  for (const std::string& d : documents) {
    std::unordered_map<std::string, int> tf;
    const std::vector<std::string> toks = bm25_tokenize(d);
    for (const std::string& t : toks) ++tf[t];
    for (const auto& [term, n] : tf) ++doc_freq[term];
    doc_len_.push_back(toks.size());
    total_len += toks.size();
    tf_.push_back(std::move(tf));
  }
  const double n_docs = static_cast<double>(documents.size());
  avgdl_ = documents.empty() ? 0.0 : static_cast<double>(total_len) / n_docs;

  // BM25Okapi: idf may go negative for terms in more than half the documents; those get
  // epsilon times the average idf instead, so a common term still counts a little.
  double idf_sum = 0;
  std::vector<std::string> negative;
  for (const auto& [term, n] : doc_freq) {
    const double v = std::log((n_docs - n + 0.5) / (n + 0.5));
    idf_[term] = v;
    idf_sum += v;
    if (v < 0) negative.push_back(term);
  }
  const double average_idf = idf_.empty() ? 0.0 : idf_sum / static_cast<double>(idf_.size());
  for (const std::string& term : negative) idf_[term] = p_.epsilon * average_idf;
}

double Bm25::idf(const std::string& term) const {
  auto it = idf_.find(term);
  return it == idf_.end() ? 0.0 : it->second;
}

std::vector<double> Bm25::scores(std::string_view query) const {
  std::vector<double> s(doc_len_.size(), 0.0);
  if (avgdl_ <= 0) return s;  // no document has a token: nothing can match
  for (const std::string& q : bm25_tokenize(query)) {
    const double w = idf(q);
    for (size_t d = 0; d < s.size(); ++d) {
      auto it = tf_[d].find(q);
      if (it == tf_[d].end()) continue;
      const double f = it->second;
      const double norm = p_.k1 * (1.0 - p_.b + p_.b * static_cast<double>(doc_len_[d]) / avgdl_);
      s[d] += w * f * (p_.k1 + 1.0) / (f + norm);
    }
  }
  return s;
}

std::vector<size_t> Bm25::top_n(std::string_view query, size_t n) const {
  const std::vector<double> s = scores(query);
  std::vector<size_t> order(s.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    if (s[x] != s[y]) return s[x] > s[y];
    return x > y;  // ties: the later document first
  });
  if (order.size() > n) order.resize(n);
  return order;
}

}  // namespace nl
