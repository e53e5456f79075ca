// "Did you mean" for a mistyped subcommand, option or config key: the known names closest to
// what was typed, by edit distance (a swap of two neighbouring letters counts as one edit).
#pragma once
#include <string>
#include <vector>

namespace nlcli {

// The candidates within ~a third of `word`'s length in edits (at least 1, at most 3), the
// closest first; empty when none is close.
std::vector<std::string> closest_names(const std::string& word, const std::vector<std::string>& candidates);

// " Did you mean 'x'?" / " Did you mean 'x' or 'y'?", or "" when nothing is close.
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates,
                         const std::string& prefix = "");

}  // namespace nlcli
