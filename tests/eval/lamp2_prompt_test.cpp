// The prompt builder (exact strings) and the OPPU-style per-user examples (only EARLIER
// items are retrieved into an item's prompt).
#include <gtest/gtest.h>

#include "nightlora/eval/lamp2.h"
#include "nightlora/util/error.h"
#include "test_util.h"

namespace {

const std::string kInstruction =
    "Which tag does this movie relate to among the following tags? Just answer with the tag name without further "
    "explanation. tags: [sci-fi, based on a book, comedy, action, twist ending, dystopia, dark comedy, classic, "
    "psychology, fantasy, romance, thought-provoking, social commentary, violence, true story]";

TEST(Lamp2Prompt, ExactStringWithoutRetrieval) {
  EXPECT_EQ(nl::lamp2_prompt("a happy story about a dog"), kInstruction + " description: a happy story about a dog\nTag:");
  EXPECT_EQ(nl::lamp2_completion("dark comedy"), " dark comedy");
}

TEST(Lamp2Prompt, ExactStringWithRetrievedItems) {
  // LaMP's own profile-augmented form: `the tag for the movie: "<d>" is "<t>" ` joined by
  // ", and ", then ". " and the task input.
  EXPECT_EQ(nl::lamp2_prompt("a sad story about a cat", {{"a big story about a cat", "romance"}, {"a cat", "classic"}}),
            "the tag for the movie: \"a big story about a cat\" is \"romance\" , and the tag for the movie: \"a cat\" is "
            "\"classic\" . " + kInstruction + " description: a sad story about a cat\nTag:");
}

TEST(Lamp2Prompt, ExtractsTheDescriptionAsLaMPDoes) {
  EXPECT_EQ(nl::lamp2_extract_description(kInstruction + " description:  A film.\n"), "A film.");
  EXPECT_EQ(nl::lamp2_extract_description("description:"), "");
  EXPECT_FALSE(nl::lamp2_extract_description("no key").has_value());
  // The question prompt rebuilds the same text a training example has.
  nl::Lamp2Question q;
  q.description = *nl::lamp2_extract_description(kInstruction + " description: a big story about a dog");
  EXPECT_EQ(nl::lamp2_question_prompt(q, 0), nl::lamp2_prompt("a big story about a dog"));
}

std::vector<nl::Lamp2ProfileItem> profile_of(const std::vector<std::pair<std::string, std::string>>& items) {
  std::vector<nl::Lamp2ProfileItem> p;
  for (size_t i = 0; i < items.size(); ++i) p.push_back({"p" + std::to_string(i), items[i].second, items[i].first, {}, ""});
  return p;
}

TEST(Lamp2Prompt, UserExamplesRetrieveOnlyEarlierItems) {
  const auto profile = profile_of({{"dragon castle knight", "comedy"},
                                   {"robot spaceship laser", "sci-fi"},
                                   {"pirate ship gold", "romance"},
                                   {"dragon egg", "action"},
                                   {"robot dragon", "fantasy"}});
  const nl::Lamp2UserExamples ex = nl::build_user_examples(profile, 1);
  ASSERT_EQ(ex.examples.size(), 5u);
  EXPECT_EQ(ex.n_unknown_tags, 0);
  // The first item has nothing before it.
  EXPECT_EQ(ex.examples[0].prompt, nl::lamp2_prompt("dragon castle knight"));
  EXPECT_EQ(ex.examples[0].completion, " comedy");
  EXPECT_EQ(ex.examples[0].item_id, "p0");
  // "dragon egg" among the 3 earlier items: only the castle shares a word (idf ln(2.5/1.5)).
  EXPECT_EQ(ex.examples[3].prompt, nl::lamp2_prompt("dragon egg", {{"dragon castle knight", "comedy"}}));
  // "robot dragon" among 4 earlier items: "dragon" is in 2 of 4 (idf ln(2.5/2.5) = 0), "robot"
  // in 1 (idf ln(3.5/1.5)): the spaceship wins. The item itself is never shown.
  EXPECT_EQ(ex.examples[4].prompt, nl::lamp2_prompt("robot dragon", {{"robot spaceship laser", "sci-fi"}}));
  // k = 2 on the last item: best first, then (all others score 0) the latest earlier item.
  EXPECT_EQ(nl::build_user_examples(profile, 2).examples[4].prompt,
            nl::lamp2_prompt("robot dragon", {{"robot spaceship laser", "sci-fi"}, {"dragon egg", "action"}}));
  // k = 0: no retrieval at all.
  EXPECT_EQ(nl::build_user_examples(profile, 0).examples[4].prompt, nl::lamp2_prompt("robot dragon"));
}

TEST(Lamp2Prompt, TimeOrderComesFromDates) {
  auto profile = profile_of({{"a robot dog", "fantasy"}, {"a big dog", "action"}});
  profile[0].date = std::vector<int64_t>{2020, 2, 1};  // listed first, but later
  profile[1].date = std::vector<int64_t>{2020, 1, 1};
  const nl::Lamp2UserExamples ex = nl::build_user_examples(profile, 3);
  ASSERT_EQ(ex.examples.size(), 2u);
  EXPECT_EQ(ex.examples[0].item_id, "p1");
  EXPECT_EQ(ex.examples[0].prompt, nl::lamp2_prompt("a big dog"));
  EXPECT_EQ(ex.examples[1].prompt, nl::lamp2_prompt("a robot dog", {{"a big dog", "action"}}));
}

TEST(Lamp2Prompt, UnknownTagsAreCounted) {
  EXPECT_EQ(nl::build_user_examples(profile_of({{"x", "horror"}, {"y", "comedy"}}), 0).n_unknown_tags, 1);
}

TEST(Lamp2Prompt, WritesTrainerJsonl) {
  nltest::TempDir dir;
  const auto ex = nl::build_user_examples(profile_of({{"a \"quoted\" dog", "comedy"}}), 0);
  nl::write_prompt_completion_jsonl(ex.examples, (dir / "train.jsonl").string());
  EXPECT_EQ(nltest::read_text(dir / "train.jsonl"),
            "{\"prompt\":\"" + kInstruction + " description: a \\\"quoted\\\" dog\\nTag:\",\"completion\":\" comedy\"}\n");
  EXPECT_THROW(nl::write_prompt_completion_jsonl({}, (dir / "empty.jsonl").string()), nl::Error);
}

}  // namespace
