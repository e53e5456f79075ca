#include "nightlora/modelio/gguf.h"
#include "test_util.h"

using namespace nltest;

TEST(Gguf, ReadsStories260K) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", path);
  auto f = nl::GgufFile::open(path.string());
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->data_offset(), 14176u);
  EXPECT_EQ(f->get_str("general.architecture"), "llama");
  const auto* k = f->find_tensor("blk.0.attn_k.weight");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->ne, (std::vector<int64_t>{64, 32}));
}
