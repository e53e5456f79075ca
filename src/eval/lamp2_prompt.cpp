// LaMP-2 prompts (one builder for training examples and evaluation questions), BM25
// retrieval over a profile, and the OPPU-style per-user training examples.
#include <nlohmann/json.hpp>

#include "nightlora/eval/bm25.h"
#include "nightlora/eval/lamp2.h"
#include "nightlora/job/atomic_file.h"
#include "nightlora/util/error.h"

namespace nl {

std::string lamp2_prompt(std::string_view description, const std::vector<Lamp2Shot>& retrieved) {
  std::string s;
  // LaMP's profile-augmented prompt for this task (create_classification_movies_prompt),
  // without its token-budget truncation of each retrieved description.
  for (size_t i = 0; i < retrieved.size(); ++i) {
    if (i) s += ", and ";
    s += "the tag for the movie: \"" + retrieved[i].description + "\" is \"" + retrieved[i].tag + "\" ";
  }
  if (!retrieved.empty()) s += ". ";
  s += lamp2_instruction();
  s += " description: ";
  s += description;
  s += kLamp2AnswerCue;
  return s;
}

std::string lamp2_completion(std::string_view tag) {
  std::string s(1, ' ');  // (not " " + std::string(tag): GCC 12 warns, -Wrestrict, on that insert)
  return s.append(tag);
}

std::vector<Lamp2Shot> lamp2_retrieve(const std::vector<Lamp2ProfileItem>& profile, const std::vector<size_t>& candidates,
                                      std::string_view description, int k) {
  if (k <= 0 || candidates.empty()) return {};
  std::vector<std::string> corpus;
  corpus.reserve(candidates.size());
  for (size_t c : candidates) corpus.push_back(profile.at(c).description);
  const Bm25 bm25(corpus);
  std::vector<Lamp2Shot> shots;
  for (size_t r : bm25.top_n(description, static_cast<size_t>(k))) {
    const Lamp2ProfileItem& item = profile[candidates[r]];
    shots.push_back({item.description, item.tag});
  }
  return shots;
}

std::string lamp2_question_prompt(const Lamp2Question& q, int k_retrieved) {
  std::vector<size_t> all(q.profile.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  return lamp2_prompt(q.description, lamp2_retrieve(q.profile, all, q.description, k_retrieved));
}

Lamp2UserExamples build_user_examples(const std::vector<Lamp2ProfileItem>& profile, int k_retrieved) {
  Lamp2UserExamples out;
  const std::vector<size_t> order = lamp2_chronological_order(profile);
  for (size_t pos = 0; pos < order.size(); ++pos) {
    const Lamp2ProfileItem& item = profile[order[pos]];
    // Only items before this one may be shown with it: at training time as at question time,
    // the prompt holds the past, never the future.
    const std::vector<size_t> earlier(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(pos));
    out.examples.push_back({item.id, lamp2_prompt(item.description, lamp2_retrieve(profile, earlier, item.description, k_retrieved)),
                            lamp2_completion(item.tag)});
    if (lamp2_tag_index(item.tag) < 0) ++out.n_unknown_tags;
  }
  return out;
}

void write_prompt_completion_jsonl(const std::vector<Lamp2Example>& examples, const std::string& path) {
  if (examples.empty()) fail(path, "no training example to write", "the user's profile is empty");
  std::string text;
  for (const Lamp2Example& e : examples) {
    nlohmann::ordered_json line = {{"prompt", e.prompt}, {"completion", e.completion}};
    text += line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  }
  write_file_atomic(path, text);
}

}  // namespace nl
