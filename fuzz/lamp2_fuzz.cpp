// Fuzz target: LaMP-2 files (`nightlora lamp2 ... --questions Q --outputs O`, and a user's
// data in `nightly`): the questions file and the outputs (golds) file, in LaMP's JSON format.
// Input: one byte for the split (auto / user / time), the questions text, optionally
// "\n----\n" and the outputs text. Whatever parses is then used as the evaluation and the
// nightly job use it: users and their profiles, chronological order, retrieval and prompts
// for every question, each user's training examples, and the golds of the questions.
#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "nightlora/eval/lamp2.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static constexpr nl::Lamp2Split kSplits[] = {nl::Lamp2Split::Auto, nl::Lamp2Split::User, nl::Lamp2Split::Time};
  const nl::Lamp2Split split = kSplits[data[0] % 3];
  const auto parts = nlfuzz::split_parts(std::string_view(reinterpret_cast<const char*>(data + 1), size - 1), 2);
  nlfuzz::run_guarded([&] {
    const nl::Lamp2Questions q = nl::parse_lamp2_questions(parts[0], "questions.json", split);
    for (const std::string& user : nl::lamp2_users(q)) {
      const auto& profile = nl::lamp2_user_profile(q, user);
      (void)nl::lamp2_chronological_order(profile);
      (void)nl::build_user_examples(profile, 2);
    }
    for (const nl::Lamp2Question& question : q.questions) (void)nl::lamp2_question_prompt(question, 3);
    if (parts.size() > 1) {
      const nl::Lamp2Outputs o = nl::parse_lamp2_outputs(parts[1], "outputs.json");
      (void)nl::lamp2_golds(q, o);
    }
  });
  if (parts.size() > 1) nlfuzz::run_guarded([&] { (void)nl::parse_lamp2_outputs(parts[1], "outputs.json"); });
  return 0;
}
