// Hostile bytes and values for the reference kernels: every byte pattern is a valid block
// (the formats have no invalid encodings), so decoding garbage must be defined behaviour,
// and so must quantizing NaN, infinities and huge values. The suite also runs this file
// against the sanitized library (AddressSanitizer + UBSan).
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "nightlora/quant/qtype.h"
#include "test_util.h"

using nl::QType;

namespace {

const QType kAll[] = {QType::F32,  QType::F16,  QType::BF16, QType::Q4_0, QType::Q4_1, QType::Q5_0,
                      QType::Q5_1, QType::Q8_0, QType::Q4_K, QType::Q5_K, QType::Q6_K};

}  // namespace

TEST(QuantHostile, RandomBytesDecodeWithoutUndefinedBehaviour) {
  std::mt19937 rng(2024);
  for (QType t : kAll) {
    const int64_t n = 512;
    std::vector<uint8_t> bytes(nl::qtype_row_bytes(t, n) + 1);
    for (int round = 0; round < 20; ++round) {
      for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
      std::vector<float> out(n);
      nl::dequantize_row(t, bytes.data(), out.data(), n);
      nl::dequantize_row(t, bytes.data() + 1, out.data(), n);  // unaligned too
    }
  }
}

TEST(QuantHostile, InfAndNanScalesDecodeToNonFiniteNotCrashes) {
  // Q8_0 with d = +inf (0x7C00) and with d = NaN (0x7E00): values are non-finite or NaN.
  std::vector<uint8_t> b(34, 1);
  b[0] = 0x00;
  b[1] = 0x7C;
  std::vector<float> out(32);
  nl::dequantize_row(QType::Q8_0, b.data(), out.data(), 32);
  EXPECT_TRUE(std::isinf(out[0]));
  b[1] = 0x7E;
  nl::dequantize_row(QType::Q8_0, b.data(), out.data(), 32);
  EXPECT_TRUE(std::isnan(out[0]));
}

TEST(QuantHostile, ExtremeInputsQuantizeWithoutUndefinedBehaviour) {
  const float big = std::numeric_limits<float>::max();
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float tiny = std::numeric_limits<float>::denorm_min();
  std::vector<std::vector<float>> cases = {
      std::vector<float>(256, big),  std::vector<float>(256, -big), std::vector<float>(256, inf),
      std::vector<float>(256, nan),  std::vector<float>(256, tiny), std::vector<float>(256, 1e30f),
  };
  std::vector<float> mixed(256);
  for (int i = 0; i < 256; ++i) mixed[i] = i % 4 == 0 ? nan : i % 4 == 1 ? -inf : i % 4 == 2 ? big : tiny;
  cases.push_back(mixed);
  for (QType t : kAll) {
    for (const auto& x : cases) {
      std::vector<uint8_t> q(nl::qtype_row_bytes(t, 256) + 1);
      std::vector<float> y(256);
      nl::quantize_row(t, x.data(), q.data(), 256);
      nl::dequantize_row(t, q.data(), y.data(), 256);
      nl::quantize_row(t, x.data(), q.data() + 1, 256);
    }
  }
}

TEST(QuantHostile, HugeFiniteValuesStayFiniteInQ8_0WhenTheScaleFits) {
  // 60000 * 127 overflows nothing: d = 472.4 is a normal half.
  std::vector<float> x(32, 60000.0f);
  x[5] = -60000.0f;
  std::vector<uint8_t> q(34);
  std::vector<float> y(32);
  nl::quantize_row(QType::Q8_0, x.data(), q.data(), 32);
  nl::dequantize_row(QType::Q8_0, q.data(), y.data(), 32);
  for (int i = 0; i < 32; ++i) EXPECT_NEAR(y[i], x[i], 60000.0 / 127 / 2 + 60000.0 / 2048) << i;
}
