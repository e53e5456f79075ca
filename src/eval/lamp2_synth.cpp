#include "nightlora/eval/lamp2_synth.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <random>

#include <nlohmann/json.hpp>

#include "nightlora/job/atomic_file.h"
#include "nightlora/util/error.h"

namespace nl {

namespace {

// Words a TinyStories model knows, so prompts stay short and in-distribution.
const std::vector<std::string>& things() {
  static const std::vector<std::string> v = {"dog",   "cat",    "ball",  "tree",    "bird",  "boat",  "car",   "cake",
                                             "king",  "queen",  "dragon", "robot",  "monster", "fish", "flower", "train",
                                             "house", "bear",   "star",  "moon",    "park",  "bunny", "frog",  "truck"};
  return v;
}
const std::vector<std::string>& adjectives() {
  static const std::vector<std::string> v = {"little", "big", "happy", "sad", "funny", "long", "short", "good"};
  return v;
}

// Our own draws from raw mt19937_64 output: the same data on every platform for a seed.
class Draw {
 public:
  explicit Draw(uint64_t seed) : rng_(seed) {}
  double uniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }  // [0, 1)
  size_t index(size_t n) { return std::min(n - 1, static_cast<size_t>(uniform() * static_cast<double>(n))); }
  template <class T>
  void shuffle(std::vector<T>& v) {  // Fisher-Yates
    for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[index(i)]);
  }

 private:
  std::mt19937_64 rng_;
};

// Days since 1970-01-01 -> "YYYY-MM-DD" (Howard Hinnant's civil_from_days).
std::string date_text(int64_t days) {
  days += 719468;
  const int64_t era = (days >= 0 ? days : days - 146096) / 146097;
  const int64_t doe = days - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  int64_t y = yoe + era * 400;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  const int64_t d = doy - (153 * mp + 2) / 5 + 1;
  const int64_t m = mp < 10 ? mp + 3 : mp - 9;
  if (m <= 2) ++y;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04lld-%02lld-%02lld", static_cast<long long>(y), static_cast<long long>(m),
                static_cast<long long>(d));
  return buf;
}
constexpr int64_t kDay2020_01_01 = 18262;

struct Item {
  std::string description, tag, date;
};

}  // namespace

Lamp2Synthetic make_lamp2_synthetic(const Lamp2SynthOptions& opt) {
  auto check = [](bool ok, const std::string& what, const std::string& hint) {
    if (!ok) fail("make-lamp2", what, hint);
  };
  check(opt.users >= 1 && opt.users <= 100000, "--users must be in 1..100000", "");
  check(opt.items_per_user >= 1 && opt.items_per_user <= 100000, "--items-per-user must be in 1..100000", "");
  check(opt.questions_per_user >= 1 && opt.questions_per_user <= 100000, "--questions-per-user must be in 1..100000", "");
  check(static_cast<int64_t>(opt.users) * (opt.items_per_user + opt.questions_per_user) <= 10'000'000,
        "the data set would hold more than 10 million items", "use fewer users or items");
  check(opt.tags_per_user >= 1 && opt.tags_per_user <= kLamp2NumTags, "tags per user must be in 1..15", "");
  check(opt.noise >= 0 && opt.noise <= 1, "noise must be in [0, 1]", "");
  check(opt.split == Lamp2Split::User || opt.split == Lamp2Split::Time, "the split must be 'user' or 'time'", "");

  Lamp2Synthetic s;
  s.options = opt;
  Draw draw(opt.seed);
  nlohmann::ordered_json questions = nlohmann::ordered_json::array();
  nlohmann::ordered_json golds = nlohmann::ordered_json::array();
  const auto& tags = lamp2_tags();

  for (int u = 0; u < opt.users; ++u) {
    Lamp2SynthUser user;
    user.id = "u" + std::to_string(u);
    std::vector<size_t> tag_order(kLamp2NumTags);
    for (size_t t = 0; t < tag_order.size(); ++t) tag_order[t] = t;
    draw.shuffle(tag_order);
    for (int t = 0; t < opt.tags_per_user; ++t) user.tags.push_back(tags[tag_order[static_cast<size_t>(t)]]);
    for (const std::string& thing : things()) user.thing_tag.emplace_back(thing, user.tags[draw.index(user.tags.size())]);

    // The user's items in time order: the profile first, then the questions.
    const int n_items = opt.items_per_user + opt.questions_per_user;
    std::vector<Item> items;
    for (int i = 0; i < n_items; ++i) {
      const size_t thing = draw.index(things().size());
      const std::string& adj = adjectives()[draw.index(adjectives().size())];
      Item it;
      it.description = "a " + adj + " story about a " + things()[thing];
      it.tag = user.thing_tag[thing].second;
      if (draw.uniform() < opt.noise) it.tag = user.tags[draw.index(user.tags.size())];
      it.date = date_text(kDay2020_01_01 + i);
      items.push_back(std::move(it));
    }

    std::vector<size_t> listed(static_cast<size_t>(opt.items_per_user));
    for (size_t i = 0; i < listed.size(); ++i) listed[i] = i;
    if (opt.split == Lamp2Split::Time) draw.shuffle(listed);  // the dates, not the positions, give the order
    nlohmann::ordered_json profile = nlohmann::ordered_json::array();
    for (size_t i : listed) {
      nlohmann::ordered_json p = {{"id", user.id + "-p" + std::to_string(i)},
                                  {"tag", items[i].tag},
                                  {"description", items[i].description}};
      if (opt.split == Lamp2Split::Time) p["date"] = items[i].date;
      profile.push_back(std::move(p));
    }
    for (int q = 0; q < opt.questions_per_user; ++q) {
      const Item& it = items[static_cast<size_t>(opt.items_per_user + q)];
      const std::string id = user.id + "-q" + std::to_string(q);
      questions.push_back({{"id", id},
                           {"input", lamp2_instruction() + " description: " + it.description},
                           {"profile", profile},
                           {"user_id", user.id}});
      golds.push_back({{"id", id}, {"output", it.tag}});
    }
    s.users.push_back(std::move(user));
  }
  s.questions_json = questions.dump(1) + "\n";
  s.outputs_json = nlohmann::ordered_json({{"task", "LaMP_2"}, {"golds", golds}}).dump(1) + "\n";

  // The README: what the data is and every user's hidden preferences.
  char noise_buf[32];
  std::snprintf(noise_buf, sizeof noise_buf, "%g", opt.noise);
  const std::string noise = noise_buf;
  std::string r = "# Synthetic LaMP-2 data (nightlora make-lamp2)\n\n";
  r += "Made by `nightlora make-lamp2 --users " + std::to_string(opt.users) + " --items-per-user " +
       std::to_string(opt.items_per_user) + " --questions-per-user " + std::to_string(opt.questions_per_user) +
       " --seed " + std::to_string(opt.seed) + " --split " + lamp2_split_name(opt.split) + " --tags-per-user " +
       std::to_string(opt.tags_per_user) + " --noise " + noise + "`.\n\n";
  r += "- `questions.json`: LaMP-2 questions in the official format; every question of a user carries the user's whole "
       "profile and a `user_id`.\n- `outputs.json`: the gold tags, `{\"task\": \"LaMP_2\", \"golds\": [...]}`.\n\n";
  r += "Descriptions are \"a <adjective> story about a <thing>\". Each user uses only its own " +
       std::to_string(opt.tags_per_user) +
       " tags and maps every thing to one of them (the table below); the adjective carries no information. With "
       "probability " + noise +
       " an item's tag is instead drawn at random among the user's tags, so even a perfect model of a user does not "
       "reach accuracy 1.\n\n";
  if (opt.split == Lamp2Split::Time)
    r += "Time-based split: profile items carry dates (one day apart from 2020-01-01) and are listed in a shuffled "
         "order; a user's questions are its items dated after its whole profile.\n\n";
  else
    r += "User-based split: profile items have no dates; questions are drawn like profile items.\n\n";
  r += "## Hidden preferences\n\n";
  for (const Lamp2SynthUser& u : s.users) {
    r += "### " + u.id + "\n\ntags used: ";
    for (size_t t = 0; t < u.tags.size(); ++t) r += (t ? ", " : "") + u.tags[t];
    r += "\n\n| thing | tag |\n|---|---|\n";
    for (const auto& [thing, tag] : u.thing_tag) r += "| " + thing + " | " + tag + " |\n";
    r += "\n";
  }
  s.readme = std::move(r);
  return s;
}

void write_lamp2_synthetic(const Lamp2Synthetic& s, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) fail(dir, "cannot create the folder: " + ec.message(), "give a writable --out folder");
  write_file_atomic(dir + "/questions.json", s.questions_json);
  write_file_atomic(dir + "/outputs.json", s.outputs_json);
  write_file_atomic(dir + "/README.md", s.readme);
}

}  // namespace nl
