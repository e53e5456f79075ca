#include "nightlora/quant/qtype.h"

#include <algorithm>
#include <cctype>

#include "nightlora/util/error.h"

namespace nl {

namespace {
// Block layouts (bytes per block) follow ggml's definitions.
const QTypeInfo kTypes[] = {
    {QType::F32, "f32", 1, 4, true},
    {QType::F16, "f16", 1, 2, true},
    {QType::Q4_0, "q4_0", 32, 18, true},
    {QType::Q4_1, "q4_1", 32, 20, true},
    {QType::Q5_0, "q5_0", 32, 22, true},
    {QType::Q5_1, "q5_1", 32, 24, true},
    {QType::Q8_0, "q8_0", 32, 34, true},
    {QType::Q8_1, "q8_1", 32, 36, false},
    {QType::Q2_K, "q2_K", 256, 84, false},
    {QType::Q3_K, "q3_K", 256, 110, false},
    {QType::Q4_K, "q4_K", 256, 144, true},
    {QType::Q5_K, "q5_K", 256, 176, true},
    {QType::Q6_K, "q6_K", 256, 210, true},
    {QType::Q8_K, "q8_K", 256, 292, false},
    {QType::I8, "i8", 1, 1, false},
    {QType::I16, "i16", 1, 2, false},
    {QType::I32, "i32", 1, 4, false},
    {QType::I64, "i64", 1, 8, false},
    {QType::F64, "f64", 1, 8, false},
    {QType::BF16, "bf16", 1, 2, true},
};
}  // namespace

const QTypeInfo* qtype_info(uint32_t id) {
  for (const auto& t : kTypes)
    if (static_cast<uint32_t>(t.type) == id) return &t;
  return nullptr;
}

const QTypeInfo& qtype_info(QType t) {
  const QTypeInfo* i = qtype_info(static_cast<uint32_t>(t));
  if (!i) fail("qtype", "unknown tensor type id " + std::to_string(static_cast<uint32_t>(t)));
  return *i;
}

QType parse_qtype(const std::string& name) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  std::string valid;
  for (const auto& t : kTypes) {
    if (!t.supported) continue;
    std::string n = t.name;
    std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
    if (n == lower) return t.type;
    valid += (valid.empty() ? "" : ", ") + std::string(t.name);
  }
  fail("type '" + name + "'", "not a supported tensor type", "use one of: " + valid);
}

size_t qtype_row_bytes(QType t, int64_t n) {
  const QTypeInfo& i = qtype_info(t);
  if (n < 0 || n % i.block_size != 0)
    fail(std::string("type ") + i.name,
         "row length " + std::to_string(n) + " is not a multiple of the block size " + std::to_string(i.block_size));
  return static_cast<size_t>(n / i.block_size) * i.block_bytes;
}

}  // namespace nl
