// Step 1 of a nightly run: one user's profile split into training examples and held-out items.
#include <algorithm>

#include <nlohmann/json.hpp>

#include "nightlora/eval/nightly.h"
#include "nightlora/util/error.h"

namespace nl {

NightlyData nightly_split_user(const Lamp2Questions& q, const std::string& user, int holdout, int k_retrieved) {
  const std::vector<Lamp2ProfileItem>& profile = lamp2_user_profile(q, user);
  const std::vector<size_t> order = lamp2_chronological_order(profile);
  const int64_t n = static_cast<int64_t>(order.size());
  if (holdout < 0) fail("--holdout " + std::to_string(holdout), "must not be negative");
  // The latest items are held out: the adapter is judged on what the user did after the data
  // it learned from, as it will be used.
  const int64_t n_hold = holdout > 0 ? holdout : std::max<int64_t>(1, n / 5);
  if (n - n_hold < 1)
    fail(q.source, "user " + user + " has " + std::to_string(n) + " profile item(s), too few to hold out " +
                       std::to_string(n_hold) + " and train on the rest",
         "give a smaller --holdout or a user with a longer profile");
  NightlyData d;
  std::vector<Lamp2ProfileItem> train_items;
  for (int64_t i = 0; i < n - n_hold; ++i) train_items.push_back(profile[order[static_cast<size_t>(i)]]);
  d.train = build_user_examples(train_items, k_retrieved).examples;
  d.heldout.source = "held-out items of user " + user;
  d.heldout.split = q.split;
  d.heldout_golds.source = d.heldout.source;
  d.heldout_golds.task = "LaMP_2";
  for (int64_t i = n - n_hold; i < n; ++i) {
    const Lamp2ProfileItem& it = profile[order[static_cast<size_t>(i)]];
    // An item the user tagged with something outside the 15 tags cannot be scored.
    if (lamp2_tag_index(it.tag) < 0) {
      ++d.n_unknown_tags;
      continue;
    }
    Lamp2Question hq;
    hq.id = it.id;
    hq.user_id = user;
    hq.description = it.description;
    hq.input = lamp2_instruction() + " description: " + it.description;
    hq.profile = train_items;
    d.heldout.questions.push_back(std::move(hq));
    d.heldout_golds.golds.emplace_back(it.id, it.tag);
  }
  if (d.heldout.questions.empty())
    fail(q.source, "none of user " + user + "'s held-out items has one of the 15 LaMP-2 tags",
         "give a larger --holdout");
  return d;
}

std::string lamp2_questions_json(const Lamp2Questions& q) {
  nlohmann::json all = nlohmann::json::array();
  for (const Lamp2Question& x : q.questions) {
    nlohmann::json profile = nlohmann::json::array();
    for (const Lamp2ProfileItem& p : x.profile) {
      nlohmann::json item = {{"id", p.id}, {"tag", p.tag}, {"description", p.description}};
      if (!p.date_text.empty()) item["date"] = p.date_text;
      profile.push_back(std::move(item));
    }
    all.push_back({{"id", x.id}, {"user_id", x.user_id}, {"input", x.input}, {"profile", std::move(profile)}});
  }
  return all.dump(1) + "\n";
}

std::string lamp2_outputs_json(const Lamp2Outputs& o) {
  nlohmann::json golds = nlohmann::json::array();
  for (const auto& [id, out] : o.golds) golds.push_back({{"id", id}, {"output", out}});
  return nlohmann::json({{"task", o.task.empty() ? "LaMP_2" : o.task}, {"golds", std::move(golds)}}).dump(1) + "\n";
}

}  // namespace nl
