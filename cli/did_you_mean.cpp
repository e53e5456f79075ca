// See did_you_mean.h.
#include "did_you_mean.h"

#include <algorithm>
#include <cctype>

namespace nlcli {
namespace {

// Optimal string alignment distance: insertions, deletions, substitutions and swaps of two
// neighbouring characters (the commonest typo, "trian") each cost one. Case is ignored.
size_t edit_distance(const std::string& a, const std::string& b) {
  auto lower = [](char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); };
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<size_t>> d(n + 1, std::vector<size_t>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (size_t i = 1; i <= n; ++i)
    for (size_t j = 1; j <= m; ++j) {
      const size_t cost = lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) && lower(a[i - 2]) == lower(b[j - 1]))
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[n][m];
}

}  // namespace

std::vector<std::string> closest_names(const std::string& word, const std::vector<std::string>& candidates) {
  const size_t limit = std::clamp<size_t>(word.size() / 3, 1, 3);
  std::vector<std::pair<size_t, std::string>> close;
  for (const std::string& c : candidates) {
    const size_t d = edit_distance(word, c);
    // A typed prefix of a longer name ("--grad" for "--grad-accum") is close too.
    const bool prefix = word.size() >= 3 && c.size() > word.size() && c.compare(0, word.size(), word) == 0;
    if (d <= limit || prefix) close.emplace_back(prefix ? std::min(d, limit) : d, c);
  }
  std::stable_sort(close.begin(), close.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<std::string> out;
  for (const auto& [d, c] : close)
    if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  return out;
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates, const std::string& prefix) {
  std::vector<std::string> close = closest_names(word, candidates);
  if (close.empty()) return "";
  if (close.size() > 3) close.resize(3);
  std::string s = " Did you mean ";
  for (size_t i = 0; i < close.size(); ++i)
    s += (i == 0 ? "" : i + 1 == close.size() ? " or " : ", ") + ("'" + prefix + close[i] + "'");
  return s + "?";
}

}  // namespace nlcli
