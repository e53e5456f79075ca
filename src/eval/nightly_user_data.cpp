// The generic task's data (see nightly_user_data.h): the app's JSONL read leniently, each line
// checked by the same loader `train` uses, so what reaches training is what it accepts.
#include "nightlora/eval/nightly_user_data.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "nightlora/job/atomic_file.h"
#include "nightlora/util/error.h"

namespace nl {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::optional<double> parse_iso8601(const std::string& s) {
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0, n = 0;
  if (std::sscanf(s.c_str(), "%4d-%2d-%2d%n", &y, &mo, &d, &n) != 3 || n != 10) return std::nullopt;
  size_t pos = 10;
  if (pos < s.size() && (s[pos] == 'T' || s[pos] == ' ')) {
    int m = 0;
    if (std::sscanf(s.c_str() + pos + 1, "%2d:%2d%n", &h, &mi, &m) != 2 || m != 5) return std::nullopt;
    pos += 1 + 5;
    if (pos < s.size() && s[pos] == ':') {
      if (std::sscanf(s.c_str() + pos + 1, "%2d%n", &sec, &m) != 1 || m != 2) return std::nullopt;
      pos += 3;
      while (pos < s.size() && (s[pos] == '.' || (s[pos] >= '0' && s[pos] <= '9'))) ++pos;  // fractions
    }
  }
  double offset = 0;
  if (pos < s.size() && s[pos] == 'Z') {
    ++pos;
  } else if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) {
    int oh = 0, om = 0, m = 0;
    if (std::sscanf(s.c_str() + pos + 1, "%2d:%2d%n", &oh, &om, &m) != 2 || m != 5) return std::nullopt;
    offset = (s[pos] == '+' ? 1 : -1) * (oh * 3600.0 + om * 60.0);
    pos += 6;
  }
  if (pos != s.size() || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60) return std::nullopt;
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = sec;
  return static_cast<double>(::timegm(&tm)) - offset;
}

namespace {

std::vector<fs::path> data_files(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) fail(path, "--user-data does not exist", "give the folder the app writes its JSONL files to");
  if (!fs::is_directory(path, ec)) return {fs::path(path)};
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(path, ec))
    if (e.is_regular_file() && e.path().extension() == ".jsonl") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  if (files.empty()) fail(path, "holds no *.jsonl file", "the app writes its data as JSONL files (one item a line) here");
  return files;
}

std::optional<DataFormat> format_of(const json& j) {
  if (j.contains("messages")) return DataFormat::Messages;
  if (j.contains("prompt") || j.contains("completion")) return DataFormat::PromptCompletion;
  if (j.contains("text")) return DataFormat::Text;
  return std::nullopt;
}

struct Line {
  UserItem item;
};

}  // namespace

UserData read_user_data(const std::string& path, const std::string& ts_key, const Tokenizer& tok,
                        const DataOptions& opt) {
  UserData d;
  auto skip = [&](int64_t& counter, const std::string& where, const std::string& why) {
    ++counter;
    if (d.first_problem.empty()) d.first_problem = where + ": " + why;
  };
  std::vector<Line> lines;
  for (const fs::path& file : data_files(path)) {
    ++d.n_files;
    for_each_line(read_file(file.string()), [&](const std::string& line, int64_t line_no) {
      ++d.n_lines;
      const std::string where = file.filename().string() + ":" + std::to_string(line_no);
      json j = json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.is_object()) {
        skip(d.n_malformed, where, "not a JSON object");
        return;
      }
      Line l;
      l.item.where = where;
      if (j.contains(ts_key)) {
        const json& t = j[ts_key];
        if (t.is_number()) l.item.time = t.get<double>();
        else if (t.is_string()) l.item.time = parse_iso8601(t.get<std::string>());
        if (!l.item.time || !std::isfinite(*l.item.time)) {
          skip(d.n_malformed, where, "\"" + ts_key + "\" is neither Unix seconds nor an ISO 8601 time");
          return;
        }
        j.erase(ts_key);
      }
      const std::optional<DataFormat> f = format_of(j);
      if (!f) {
        skip(d.n_malformed, where, "has none of the keys text, prompt/completion, messages");
        return;
      }
      l.item.format = *f;
      l.item.json = j.dump();
      lines.push_back(std::move(l));
    });
  }
  // The most common format, for messages (training reads lines of every format).
  std::map<DataFormat, int64_t> count;
  for (const Line& l : lines) ++count[l.item.format];
  if (!count.empty())
    d.format = std::max_element(count.begin(), count.end(), [](auto& a, auto& b) { return a.second < b.second; })->first;
  std::vector<Line> kept;
  for (Line& l : lines) {
    const std::string problem = training_line_problem(l.item.json, l.item.where, tok, opt, &d.n_truncated);
    if (!problem.empty()) {
      skip(d.n_unusable, l.item.where, problem);
      continue;
    }
    kept.push_back(std::move(l));
  }
  std::stable_sort(kept.begin(), kept.end(), [](const Line& a, const Line& b) {
    const double ta = a.item.time.value_or(-INFINITY), tb = b.item.time.value_or(-INFINITY);
    return ta < tb;
  });
  for (Line& l : kept) d.items.push_back(std::move(l.item));
  return d;
}

UserSplit split_user_items(const std::vector<UserItem>& items, int64_t holdout, double share, int64_t min_heldout,
                           int64_t max_heldout, int64_t max_train) {
  const int64_t n = static_cast<int64_t>(items.size());
  const int64_t by_share = static_cast<int64_t>(std::ceil(share * static_cast<double>(n)));
  int64_t n_hold = holdout > 0 ? holdout : std::max<int64_t>(min_heldout, std::min<int64_t>(max_heldout, by_share));
  n_hold = std::min(n_hold, n - 1);
  UserSplit s;
  if (n_hold < 1) {
    s.train = items;
    return s;
  }
  const int64_t first_train = max_train > 0 ? std::max<int64_t>(0, n - n_hold - max_train) : 0;
  s.n_outside_window = first_train;
  s.train.assign(items.begin() + first_train, items.begin() + (n - n_hold));
  s.heldout.assign(items.begin() + (n - n_hold), items.end());
  return s;
}

std::string training_line_problem(const std::string& line, const std::string& where, const Tokenizer& tok,
                                  const DataOptions& opt, int64_t* truncated) {
  DataOptions strict = opt;
  strict.bad_lines = BadLines::Error;  // the reason, rather than "nothing left to train on"
  try {
    const Dataset one = parse_jsonl_dataset(line, where, tok, strict);
    // A loader that skips such a line (rather than failing on it) leaves no example.
    if (one.examples.empty()) return where + ": no token to train on within the sequence length";
    if (truncated) *truncated += one.n_truncated;
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

void for_each_line(const std::string& text, const std::function<void(const std::string& line, int64_t line_no)>& fn) {
  size_t pos = 0;
  int64_t line_no = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (line.find_first_not_of(" \t\r") != std::string::npos) fn(line, line_no);
  }
}

std::string user_items_jsonl(const std::vector<UserItem>& items) {
  std::string s;
  for (const UserItem& it : items) s += it.json + "\n";
  return s;
}

}  // namespace nl
