// Malformed and hostile LaMP-2 files: every one is an nl::Error naming the file and the
// position (byte offset for broken JSON, the JSON path otherwise), never a crash.
// (Also built with ASan/UBSan: tests/*/*hostile*.cpp.)
#include <string>

#include <gtest/gtest.h>

#include "nightlora/eval/lamp2.h"
#include "nightlora/util/error.h"

namespace {

std::string error_of_questions(const std::string& text, nl::Lamp2Split split = nl::Lamp2Split::Auto) {
  try {
    nl::parse_lamp2_questions(text, "q.json", split);
  } catch (const nl::Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::string error_of_outputs(const std::string& text) {
  try {
    nl::parse_lamp2_outputs(text, "o.json");
  } catch (const nl::Error& e) {
    return e.what();
  }
  return "(no error)";
}

const std::string kInput = "Which tag ... description: a film";

std::string one_question(const std::string& profile_item) {
  return R"([{"id": "1", "input": ")" + kInput + R"(", "profile": [)" + profile_item + "]}]";
}

#define EXPECT_HAS(haystack, needle) EXPECT_NE((haystack).find(needle), std::string::npos) << (haystack)

TEST(Lamp2Hostile, MalformedJsonNamesTheByte) {
  const std::string e = error_of_questions(R"([{"id": "1", "input": "x" "profile": []}])");
  EXPECT_HAS(e, "q.json: malformed JSON at byte 35");
  EXPECT_HAS(error_of_questions(""), "q.json: malformed JSON at byte 1");
  EXPECT_HAS(error_of_questions("[{\"id\": \"1\"}"), "malformed JSON");
  EXPECT_HAS(error_of_questions(std::string("[\"\xff\"]")), "malformed JSON");  // invalid UTF-8
  EXPECT_HAS(error_of_outputs("{\"task\": "), "o.json: malformed JSON at byte");
}

TEST(Lamp2Hostile, WrongShapes) {
  EXPECT_HAS(error_of_questions("{}"), "q.json: expected a JSON list of questions, found object");
  EXPECT_HAS(error_of_questions("[]"), "q.json: the file holds no question");
  EXPECT_HAS(error_of_questions("[3]"), "q.json: [0]: expected a question object, found number");
  EXPECT_HAS(error_of_questions(R"([{"input": "description: x", "profile": []}])"), "[0]: missing \"id\"");
  EXPECT_HAS(error_of_questions(R"([{"id": "", "input": "description: x", "profile": []}])"), "[0].id: empty id");
  EXPECT_HAS(error_of_questions(R"([{"id": [1], "input": "description: x", "profile": []}])"),
             "[0].id: expected a string, found array");
  EXPECT_HAS(error_of_questions(R"([{"id": "1", "profile": []}])"), "[0]: missing \"input\"");
  EXPECT_HAS(error_of_questions(R"([{"id": "1", "input": 5, "profile": []}])"), "[0].input: expected a string, found number");
  EXPECT_HAS(error_of_questions(R"([{"id": "1", "input": "no key here", "profile": []}])"),
             "[0].input: no \"description:\" in the input");
  EXPECT_HAS(error_of_questions(R"([{"id": "1", "input": "description: x"}])"), "[0]: missing \"profile\"");
  EXPECT_HAS(error_of_questions(R"([{"id": "1", "input": "description: x", "profile": {}}])"),
             "[0].profile: expected a list, found object");
  EXPECT_HAS(error_of_questions(R"([{"id": "1", "input": "description: x", "profile": [], "user_id": null}])"),
             "[0].user_id: expected a string, found null");
}

TEST(Lamp2Hostile, BadProfileItems) {
  EXPECT_HAS(error_of_questions(one_question("7")), "q.json: [0].profile[0]: expected an object, found number");
  EXPECT_HAS(error_of_questions(one_question(R"({"id": "a", "description": "d"})")), "[0].profile[0]: missing \"tag\"");
  EXPECT_HAS(error_of_questions(one_question(R"({"id": "a", "tag": "comedy"})")), "[0].profile[0]: missing \"description\"");
  EXPECT_HAS(error_of_questions(one_question(R"({"id": "a", "tag": null, "description": "d"})")),
             "[0].profile[0].tag: expected a string, found null");
  EXPECT_HAS(error_of_questions(one_question(R"({"id": "a", "tag": "comedy", "description": "d"}, {"id": "a", "tag": "comedy", "description": "e"})")),
             "[0].profile[1].id: profile item id \"a\" appears twice");
  for (const char* date : {"\"yesterday\"", "\"2020--01\"", "\"2020-01-\"", "\"-5\"", "1.5", "true", "\"99999999999999999999\""}) {
    const std::string e = error_of_questions(one_question(std::string(R"({"id": "a", "tag": "comedy", "description": "d", "date": )") + date + "}"));
    EXPECT_HAS(e, "[0].profile[0].date: ");
    EXPECT_HAS(e, "is not a date");
  }
}

TEST(Lamp2Hostile, DuplicateQuestionIds) {
  EXPECT_HAS(error_of_questions(R"([{"id": "1", "input": "description: x", "profile": []},
                                    {"id": "1", "input": "description: y", "profile": []}])"),
             "[1].id: question id \"1\" appears twice");
}

TEST(Lamp2Hostile, BadOutputs) {
  EXPECT_HAS(error_of_outputs("[]"), "o.json: expected a JSON object, found array");
  EXPECT_HAS(error_of_outputs(R"({"golds": []})"), "missing \"task\"");
  EXPECT_HAS(error_of_outputs(R"({"task": "LaMP_2"})"), "o.json: missing \"golds\"");
  EXPECT_HAS(error_of_outputs(R"({"task": "LaMP_2", "golds": {}})"), "golds: expected a list, found object");
  EXPECT_HAS(error_of_outputs(R"({"task": "LaMP_2", "golds": [{"id": "1"}]})"), "golds[0]: missing \"output\"");
  EXPECT_HAS(error_of_outputs(R"({"task": "LaMP_2", "golds": [{"id": "1", "output": 3}]})"),
             "golds[0].output: expected a string, found number");
  EXPECT_HAS(error_of_outputs(R"({"task": "LaMP_2", "golds": [{"id": "1", "output": "a"}, {"id": "1", "output": "b"}]})"),
             "golds[1].id: id \"1\" appears twice");
}

TEST(Lamp2Hostile, GoldThatIsNotATag) {
  const nl::Lamp2Questions q = nl::parse_lamp2_questions(R"([{"id": "1", "input": "description: x", "profile": []}])", "q.json");
  const nl::Lamp2Outputs o = nl::parse_lamp2_outputs(R"({"task": "LaMP_2", "golds": [{"id": "1", "output": "horror"}]})", "o.json");
  try {
    nl::lamp2_golds(q, o);
    FAIL() << "expected an error";
  } catch (const nl::Error& e) {
    EXPECT_HAS(std::string(e.what()), "o.json: the gold output \"horror\" of question \"1\" is not a LaMP-2 tag");
  }
}

TEST(Lamp2Hostile, DeepNestingAndHugeNumbers) {
  // Deeply nested lists are valid JSON of the wrong shape: an error, not a stack overflow.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_HAS(error_of_questions(deep), "q.json: [0]: expected a question object, found array");
  EXPECT_HAS(error_of_questions(R"([{"id": 1e999, "input": "description: x", "profile": []}])"),
             "q.json: unreadable JSON: number overflow parsing '1e999'");
  EXPECT_HAS(error_of_outputs(R"({"task": "LaMP_2", "golds": [{"id": -1e400, "output": "x"}]})"), "o.json: unreadable JSON");
}

}  // namespace
