// The type table, name parsing, row sizes and the errors for unsupported types.
#include <string>
#include <vector>

#include "nightlora/quant/qtype.h"
#include "nightlora/util/error.h"
#include "test_util.h"

using nl::QType;

namespace {

// Runs f, which must throw nl::Error, and returns the message.
template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const nl::Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected nl::Error";
  return "";
}

}  // namespace

TEST(QType, BlockLayoutsMatchGgml) {
  struct Expect {
    QType t;
    int64_t block;
    size_t bytes;
  };
  // ggml-common.h: sizeof(block_*) and QK*.
  const std::vector<Expect> expect = {
      {QType::F32, 1, 4},     {QType::F16, 1, 2},      {QType::BF16, 1, 2},     {QType::Q4_0, 32, 18},
      {QType::Q4_1, 32, 20},  {QType::Q5_0, 32, 22},   {QType::Q5_1, 32, 24},   {QType::Q8_0, 32, 34},
      {QType::Q4_K, 256, 144}, {QType::Q5_K, 256, 176}, {QType::Q6_K, 256, 210},
  };
  for (const auto& e : expect) {
    const auto& i = nl::qtype_info(e.t);
    EXPECT_EQ(i.block_size, e.block) << i.name;
    EXPECT_EQ(i.block_bytes, e.bytes) << i.name;
    EXPECT_TRUE(i.supported) << i.name;
  }
}

TEST(QType, ParsesNamesCaseInsensitively) {
  EXPECT_EQ(nl::parse_qtype("q4_0"), QType::Q4_0);
  EXPECT_EQ(nl::parse_qtype("Q4_K"), QType::Q4_K);
  EXPECT_EQ(nl::parse_qtype("q6_k"), QType::Q6_K);
  EXPECT_EQ(nl::parse_qtype("BF16"), QType::BF16);
  for (const char* n : {"f32", "f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q4_K", "q5_K", "q6_K"})
    EXPECT_EQ(std::string(nl::qtype_name(nl::parse_qtype(n))), n);
}

TEST(QType, UnknownOrUnsupportedNameListsTheValidOnes) {
  const std::string bad = error_of([] { nl::parse_qtype("q3_Z"); });
  EXPECT_NE(bad.find("q3_Z"), std::string::npos) << bad;
  EXPECT_NE(bad.find("q4_K"), std::string::npos) << bad;
  EXPECT_NE(bad.find("q8_0"), std::string::npos) << bad;
  // Known to ggml but not supported by us: also rejected, with the same list.
  const std::string q2 = error_of([] { nl::parse_qtype("q2_K"); });
  EXPECT_NE(q2.find("use one of"), std::string::npos) << q2;
}

TEST(QType, RowBytes) {
  EXPECT_EQ(nl::qtype_row_bytes(QType::F32, 7), 28u);
  EXPECT_EQ(nl::qtype_row_bytes(QType::F16, 5), 10u);
  EXPECT_EQ(nl::qtype_row_bytes(QType::Q4_0, 64), 36u);
  EXPECT_EQ(nl::qtype_row_bytes(QType::Q8_0, 4096), 4096u / 32 * 34);
  EXPECT_EQ(nl::qtype_row_bytes(QType::Q4_K, 512), 288u);
  EXPECT_EQ(nl::qtype_row_bytes(QType::Q6_K, 256), 210u);
  EXPECT_EQ(nl::qtype_row_bytes(QType::Q4_0, 0), 0u);
}

TEST(QType, RowBytesRejectsPartialBlocksAndNegativeLengths) {
  const std::string e = error_of([] { nl::qtype_row_bytes(QType::Q4_K, 172); });
  EXPECT_NE(e.find("q4_K"), std::string::npos) << e;
  EXPECT_NE(e.find("172"), std::string::npos) << e;
  EXPECT_NE(e.find("256"), std::string::npos) << e;
  EXPECT_THROW(nl::qtype_row_bytes(QType::Q8_0, 33), nl::Error);
  EXPECT_THROW(nl::qtype_row_bytes(QType::F32, -1), nl::Error);
}

TEST(QType, UnknownIdHasNoInfo) {
  EXPECT_EQ(nl::qtype_info(4u), nullptr);  // ggml removed types 4 and 5
  EXPECT_EQ(nl::qtype_info(999u), nullptr);
  EXPECT_NE(nl::qtype_info(12u), nullptr);
  EXPECT_THROW(nl::qtype_info(static_cast<QType>(999)), nl::Error);
}

TEST(QType, UnsupportedTypesGiveAClearError) {
  std::vector<uint8_t> buf(1024);
  std::vector<float> f(256);
  for (QType t : {QType::Q2_K, QType::Q3_K, QType::Q8_K, QType::Q8_1, QType::I8}) {
    const std::string name = nl::qtype_name(t);
    const std::string d = error_of([&] { nl::dequantize_row(t, buf.data(), f.data(), 256); });
    EXPECT_NE(d.find(name), std::string::npos) << d;
    EXPECT_NE(d.find("not supported"), std::string::npos) << d;
    const std::string q = error_of([&] { nl::quantize_row(t, f.data(), buf.data(), 256); });
    EXPECT_NE(q.find(name), std::string::npos) << q;
  }
}

TEST(QType, RowFunctionsRejectPartialBlocks) {
  std::vector<uint8_t> buf(1024);
  std::vector<float> f(300);
  EXPECT_THROW(nl::dequantize_row(QType::Q4_0, buf.data(), f.data(), 40), nl::Error);
  EXPECT_THROW(nl::quantize_row(QType::Q6_K, f.data(), buf.data(), 300), nl::Error);
}
