// The app's data for the nightly job's generic task: JSONL lines in any format `train` reads
// (text, prompt/completion, messages), in one file or in every *.jsonl file of a folder
// (files by name, lines in order). A line may carry its time under a timestamp key (default
// "timestamp": Unix seconds as a number, or an ISO 8601 string such as "2026-12-06T21:30:00Z");
// the key is removed before training. Items are ordered by time, lines without one first (in
// file order): they count as older than any timed line.
//
// Every line is checked with the library's own data loader (parse_jsonl_dataset, the same
// tokenizer and --seq-len as training), so a line that `train` would skip is skipped here
// already and counted, never fatal: malformed JSON, none of the formats, no supervised token
// within the sequence length. Over-long lines are kept (training truncates them) and counted.
// Formats may mix, as in `train`'s data.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "nightlora/data/dataset.h"

namespace nl {

class Tokenizer;

struct UserItem {
  std::string json;            // the line as `train` reads it (compact, without the timestamp key)
  DataFormat format = DataFormat::Text;
  std::optional<double> time;  // seconds since the Unix epoch
  std::string where;           // file:line
};

struct UserData {
  std::vector<UserItem> items;  // usable items, oldest first
  DataFormat format = DataFormat::Text;  // the most common one
  int64_t n_files = 0, n_lines = 0;
  int64_t n_malformed = 0;     // not JSON, not an object, no known format, a bad timestamp
  int64_t n_unusable = 0;      // rejected by the data loader (e.g. no supervised token within --seq-len)
  int64_t n_truncated = 0;     // longer than --seq-len: training keeps their start
  std::string first_problem;   // "file:line: why" of the first skipped line
  int64_t n_skipped() const { return n_malformed + n_unusable; }
};

// Reads a file or a folder's *.jsonl files. Throws nl::Error when there is no such path or no
// file to read; a folder without a usable line gives an empty UserData (the caller says so).
UserData read_user_data(const std::string& path, const std::string& timestamp_key, const Tokenizer& tok,
                        const DataOptions& opt);

// "2026-12-06T21:30:00Z", "2026-12-06 21:30:00", "2026-12-06" (UTC unless an offset such as
// +02:00 follows): seconds since the epoch; nullopt when the text is none of these.
std::optional<double> parse_iso8601(const std::string& text);

// Items split by time: the latest `n_heldout` are held out, the newest `max_train` (0: all)
// of the others are trained on (the older ones are dropped: the window that keeps a night's
// training bounded). n_heldout = holdout when > 0, else max(min_heldout, min(max_heldout,
// ceil(share * n))) (the cap keeps a night's evaluation bounded too), and never more than
// n - 1 (at least one item trains).
struct UserSplit {
  std::vector<UserItem> train, heldout;
  int64_t n_outside_window = 0;
};
UserSplit split_user_items(const std::vector<UserItem>& items, int64_t holdout, double share, int64_t min_heldout,
                           int64_t max_heldout, int64_t max_train);

// Whether `train` accepts one JSONL line: parsed by the library's data loader with `opt`.
// Returns "" when it does (adds 1 to *truncated when it is cut to opt.max_tokens), else why not.
std::string training_line_problem(const std::string& line, const std::string& where, const Tokenizer& tok,
                                  const DataOptions& opt, int64_t* truncated = nullptr);

// Calls fn(line, line number from 1) for every line of `text` that is not blank.
void for_each_line(const std::string& text, const std::function<void(const std::string& line, int64_t line_no)>& fn);

// Items as JSONL text, one per line.
std::string user_items_jsonl(const std::vector<UserItem>& items);

}  // namespace nl
