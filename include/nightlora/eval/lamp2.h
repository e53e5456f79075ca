// LaMP-2 (personalized movie tagging) in its official JSON format, and the per-user data
// built from it.
//
// Files (LaMP-Benchmark/LaMP):
//   questions: [{"id", "input", "profile": [{"id", "tag", "description", ...}], ...}, ...]
//   outputs:   {"task": "LaMP_2", "golds": [{"id", "output"}, ...]}
// Extra keys are accepted (real files and processed variants carry some: "date" on profile
// items, "user_id" on questions); the required ones are type-checked.
//
// Users. LaMP gives every question its own profile: in the user-based split each question is
// a different user; in the time-based split the question is a user's latest item and the
// profile holds that user's EARLIER items, each with a "date". A question's user is its
// "user_id" when present (our synthetic generator writes one, so several questions can share
// a user), otherwise the question's own id.
//
// Time. "Earlier" orders a user's profile items: by "date" when every item has one (dates
// are "YYYY-MM-DD"-style strings of integers joined by '-', compared as integer tuples as
// LaMP's recency retriever does, or plain integers), ties and undated profiles by position in
// the file. The time-based split requires every profile item to carry a date.
//
// Prompts (the same builder for training examples and for evaluation questions):
//   [retrieved part] + kLamp2Instruction + " description: " + <description> + kLamp2AnswerCue
// with completion " " + <tag>. The retrieved part, present when k > 0 items are retrieved,
// is LaMP's own profile-augmented form for this task:
//   the tag for the movie: "<d1>" is "<t1>" , and the tag for the movie: "<d2>" is "<t2>" . 
// i.e. each item as `the tag for the movie: "<d>" is "<t>" `, joined by ", and ", then ". ".
// A question's description is the text after "description:" in its input (trimmed), as
// LaMP's retriever extracts its query.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace nl {

// The 15 LaMP-2 movie tags in LaMP's label order (the order macro-F1 labels are numbered in).
inline constexpr int kLamp2NumTags = 15;
const std::array<std::string, kLamp2NumTags>& lamp2_tags();
// Index of `tag` in lamp2_tags() (exact match), or -1.
int lamp2_tag_index(std::string_view tag);

// "Which tag does this movie relate to among the following tags? Just answer with the tag
// name without further explanation. tags: [sci-fi, based on a book, ...]"
const std::string& lamp2_instruction();
// Appended after the description so a causal LM knows the answer comes next.
inline constexpr const char* kLamp2AnswerCue = "\nTag:";

enum class Lamp2Split { Auto, User, Time };
Lamp2Split parse_lamp2_split(const std::string& s);  // "auto" | "user" | "time"; throws nl::Error
const char* lamp2_split_name(Lamp2Split s);

struct Lamp2ProfileItem {
  std::string id;
  std::string tag;
  std::string description;
  std::optional<std::vector<int64_t>> date;  // parsed "date", when present
  std::string date_text;                     // the date as written ("" when absent)
};

struct Lamp2Question {
  std::string id;
  std::string user_id;  // "user_id" when present, else the question id
  std::string input;
  std::string description;  // extracted from input (text after "description:")
  std::vector<Lamp2ProfileItem> profile;
};

struct Lamp2Questions {
  std::string source;  // file name, for messages
  Lamp2Split split = Lamp2Split::User;  // as requested, or detected (Time when every profile item has a date)
  std::vector<Lamp2Question> questions;
};

struct Lamp2Outputs {
  std::string source;
  std::string task;
  std::vector<std::pair<std::string, std::string>> golds;  // (id, output) in file order
  // The output for a question id, or nullptr.
  const std::string* find(const std::string& id) const;
};

// Parses a questions file's text (`source` names it in errors). Throws nl::Error naming
// source, byte offset (malformed JSON) or the JSON path (e.g. "[3].profile[7].tag") for: not
// a list, missing/mistyped keys, an empty id, a duplicate question id, an input without
// "description:", a malformed date, a time split with undated items, and an empty file.
Lamp2Questions parse_lamp2_questions(std::string_view text, const std::string& source,
                                     Lamp2Split split = Lamp2Split::Auto);
Lamp2Questions load_lamp2_questions(const std::string& path, Lamp2Split split = Lamp2Split::Auto);

// Parses an outputs (golds) file. Throws nl::Error for malformed JSON, missing/mistyped keys,
// duplicate ids. Outputs are not checked against the tag list here (a predictions file in
// the same format may hold anything); lamp2_golds() checks golds.
Lamp2Outputs parse_lamp2_outputs(std::string_view text, const std::string& source);
Lamp2Outputs load_lamp2_outputs(const std::string& path);

// The gold tag index of every question, in question order. Throws nl::Error naming the
// outputs file when a question has no gold or a gold is not one of the 15 tags.
std::vector<int> lamp2_golds(const Lamp2Questions& q, const Lamp2Outputs& o);

// The distinct user ids in order of first appearance.
std::vector<std::string> lamp2_users(const Lamp2Questions& q);

// One user's profile: the profile of the user's first question (the questions of one user
// share it in our synthetic data; in LaMP each user has one question). Throws nl::Error
// when the user is absent.
const std::vector<Lamp2ProfileItem>& lamp2_user_profile(const Lamp2Questions& q, const std::string& user_id);

// Positions of `profile` items from earliest to latest (see "Time" above).
std::vector<size_t> lamp2_chronological_order(const std::vector<Lamp2ProfileItem>& profile);

// The prompt for a description with retrieved (description, tag) examples (most similar
// first), exactly as described above.
struct Lamp2Shot {
  std::string description;
  std::string tag;
};
std::string lamp2_prompt(std::string_view description, const std::vector<Lamp2Shot>& retrieved = {});
// The completion for a tag: " " + tag.
std::string lamp2_completion(std::string_view tag);

// The text after "description:" in a LaMP-2 input, trimmed; std::nullopt when absent.
std::optional<std::string> lamp2_extract_description(std::string_view input);

// The k profile items most similar (BM25 over descriptions, see bm25.h) to `description`,
// chosen among `candidates` (positions into profile). LaMP returns k items even when some
// score 0; so do we (fewer when there are fewer candidates).
std::vector<Lamp2Shot> lamp2_retrieve(const std::vector<Lamp2ProfileItem>& profile,
                                      const std::vector<size_t>& candidates, std::string_view description, int k);

// Prompt for an evaluation question: its description, with the k most similar items of its
// whole profile (all of them precede the question) when k > 0.
std::string lamp2_question_prompt(const Lamp2Question& q, int k_retrieved);

// OPPU-style training examples for one user: every profile item, in chronological order,
// becomes (prompt of its description with the k most similar EARLIER items, completion of
// its tag). Items whose tag is not one of the 15 tags are still used (the tag is what the
// user wrote), but counted in n_unknown_tags.
struct Lamp2Example {
  std::string item_id;
  std::string prompt;
  std::string completion;
};
struct Lamp2UserExamples {
  std::vector<Lamp2Example> examples;
  int64_t n_unknown_tags = 0;
};
Lamp2UserExamples build_user_examples(const std::vector<Lamp2ProfileItem>& profile, int k_retrieved);

// {"prompt": ..., "completion": ...} lines for `nightlora train --data` (no extra keys: the
// trainer rejects them). Written atomically.
void write_prompt_completion_jsonl(const std::vector<Lamp2Example>& examples, const std::string& path);

}  // namespace nl
