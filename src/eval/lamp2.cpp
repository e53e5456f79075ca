// LaMP-2 files: loading with precise errors, users, chronology. Prompts and examples are in
// lamp2_prompt.cpp.
#include "nightlora/eval/lamp2.h"

#include <algorithm>
#include <numeric>
#include <unordered_map>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "nightlora/job/atomic_file.h"
#include "nightlora/util/error.h"

namespace nl {

using json = nlohmann::json;

const std::array<std::string, kLamp2NumTags>& lamp2_tags() {
  static const std::array<std::string, kLamp2NumTags> tags = {
      "sci-fi",  "based on a book", "comedy",  "action",            "twist ending",
      "dystopia", "dark comedy",    "classic", "psychology",        "fantasy",
      "romance", "thought-provoking", "social commentary", "violence", "true story"};
  return tags;
}

int lamp2_tag_index(std::string_view tag) {
  const auto& tags = lamp2_tags();
  for (int i = 0; i < kLamp2NumTags; ++i)
    if (tags[i] == tag) return i;
  return -1;
}

const std::string& lamp2_instruction() {
  static const std::string text = [] {
    std::string s =
        "Which tag does this movie relate to among the following tags? Just answer with the tag name without "
        "further explanation. tags: [";
    const auto& tags = lamp2_tags();
    for (int i = 0; i < kLamp2NumTags; ++i) s += (i ? ", " : "") + tags[i];
    return s + "]";
  }();
  return text;
}

Lamp2Split parse_lamp2_split(const std::string& s) {
  if (s == "auto") return Lamp2Split::Auto;
  if (s == "user") return Lamp2Split::User;
  if (s == "time") return Lamp2Split::Time;
  fail("--split", "unknown split '" + s + "'",
       "use 'user' (user-based: profiles without order), 'time' (time-based: dated profile items) or 'auto'");
}

const char* lamp2_split_name(Lamp2Split s) {
  switch (s) {
    case Lamp2Split::Auto: return "auto";
    case Lamp2Split::User: return "user";
    case Lamp2Split::Time: return "time";
  }
  return "?";
}

const std::string* Lamp2Outputs::find(const std::string& id) const {
  for (const auto& [gid, out] : golds)
    if (gid == id) return &out;
  return nullptr;
}

namespace {

// Parses a whole JSON text, turning nlohmann's parse error into "source: malformed JSON at
// byte N: ...".
json parse_json_text(std::string_view text, const std::string& source, const std::string& hint) {
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::parse_error& ex) {
    std::string what = ex.what();
    // nlohmann's message starts with "[json.exception.parse_error.101] parse error at ...".
    auto pos = what.find("] ");
    fail(source, "malformed JSON at byte " + std::to_string(ex.byte) + ": " +
                     (pos == std::string::npos ? what : what.substr(pos + 2)),
         hint);
  } catch (const json::exception& ex) {
    // Valid syntax nlohmann cannot represent, e.g. a number too large for a double (1e999).
    std::string what = ex.what();
    auto pos = what.find("] ");
    fail(source, "unreadable JSON: " + (pos == std::string::npos ? what : what.substr(pos + 2)), hint);
  }
}

const char* kQuestionsHint =
    "a LaMP-2 questions file is a JSON list of {\"id\", \"input\", \"profile\": [{\"id\", \"tag\", \"description\"}]}";
const char* kOutputsHint = "a LaMP-2 outputs file is {\"task\": ..., \"golds\": [{\"id\", \"output\"}]}";

// Ids are strings in LaMP; accept integers too (some processed copies write them as numbers).
std::string get_id(const json& obj, const std::string& path, const std::string& source, const char* hint) {
  auto it = obj.find("id");
  if (it == obj.end()) fail(source, path + ": missing \"id\"", hint);
  std::string id;
  if (it->is_string())
    id = it->get<std::string>();
  else if (it->is_number_integer() || it->is_number_unsigned())
    id = it->dump();
  else
    fail(source, path + ".id: expected a string, found " + std::string(it->type_name()), hint);
  if (id.empty()) fail(source, path + ".id: empty id", "every question, profile item and gold needs an id");
  return id;
}

std::string get_string(const json& obj, const char* key, const std::string& path, const std::string& source,
                       const char* hint) {
  auto it = obj.find(key);
  if (it == obj.end()) fail(source, path + ": missing \"" + key + "\"", hint);
  if (!it->is_string())
    fail(source, path + "." + key + ": expected a string, found " + std::string(it->type_name()), hint);
  return it->get<std::string>();
}

// "2021-03-04" -> {2021, 3, 4}; "17" or 17 -> {17}. Anything else: nullopt.
std::optional<std::vector<int64_t>> parse_date(const json& v) {
  if (v.is_number_integer()) return std::vector<int64_t>{v.get<int64_t>()};
  if (v.is_number_unsigned()) {
    if (v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
    return std::vector<int64_t>{static_cast<int64_t>(v.get<uint64_t>())};
  }
  if (!v.is_string()) return std::nullopt;
  const std::string s = v.get<std::string>();
  std::vector<int64_t> parts;
  size_t i = 0;
  while (true) {
    size_t start = i;
    int64_t value = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      if (value > (INT64_MAX - 9) / 10) return std::nullopt;
      value = value * 10 + (s[i] - '0');
      ++i;
    }
    if (i == start) return std::nullopt;
    parts.push_back(value);
    if (i == s.size()) return parts;
    if (s[i] != '-') return std::nullopt;
    ++i;
  }
}

Lamp2ProfileItem parse_profile_item(const json& p, const std::string& path, const std::string& source) {
  if (!p.is_object()) fail(source, path + ": expected an object, found " + std::string(p.type_name()), kQuestionsHint);
  Lamp2ProfileItem item;
  item.id = get_id(p, path, source, kQuestionsHint);
  item.tag = get_string(p, "tag", path, source, kQuestionsHint);
  item.description = get_string(p, "description", path, source, kQuestionsHint);
  if (auto it = p.find("date"); it != p.end()) {
    item.date = parse_date(*it);
    if (!item.date)
      fail(source, path + ".date: " + it->dump() + " is not a date",
           "give dates as \"YYYY-MM-DD\" (integers joined by '-') or as an integer");
    item.date_text = it->is_string() ? it->get<std::string>() : it->dump();
  }
  return item;
}

}  // namespace

std::optional<std::string> lamp2_extract_description(std::string_view input) {
  const std::string_view key = "description:";
  const size_t at = input.find(key);
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view rest = input.substr(at + key.size());
  // Python's str.strip() on ASCII whitespace.
  const char* ws = " \t\n\r\f\v";
  const size_t b = rest.find_first_not_of(ws);
  if (b == std::string_view::npos) return std::string();
  const size_t e = rest.find_last_not_of(ws);
  return std::string(rest.substr(b, e - b + 1));
}

Lamp2Questions parse_lamp2_questions(std::string_view text, const std::string& source, Lamp2Split split) {
  const json root = parse_json_text(text, source, kQuestionsHint);
  if (!root.is_array()) fail(source, "expected a JSON list of questions, found " + std::string(root.type_name()), kQuestionsHint);
  if (root.empty()) fail(source, "the file holds no question", kQuestionsHint);

  Lamp2Questions out;
  out.source = source;
  std::unordered_set<std::string> seen;
  bool all_dated = true, any_item = false;
  for (size_t i = 0; i < root.size(); ++i) {
    const json& q = root[i];
    const std::string path = "[" + std::to_string(i) + "]";
    if (!q.is_object()) fail(source, path + ": expected a question object, found " + std::string(q.type_name()), kQuestionsHint);
    Lamp2Question question;
    question.id = get_id(q, path, source, kQuestionsHint);
    if (!seen.insert(question.id).second)
      fail(source, path + ".id: question id \"" + question.id + "\" appears twice", "question ids must be unique");
    question.input = get_string(q, "input", path, source, kQuestionsHint);
    std::optional<std::string> desc = lamp2_extract_description(question.input);
    if (!desc)
      fail(source, path + ".input: no \"description:\" in the input",
           "a LaMP-2 input ends with \"description: <the movie's description>\"");
    question.description = *desc;
    question.user_id = question.id;
    if (auto it = q.find("user_id"); it != q.end()) {
      if (it->is_string())
        question.user_id = it->get<std::string>();
      else if (it->is_number_integer() || it->is_number_unsigned())
        question.user_id = it->dump();
      else
        fail(source, path + ".user_id: expected a string, found " + std::string(it->type_name()));
      if (question.user_id.empty()) fail(source, path + ".user_id: empty user id");
    }
    auto prof = q.find("profile");
    if (prof == q.end()) fail(source, path + ": missing \"profile\"", kQuestionsHint);
    if (!prof->is_array())
      fail(source, path + ".profile: expected a list, found " + std::string(prof->type_name()), kQuestionsHint);
    std::unordered_set<std::string> item_ids;
    for (size_t j = 0; j < prof->size(); ++j) {
      const std::string ppath = path + ".profile[" + std::to_string(j) + "]";
      Lamp2ProfileItem item = parse_profile_item((*prof)[j], ppath, source);
      if (!item_ids.insert(item.id).second)
        fail(source, ppath + ".id: profile item id \"" + item.id + "\" appears twice in this profile",
             "profile item ids must be unique within a profile");
      any_item = true;
      if (!item.date) {
        all_dated = false;
        if (split == Lamp2Split::Time)
          fail(source, ppath + ": no \"date\"",
               "the time-based split orders a profile by date: every profile item needs one (or use --split user)");
      }
      question.profile.push_back(std::move(item));
    }
    out.questions.push_back(std::move(question));
  }
  out.split = split != Lamp2Split::Auto ? split : (any_item && all_dated ? Lamp2Split::Time : Lamp2Split::User);
  return out;
}

Lamp2Questions load_lamp2_questions(const std::string& path, Lamp2Split split) {
  return parse_lamp2_questions(read_file(path), path, split);
}

Lamp2Outputs parse_lamp2_outputs(std::string_view text, const std::string& source) {
  const json root = parse_json_text(text, source, kOutputsHint);
  if (!root.is_object()) fail(source, "expected a JSON object, found " + std::string(root.type_name()), kOutputsHint);
  Lamp2Outputs out;
  out.source = source;
  out.task = get_string(root, "task", "(top level)", source, kOutputsHint);
  auto golds = root.find("golds");
  if (golds == root.end()) fail(source, "missing \"golds\"", kOutputsHint);
  if (!golds->is_array()) fail(source, "golds: expected a list, found " + std::string(golds->type_name()), kOutputsHint);
  std::unordered_set<std::string> seen;
  for (size_t i = 0; i < golds->size(); ++i) {
    const json& g = (*golds)[i];
    const std::string path = "golds[" + std::to_string(i) + "]";
    if (!g.is_object()) fail(source, path + ": expected an object, found " + std::string(g.type_name()), kOutputsHint);
    std::string id = get_id(g, path, source, kOutputsHint);
    if (!seen.insert(id).second) fail(source, path + ".id: id \"" + id + "\" appears twice", "ids must be unique");
    out.golds.emplace_back(std::move(id), get_string(g, "output", path, source, kOutputsHint));
  }
  return out;
}

Lamp2Outputs load_lamp2_outputs(const std::string& path) { return parse_lamp2_outputs(read_file(path), path); }

std::vector<int> lamp2_golds(const Lamp2Questions& q, const Lamp2Outputs& o) {
  std::unordered_map<std::string, const std::string*> by_id;
  for (const auto& [id, out] : o.golds) by_id[id] = &out;
  std::vector<int> golds;
  for (const Lamp2Question& question : q.questions) {
    auto it = by_id.find(question.id);
    if (it == by_id.end())
      fail(o.source, "no gold output for question \"" + question.id + "\" of " + q.source,
           "give the outputs file that belongs to these questions");
    // LaMP strips outputs before matching them against the labels.
    std::string gold = *it->second;
    const char* ws = " \t\n\r\f\v";
    const size_t b = gold.find_first_not_of(ws);
    gold = b == std::string::npos ? std::string() : gold.substr(b, gold.find_last_not_of(ws) - b + 1);
    const int idx = lamp2_tag_index(gold);
    if (idx < 0)
      fail(o.source, "the gold output \"" + *it->second + "\" of question \"" + question.id + "\" is not a LaMP-2 tag",
           "gold outputs must be one of the 15 tags");
    golds.push_back(idx);
  }
  return golds;
}

std::vector<std::string> lamp2_users(const Lamp2Questions& q) {
  std::vector<std::string> users;
  std::unordered_set<std::string> seen;
  for (const Lamp2Question& question : q.questions)
    if (seen.insert(question.user_id).second) users.push_back(question.user_id);
  return users;
}

const std::vector<Lamp2ProfileItem>& lamp2_user_profile(const Lamp2Questions& q, const std::string& user_id) {
  for (const Lamp2Question& question : q.questions)
    if (question.user_id == user_id) return question.profile;
  fail(q.source, "no question of user \"" + user_id + "\"",
       "user ids are the questions' \"user_id\" (or their \"id\" when there is none)");
}

std::vector<size_t> lamp2_chronological_order(const std::vector<Lamp2ProfileItem>& profile) {
  std::vector<size_t> order(profile.size());
  std::iota(order.begin(), order.end(), size_t{0});
  const bool all_dated = std::all_of(profile.begin(), profile.end(), [](const Lamp2ProfileItem& p) { return p.date.has_value(); });
  if (all_dated)  // lexicographic integer tuples, as LaMP's recency retriever sorts; ties keep file order
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return *profile[a].date < *profile[b].date; });
  return order;
}

}  // namespace nl
