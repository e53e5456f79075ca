// Blocks whose bytes are set by hand from the ggml format definitions, and whose values
// are computed here independently of the library (no shared packing code). Scales are
// powers of two and levels small integers, so every expected value is exact in float and
// the comparison is exact whatever order the dequantizer multiplies in.
#include <cstdint>
#include <cstring>
#include <vector>

#include "nightlora/quant/qtype.h"
#include "test_util.h"

using nl::QType;

namespace {

// Half-float bit patterns of the scales used below.
constexpr uint16_t kHalf0_5 = 0x3800;
constexpr uint16_t kHalf0_25 = 0x3400;
constexpr uint16_t kHalf0_125 = 0x3000;
constexpr uint16_t kHalfMinus0_5 = 0xB800;
constexpr uint16_t kHalfMinus3 = 0xC200;

void put_u16(std::vector<uint8_t>& b, size_t at, uint16_t v) {
  b[at] = static_cast<uint8_t>(v & 0xFF);  // little-endian, as in GGUF
  b[at + 1] = static_cast<uint8_t>(v >> 8);
}

std::vector<float> dequantize(QType t, const std::vector<uint8_t>& bytes, int64_t n) {
  EXPECT_EQ(bytes.size(), nl::qtype_row_bytes(t, n));
  std::vector<float> out(static_cast<size_t>(n));
  nl::dequantize_row(t, bytes.data(), out.data(), n);
  return out;
}

void expect_equal(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << "element " << i;
}

// The 8 six-bit scales and mins of the Q4_K/Q5_K test block, and their 12 packed bytes
// worked out by hand from the layout (ggml get_scale_min_k4):
//   bytes 0-3:  scale[j] (low 6 bits)      | (scale[j+4] >> 4) << 6
//   bytes 4-7:  min[j]   (low 6 bits)      | (min[j+4]   >> 4) << 6
//   bytes 8-11: (scale[j+4] & 15)          | (min[j+4] & 15) << 4
// scale[4..7] = 17, 33, 48, 5  -> high bits 1, 2, 3, 0; low nibbles 1, 1, 0, 5
// min[4..7]   = 31, 1, 40, 62  -> high bits 1, 0, 2, 3; low nibbles 15, 1, 8, 14
const int kScale[8] = {1, 2, 3, 63, 17, 33, 48, 5};
const int kMin[8] = {0, 63, 7, 20, 31, 1, 40, 62};
const uint8_t kPackedScales[12] = {
    1 | 1 << 6, 2 | 2 << 6, 3 | 3 << 6, 63 | 0 << 6,  // 0x41 0x82 0xC3 0x3F
    0 | 1 << 6, 63 | 0 << 6, 7 | 2 << 6, 20 | 3 << 6,  // 0x40 0x3F 0x87 0xD4
    1 | 15 << 4, 1 | 1 << 4, 0 | 8 << 4, 5 | 14 << 4,  // 0xF1 0x11 0x80 0xE5
};

}  // namespace

TEST(HandBuiltBlocks, PackedScaleBytesAreTheOnesWorkedOutByHand) {
  const uint8_t literal[12] = {0x41, 0x82, 0xC3, 0x3F, 0x40, 0x3F, 0x87, 0xD4, 0xF1, 0x11, 0x80, 0xE5};
  EXPECT_EQ(std::memcmp(literal, kPackedScales, 12), 0);
}

TEST(HandBuiltBlocks, Q4_0) {
  // d (2 bytes), then 16 bytes: element j in the low nibble of byte j, j+16 in the high.
  std::vector<uint8_t> b(18);
  put_u16(b, 0, kHalf0_5);
  for (int j = 0; j < 16; ++j) b[2 + j] = static_cast<uint8_t>(j | (15 - j) << 4);
  std::vector<float> want(32);
  for (int j = 0; j < 16; ++j) {
    want[j] = (j - 8) * 0.5f;
    want[j + 16] = ((15 - j) - 8) * 0.5f;
  }
  expect_equal(dequantize(QType::Q4_0, b, 32), want);
}

TEST(HandBuiltBlocks, Q4_1) {
  std::vector<uint8_t> b(20);
  put_u16(b, 0, kHalf0_25);    // d
  put_u16(b, 2, kHalfMinus3);  // m
  for (int j = 0; j < 16; ++j) b[4 + j] = static_cast<uint8_t>((j * 5 % 16) | (j * 3 % 16) << 4);
  std::vector<float> want(32);
  for (int j = 0; j < 16; ++j) {
    want[j] = (j * 5 % 16) * 0.25f - 3.0f;
    want[j + 16] = (j * 3 % 16) * 0.25f - 3.0f;
  }
  expect_equal(dequantize(QType::Q4_1, b, 32), want);
}

TEST(HandBuiltBlocks, Q5_0) {
  // d, then qh: a little-endian 32-bit word whose bit j is bit 4 of element j, then qs.
  std::vector<uint8_t> b(22);
  put_u16(b, 0, kHalf0_125);
  const uint32_t qh = 0xA5C3'0F81u;
  for (int k = 0; k < 4; ++k) b[2 + k] = static_cast<uint8_t>(qh >> (8 * k));
  for (int j = 0; j < 16; ++j) b[6 + j] = static_cast<uint8_t>((j * 7 % 16) | (j * 11 % 16) << 4);
  std::vector<float> want(32);
  for (int j = 0; j < 32; ++j) {
    const int low = j < 16 ? j * 7 % 16 : (j - 16) * 11 % 16;
    const int q = low + 16 * static_cast<int>((qh >> j) & 1);
    want[j] = (q - 16) * 0.125f;
  }
  expect_equal(dequantize(QType::Q5_0, b, 32), want);
}

TEST(HandBuiltBlocks, Q5_1) {
  std::vector<uint8_t> b(24);
  put_u16(b, 0, kHalf0_5);
  put_u16(b, 2, kHalfMinus0_5);
  const uint32_t qh = 0x1234'F00Du;
  for (int k = 0; k < 4; ++k) b[4 + k] = static_cast<uint8_t>(qh >> (8 * k));
  for (int j = 0; j < 16; ++j) b[8 + j] = static_cast<uint8_t>((15 - j) | (j * 9 % 16) << 4);
  std::vector<float> want(32);
  for (int j = 0; j < 32; ++j) {
    const int low = j < 16 ? 15 - j : (j - 16) * 9 % 16;
    const int q = low + 16 * static_cast<int>((qh >> j) & 1);
    want[j] = q * 0.5f - 0.5f;
  }
  expect_equal(dequantize(QType::Q5_1, b, 32), want);
}

TEST(HandBuiltBlocks, Q8_0TwoBlocks) {
  std::vector<uint8_t> b(68);
  put_u16(b, 0, kHalf0_25);
  put_u16(b, 34, kHalfMinus0_5);
  std::vector<float> want(64);
  for (int j = 0; j < 32; ++j) {
    const int8_t q0 = static_cast<int8_t>(j * 8 - 128);  // -128 .. 120
    const int8_t q1 = static_cast<int8_t>(127 - j * 3);
    b[2 + j] = static_cast<uint8_t>(q0);
    b[36 + j] = static_cast<uint8_t>(q1);
    want[j] = q0 * 0.25f;
    want[32 + j] = q1 * -0.5f;
  }
  expect_equal(dequantize(QType::Q8_0, b, 64), want);
}

TEST(HandBuiltBlocks, Q4_K) {
  // d, dmin, 12 bytes of scales, then 128 bytes: each 64 elements use 32 bytes, the
  // first 32 elements in the low nibbles, the next 32 in the high nibbles.
  // x = d * scale[sub] * q - dmin * min[sub], sub = element / 32.
  std::vector<uint8_t> b(144);
  put_u16(b, 0, kHalf0_5);
  put_u16(b, 2, kHalf0_25);
  std::memcpy(&b[4], kPackedScales, 12);
  auto level = [](int e) { return (e * 7 + 3) % 16; };
  for (int g = 0; g < 4; ++g)
    for (int l = 0; l < 32; ++l) b[16 + 32 * g + l] = static_cast<uint8_t>(level(64 * g + l) | level(64 * g + 32 + l) << 4);
  std::vector<float> want(256);
  for (int e = 0; e < 256; ++e) want[e] = 0.5f * kScale[e / 32] * level(e) - 0.25f * kMin[e / 32];
  expect_equal(dequantize(QType::Q4_K, b, 256), want);
}

TEST(HandBuiltBlocks, Q5_K) {
  // As Q4_K, then qh[32] before qs[128]: bit 4 of element 64*g + l is bit 2g of qh[l],
  // of element 64*g + 32 + l bit 2g+1 of qh[l].
  std::vector<uint8_t> b(176);
  put_u16(b, 0, kHalf0_5);
  put_u16(b, 2, kHalf0_25);
  std::memcpy(&b[4], kPackedScales, 12);
  auto level = [](int e) { return (e * 11 + 5) % 32; };
  for (int e = 0; e < 256; ++e) {
    const int g = e / 64, half = (e % 64) / 32, l = e % 32;
    if (level(e) & 16) b[16 + l] |= static_cast<uint8_t>(1 << (2 * g + half));
    b[48 + 32 * g + l] |= static_cast<uint8_t>((level(e) & 15) << (4 * half));
  }
  std::vector<float> want(256);
  for (int e = 0; e < 256; ++e) want[e] = 0.5f * kScale[e / 32] * level(e) - 0.25f * kMin[e / 32];
  expect_equal(dequantize(QType::Q5_K, b, 256), want);
}

TEST(HandBuiltBlocks, Q6_K) {
  // ql[128], qh[64], scales[16] (signed), d last. Per half h of 128 elements, element
  // i = 32*quarter + l: low nibble in ql[64h + l + 32*(quarter odd)], low half for
  // quarters 0,1 and high half for 2,3; top 2 bits in qh[32h + l] at bits 2*quarter.
  // x = d * scale[element / 16] * (q - 32).
  std::vector<uint8_t> b(210);
  const int8_t scales[16] = {-128, 127, -1, 0, 5, -77, 33, 100, -3, 64, 12, -50, 1, 2, -128, 90};
  for (int k = 0; k < 16; ++k) b[192 + k] = static_cast<uint8_t>(scales[k]);
  put_u16(b, 208, kHalfMinus0_5);
  auto level = [](int e) { return (e * 13 + 7) % 64; };
  for (int e = 0; e < 256; ++e) {
    const int h = e / 128, quarter = (e % 128) / 32, l = e % 32;
    const int q = level(e);
    b[64 * h + l + 32 * (quarter % 2)] |= static_cast<uint8_t>((q & 15) << (quarter >= 2 ? 4 : 0));
    b[128 + 32 * h + l] |= static_cast<uint8_t>((q >> 4) << (2 * quarter));
  }
  std::vector<float> want(256);
  for (int e = 0; e < 256; ++e) want[e] = -0.5f * scales[e / 16] * (level(e) - 32);
  expect_equal(dequantize(QType::Q6_K, b, 256), want);
}

TEST(HandBuiltBlocks, UnalignedSourceGivesTheSameValues) {
  // A block at an odd address (e.g. inside a caller's byte buffer) is valid input.
  std::vector<uint8_t> b(144);
  put_u16(b, 0, kHalf0_5);
  put_u16(b, 2, kHalf0_25);
  std::memcpy(&b[4], kPackedScales, 12);
  for (int i = 16; i < 144; ++i) b[i] = static_cast<uint8_t>(i * 37);
  std::vector<uint8_t> shifted(145);
  std::memcpy(&shifted[1], b.data(), 144);
  std::vector<float> aligned(256), unaligned(256);
  nl::dequantize_row(QType::Q4_K, b.data(), aligned.data(), 256);
  nl::dequantize_row(QType::Q4_K, shifted.data() + 1, unaligned.data(), 256);
  expect_equal(unaligned, aligned);

  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j) - 10.5f;
  std::vector<uint8_t> q_aligned(34), q_shifted(35);
  nl::quantize_row(QType::Q8_0, x.data(), q_aligned.data(), 32);
  nl::quantize_row(QType::Q8_0, x.data(), q_shifted.data() + 1, 32);
  EXPECT_EQ(std::memcmp(q_aligned.data(), q_shifted.data() + 1, 34), 0);
}
