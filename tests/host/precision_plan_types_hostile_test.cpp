// Precision plan files (`--precision plan.json`, OUT/precision_plan.json) with fields of the wrong
// type or numbers no double holds: each an nl::Error naming the file and the field, never a
// parser's exception. (Also run under ASan/UBSan: test_hostile_sanitized.)
#include "input_error.h"
#include "nightlora/host/precision_plan.h"
#include "test_util.h"

namespace {

using nltest::expect_mentions;
using nltest::input_error_of;

// A valid two-layer plan's text with one fragment swapped for a hostile one.
std::string plan_with(const std::string& from, const std::string& to) {
  std::string text = nl::PrecisionPlan::uniform(2, nl::Precision::F32).to_json().dump();
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from << " in " << text;
  return at == std::string::npos ? text : text.replace(at, from.size(), to);
}

std::string parse_error(const std::string& text) {
  return input_error_of([&] { nl::PrecisionPlan::parse(text, 2, "bad_plan.json"); });
}

TEST(PrecisionPlanHostile, WrongTypesNameTheField) {
  ASSERT_NO_THROW(nl::PrecisionPlan::parse(plan_with("", ""), 2, "plan.json"));
  struct Case {
    const char* from;
    const char* to;
    std::vector<std::string> expect;
  };
  const Case cases[] = {
      {"\"n_layer\":2", "\"n_layer\":1e506", {"bad_plan.json: \"n_layer\"", "out of range"}},
      {"\"n_layer\":2", "\"n_layer\":\"2\"", {"bad_plan.json", "\"n_layer\" must be a non-negative integer, found string \"2\""}},
      {"\"n_layer\":2", "\"n_layer\":2.5", {"bad_plan.json", "\"n_layer\"", "found number 2.5"}},
      {"\"format\":\"nightlora-precision-plan\"", "\"format\":7", {"bad_plan.json", "\"format\""}},
      {"\"version\":1", "\"version\":\"1\"", {"bad_plan.json", "version string \"1\" is not supported"}},
      {"\"q\":[\"f32\",\"f32\",\"f32\"]", "\"q\":\"f32\"", {"bad_plan.json: layer 0 q", "must list 3 modes", "found string \"f32\""}},
      {"\"q\":[\"f32\",\"f32\",\"f32\"]", "\"q\":[\"f32\",8,\"f32\"]", {"bad_plan.json: layer 0 q recompute", "must be a string, found number 8"}},
      {"\"head\":{", "\"head\":{\"x\":1e999,", {"bad_plan.json: \"head.x\"", "out of range"}},
      {"\"input_grad\":\"f32\"}", "\"input_grad\":[\"f32\"]}", {"bad_plan.json: head input_grad", "must be a string, found an array"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.to);
    const std::string msg = parse_error(plan_with(c.from, c.to));
    for (const std::string& e : c.expect) expect_mentions(msg, {e});
  }
}

}  // namespace
