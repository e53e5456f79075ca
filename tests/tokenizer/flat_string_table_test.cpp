// FlatStringTable, the merge loop's lookup table, against std::unordered_map: every key
// found with its first value, absent keys absent, through growth and with keys too long for
// a slot.
#include <gtest/gtest.h>

#include <random>
#include <unordered_map>

#include "../../src/tokenizer/flat_string_table.h"

namespace {

TEST(FlatStringTable, FindsWhatAnUnorderedMapFinds) {
  std::mt19937 rng(1);
  std::uniform_int_distribution<int> len(0, 40), byte(0, 255);
  nl::FlatStringTable table(10);  // sized far too small: it must grow
  std::unordered_map<std::string, int32_t> want;
  std::vector<std::string> keys;
  for (int i = 0; i < 20000; ++i) {
    std::string k;
    for (int n = len(rng) % (i % 3 ? 8 : 41); n > 0; --n) k += char(byte(rng) % (i % 2 ? 256 : 3) + (i % 2 ? 0 : 'a'));
    table.insert(k, i);
    want.emplace(k, i);  // both keep the first value of a repeated key
    keys.push_back(k);
  }
  EXPECT_EQ(table.size(), want.size());
  for (const std::string& k : keys) {
    int32_t v = -1;
    ASSERT_TRUE(table.find(k, v)) << k;
    EXPECT_EQ(v, want.at(k));
    std::string absent = k + char(0x7F) + "absent";
    EXPECT_EQ(table.find(absent, v), want.count(absent) > 0);
  }
}

TEST(FlatStringTable, EmptyTableFindsNothing) {
  const nl::FlatStringTable table;
  int32_t v = 7;
  EXPECT_FALSE(table.find("", v));
  EXPECT_FALSE(table.find("a", v));
  EXPECT_EQ(v, 7);
}

}  // namespace
