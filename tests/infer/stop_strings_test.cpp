// Stop strings in the text stream (generate.h): matched on text whatever tokens spell them,
// never printed, and text that may start one held back until the next token decides.
#include <gtest/gtest.h>

#include "infer_test_util.h"
#include "nightlora/infer/generate.h"
#include "nightlora/modelio/model.h"
#include "nightlora/tokenizer/tokenizer.h"

using namespace nltest;

TEST(StopStrings, FindTheEarliestAndTheLongestPartialSuffix) {
  const std::vector<std::string> stops = {"User:", "\n\n", "end"};
  EXPECT_EQ(nl::find_stop_string("abc\n\nUser: x", stops), 3u);
  EXPECT_EQ(nl::find_stop_string("the end. User:", stops), 4u);
  EXPECT_EQ(nl::find_stop_string("the end", stops, 5), std::string::npos);
  EXPECT_EQ(nl::find_stop_string("nothing here", stops), std::string::npos);
  EXPECT_EQ(nl::find_stop_string("anything", {}), std::string::npos);
  EXPECT_EQ(nl::find_stop_string("anything", {""}), std::string::npos);  // an empty stop string matches nothing
  EXPECT_EQ(nl::partial_stop_suffix("hello Use", stops), 3u);
  EXPECT_EQ(nl::partial_stop_suffix("hello\n", stops), 1u);
  EXPECT_EQ(nl::partial_stop_suffix("we en", stops), 2u);
  EXPECT_EQ(nl::partial_stop_suffix("hello", stops), 0u);
  EXPECT_EQ(nl::partial_stop_suffix("end", stops), 0u);  // a whole stop string is not a partial one
  EXPECT_EQ(nl::partial_stop_suffix("", stops), 0u);
}

// The greedy story of stories260K from "Once upon a time" continues ", there was a little
// girl" (cli_generate_test): stream its tokens through TextStreams with stop strings.
TEST(StopStrings, TextStreamReleasesTheTextBeforeTheStopStringOnly) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", path);
  auto m = nl::Model::load(path.string());
  const nl::Tokenizer& tok = *m->tokenizer;
  const std::vector<int32_t> prompt = tok.encode("Once upon a time", true);
  const std::vector<int32_t> all = tok.encode("Once upon a time, there was a little girl named Lily.", true);
  ASSERT_EQ(std::vector<int32_t>(all.begin(), all.begin() + prompt.size()), prompt);
  const std::vector<int32_t> gen(all.begin() + prompt.size(), all.end());

  auto stream = [&](std::vector<std::string> stops, std::vector<std::string>* pieces = nullptr) {
    nl::TextStream s(tok, prompt, std::move(stops));
    std::string out;
    size_t pushed = 0;
    for (int32_t id : gen) {
      const std::string piece = s.push(id);
      ++pushed;
      if (pieces) pieces->push_back(piece);
      out += piece;
      if (s.stopped()) break;
    }
    out += s.finish();
    EXPECT_EQ(out, s.text());
    return std::pair{out, s.stopped() ? pushed : 0};
  };
  EXPECT_EQ(stream({}).first, ", there was a little girl named Lily.");
  // "little" spans tokens; the text stops right before it, and at the token completing it.
  auto [cut, at] = stream({"little"});
  EXPECT_EQ(cut, ", there was a ");
  EXPECT_GT(at, 0u);
  // The earliest of several wins; a stop string that never appears changes nothing (the held
  // back "Lil" of "Lilac" is released by finish()).
  EXPECT_EQ(stream({"girl", "was"}).first, ", there ");
  EXPECT_EQ(stream({"Lilac"}).first, ", there was a little girl named Lily.");
  // Nothing that could be the start of the stop string is printed before it is decided:
  // with "a little boy", the released text never ends in a beginning of it (" a", " a lit"...),
  // and all of it comes out once "girl" rules it out.
  std::vector<std::string> pieces;
  EXPECT_EQ(stream({"a little boy"}, &pieces).first, ", there was a little girl named Lily.");
  std::string released;
  for (const std::string& p : pieces) {
    released += p;
    EXPECT_EQ(nl::partial_stop_suffix(released, {"a little boy"}), 0u) << released;
  }
}
