// A synthetic LaMP-2 data set in the official format, for tests and demos on small models.
//
// Descriptions are short and use a small, simple vocabulary (words a TinyStories model
// knows): "a <adjective> story about a <thing>". Each user has hidden preferences: it uses
// only `tags_per_user` of the 15 tags, and maps every <thing> to one of them (its own
// mapping, drawn per user); with probability `noise` an item gets a random tag among the
// user's tags instead. The adjective carries no information. So a model can only learn a
// user's tags from that user's profile.
//
// Files: questions.json (each of a user's questions carries the user's whole profile and a
// "user_id"), outputs.json ({"task": "LaMP_2", "golds"}), and README.md stating the
// parameters and every user's hidden mapping. Ids: user "u<i>", profile item "u<i>-p<j>",
// question "u<i>-q<j>".
// Splits: user-based: profile items without dates, questions drawn like profile items.
// Time-based: every profile item has a "date" (one day apart, "YYYY-MM-DD" from 2020-01-01),
// profile items are listed in a shuffled order (the date, not the position, says which is
// earlier), and a user's questions are its items dated after the whole profile.
// Everything is a deterministic function of the options (own RNG stream, no platform
// distributions).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "nightlora/eval/lamp2.h"

namespace nl {

struct Lamp2SynthOptions {
  int users = 4;
  int items_per_user = 40;      // profile items per user
  int questions_per_user = 10;
  uint64_t seed = 0;
  Lamp2Split split = Lamp2Split::User;  // User or Time
  int tags_per_user = 4;        // 1..15
  double noise = 0.1;           // share of items with a random tag (among the user's tags)
};

struct Lamp2SynthUser {
  std::string id;
  std::vector<std::string> tags;                              // the tags this user uses
  std::vector<std::pair<std::string, std::string>> thing_tag; // hidden mapping thing -> tag
};

struct Lamp2Synthetic {
  Lamp2SynthOptions options;
  std::vector<Lamp2SynthUser> users;
  std::string questions_json;
  std::string outputs_json;
  std::string readme;
};

// Throws nl::Error for out-of-range options.
Lamp2Synthetic make_lamp2_synthetic(const Lamp2SynthOptions& opt);

// Writes DIR/questions.json, DIR/outputs.json and DIR/README.md (creating DIR), atomically.
void write_lamp2_synthetic(const Lamp2Synthetic& s, const std::string& dir);

}  // namespace nl
