// safetensors: writer/reader round trip, and hostile files that must give clear errors.
#include "nightlora/modelio/safetensors.h"

#include <cstring>
#include <fstream>

#include "nightlora/util/error.h"
#include "nightlora/util/half.h"
#include "test_util.h"

namespace {

using nltest::TempDir;
namespace fs = std::filesystem;

// Builds a raw safetensors file from a header text and a data buffer.
void write_safetensors_raw(const fs::path& p, const std::string& header, const std::string& data, uint64_t declared_len = ~0ull) {
  uint64_t n = declared_len == ~0ull ? header.size() : declared_len;
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(n >> (8 * i));
  bytes += header + data;
  std::ofstream(p, std::ios::binary) << bytes;
}

TEST(Safetensors, RoundTripKeepsNamesShapesBytesAndMetadata) {
  TempDir tmp;
  std::vector<float> a = {1.0f, -2.5f, 3.25f, 0.0f, 1e-3f, 65504.0f};
  std::vector<float> b = {0.5f, -0.75f};
  std::vector<nl::SafetensorsOut> out;
  out.push_back(nl::SafetensorsOut::from_f32("layer.a", {2, 3}, a.data()));
  out.push_back(nl::SafetensorsOut::from_f32("layer.b_f16", {2}, b.data(), nl::QType::F16));
  out.push_back(nl::SafetensorsOut::from_f32("layer.c_bf16", {1, 2}, b.data(), nl::QType::BF16));
  fs::path p = tmp / "x.safetensors";
  nl::write_safetensors(p.string(), out, {{"format", "pt"}, {"note", "hello"}});
  EXPECT_FALSE(fs::exists(p.string() + ".tmp"));

  auto f = nl::SafetensorsFile::open(p.string());
  ASSERT_EQ(f->tensors().size(), 3u);
  EXPECT_EQ(f->metadata().at("format"), "pt");
  EXPECT_EQ(f->metadata().at("note"), "hello");

  const auto* ta = f->find("layer.a");
  ASSERT_NE(ta, nullptr);
  EXPECT_EQ(ta->dtype, nl::QType::F32);
  EXPECT_EQ(ta->shape, (std::vector<int64_t>{2, 3}));
  ASSERT_EQ(ta->nbytes, 24u);
  std::vector<float> back(6);
  std::memcpy(back.data(), ta->data, 24);
  EXPECT_EQ(back, a);

  const auto* tb = f->find("layer.b_f16");
  ASSERT_NE(tb, nullptr);
  EXPECT_EQ(tb->dtype, nl::QType::F16);
  uint16_t h[2];
  std::memcpy(h, tb->data, 4);
  EXPECT_EQ(nl::fp16_to_f32(h[0]), 0.5f);
  EXPECT_EQ(nl::fp16_to_f32(h[1]), -0.75f);

  const auto* tc = f->find("layer.c_bf16");
  ASSERT_NE(tc, nullptr);
  EXPECT_EQ(tc->dtype, nl::QType::BF16);
  EXPECT_EQ(tc->shape, (std::vector<int64_t>{1, 2}));
  std::memcpy(h, tc->data, 4);
  EXPECT_EQ(nl::bf16_to_f32(h[0]), 0.5f);
  EXPECT_EQ(f->find("missing"), nullptr);

  // The data buffer starts 8-byte aligned, as the reference writer makes it.
  uint64_t hl = 0;
  std::ifstream in(p, std::ios::binary);
  in.read(reinterpret_cast<char*>(&hl), 8);
  EXPECT_EQ(hl % 8, 0u);
}

TEST(Safetensors, WriterRejectsBadRequestsWithoutCreatingAFile) {
  TempDir tmp;
  fs::path p = tmp / "bad.safetensors";
  std::vector<nl::SafetensorsOut> out(1);
  out[0].name = "w";
  out[0].shape = {2, 2};
  out[0].bytes.resize(12);  // needs 16
  EXPECT_THROW(nl::write_safetensors(p.string(), out), nl::Error);
  out[0].bytes.resize(16);
  out.push_back(out[0]);  // duplicate name
  EXPECT_THROW(nl::write_safetensors(p.string(), out), nl::Error);
  out.pop_back();
  out[0].dtype = nl::QType::Q4_0;  // not a safetensors type
  EXPECT_THROW(nl::write_safetensors(p.string(), out), nl::Error);
  EXPECT_FALSE(fs::exists(p));
}

TEST(Safetensors, EmptyTensorListAndZeroSizedTensorAreValid) {
  TempDir tmp;
  fs::path p = tmp / "e.safetensors";
  nl::write_safetensors(p.string(), {});
  EXPECT_TRUE(nl::SafetensorsFile::open(p.string())->tensors().empty());
  write_safetensors_raw(p, R"({"z":{"dtype":"F32","shape":[0,4],"data_offsets":[0,0]}})", "");
  auto f = nl::SafetensorsFile::open(p.string());
  ASSERT_EQ(f->tensors().size(), 1u);
  EXPECT_EQ(f->tensors()[0].nbytes, 0u);
}

}  // namespace
