// Dispatch from a type to its reference (scalar) quantizer and dequantizer.
#include <cstring>

#include "nightlora/quant/qtype.h"
#include "nightlora/util/error.h"
#include "nightlora/util/half.h"

namespace nl {

void dequantize_row(QType t, const void* src, float* dst, int64_t n) {
  switch (t) {
    case QType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      return;
    case QType::F16: {
      const uint16_t* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_f32(s[i]);
      return;
    }
    case QType::BF16: {
      const uint16_t* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
      return;
    }
    default:
      fail(std::string("type ") + qtype_info(t).name, "dequantization not supported",
           "convert the model to f16, q8_0, q4_0, q4_K, q5_K or q6_K");
  }
}

void quantize_row(QType t, const float* src, void* dst, int64_t n) {
  switch (t) {
    case QType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      return;
    case QType::F16: {
      uint16_t* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = f32_to_fp16(src[i]);
      return;
    }
    case QType::BF16: {
      uint16_t* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = f32_to_bf16(src[i]);
      return;
    }
    default:
      fail(std::string("type ") + qtype_info(t).name, "quantization not supported");
  }
}

}  // namespace nl
