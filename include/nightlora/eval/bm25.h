// BM25 ranking (Okapi BM25 as the rank_bm25 package's BM25Okapi computes it, which LaMP's
// retriever uses), our own implementation.
//
// Tokenization: split on whitespace (space, tab, newline, CR, FF, VT), case-sensitive, no
// stemming, punctuation kept: exactly Python's str.split() on ASCII text, as LaMP does.
//
// For a query q1..qm (repeated terms count each time) and a document D of |D| tokens:
//   score(D) = sum_i idf(qi) * f(qi, D) * (k1 + 1) / (f(qi, D) + k1 * (1 - b + b * |D| / avgdl))
//   idf(t)   = ln((N - n(t) + 0.5) / (n(t) + 0.5)), where n(t) = documents containing t;
// a negative idf (a term in more than half the documents) is replaced by
// epsilon * (mean idf over the corpus vocabulary), and a term absent from the corpus scores 0.
// Defaults k1 = 1.5, b = 0.75, epsilon = 0.25 (BM25Okapi's).
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace nl {

struct Bm25Params {
  double k1 = 1.5;
  double b = 0.75;
  double epsilon = 0.25;
};

std::vector<std::string> bm25_tokenize(std::string_view text);

class Bm25 {
 public:
  explicit Bm25(const std::vector<std::string>& documents, const Bm25Params& p = {});

  // One score per document, in document order.
  std::vector<double> scores(std::string_view query) const;
  // Indices of the n best documents, best first; ties: the later document first (what
  // LaMP's reversed stable argsort gives). n larger than the corpus returns every document.
  std::vector<size_t> top_n(std::string_view query, size_t n) const;

  double idf(const std::string& term) const;  // 0 for a term absent from the corpus
  size_t size() const { return doc_len_.size(); }

 private:
  Bm25Params p_;
  std::vector<std::unordered_map<std::string, int>> tf_;  // term frequencies per document
  std::vector<size_t> doc_len_;
  double avgdl_ = 0;
  std::unordered_map<std::string, double> idf_;
};

}  // namespace nl
