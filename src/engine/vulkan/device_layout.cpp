#include "device_layout.h"

#include <cmath>
#include <cstring>

#include "nightlora/quant/qtype.h"
#include "nightlora/util/error.h"
#include "nightlora/util/half.h"

namespace nl::vk {
namespace {

constexpr int64_t kTileRows = 8;

void put_half(std::vector<uint32_t>& words, size_t half_index, uint16_t h) {
  uint32_t& w = words[half_index / 2];
  w |= static_cast<uint32_t>(h) << (16 * (half_index % 2));
}

// Q4_0 / Q8_0: scales of all tiles, then quants of all tiles (see weights.glsl).
void pack_tiles(const TensorView& w, DeviceMatrix& m) {
  const size_t block_bytes = qtype_info(w.type).block_bytes;
  const size_t quant_bytes = block_bytes - 2;  // after the f16 scale
  const size_t quant_words = quant_bytes / 4;  // per row of a tile: 4 (Q4_0) or 8 (Q8_0)
  const int64_t n_groups = (m.rows + kTileRows - 1) / kTileRows;
  const size_t n_tiles = static_cast<size_t>(n_groups * m.n_blocks);
  const size_t quant_base = n_tiles * 4;
  m.words.assign(quant_base + n_tiles * kTileRows * quant_words, 0u);
  for (int64_t r = 0; r < m.rows; ++r) {
    const uint8_t* row = w.row(r);
    const int64_t g = r / kTileRows, i = r % kTileRows;
    for (int64_t b = 0; b < m.n_blocks; ++b) {
      const uint8_t* block = row + static_cast<size_t>(b) * block_bytes;
      const size_t tile = static_cast<size_t>(g * m.n_blocks + b);
      uint16_t d;
      std::memcpy(&d, block, 2);
      put_half(m.words, tile * 8 + static_cast<size_t>(i), d);
      std::memcpy(&m.words[quant_base + (tile * kTileRows + static_cast<size_t>(i)) * quant_words], block + 2,
                  quant_bytes);
    }
  }
}

}  // namespace

DeviceMatrix make_device_matrix(const TensorView& w) {
  if (w.ne.size() != 2) fail(w.name, "not a matrix");
  const QTypeInfo& info = qtype_info(w.type);
  if (!info.supported)
    fail(w.name, std::string("weight type ") + info.name + " is not supported", "convert the model to f16, q8_0 or q4_0");
  DeviceMatrix m;
  m.rows = w.rows();
  m.cols = w.cols();
  m.n_blocks = (m.cols + 31) / 32;
  // Element indices are 32-bit in the shaders.
  if (m.rows * m.cols >= (int64_t{1} << 32))
    fail(w.name, "matrix too large for the Vulkan backend (2^32 elements or more)");
  if (m.cols % info.block_size != 0) fail(w.name, "rows are not whole " + std::string(info.name) + " blocks");
  const size_t n = static_cast<size_t>(m.rows * m.cols);
  switch (w.type) {
    case QType::Q4_0:
    case QType::Q8_0:
      m.type = w.type == QType::Q4_0 ? DeviceWeightType::Q4_0 : DeviceWeightType::Q8_0;
      pack_tiles(w, m);
      return m;
    case QType::F32:
      m.type = DeviceWeightType::F32;
      m.words.resize(n);
      for (int64_t r = 0; r < m.rows; ++r)
        std::memcpy(&m.words[static_cast<size_t>(r * m.cols)], w.row(r), static_cast<size_t>(m.cols) * 4);
      return m;
    case QType::F16: {
      m.type = DeviceWeightType::F16;
      m.words.assign((n + 1) / 2, 0u);
      for (int64_t r = 0; r < m.rows; ++r) {
        const uint8_t* row = w.row(r);
        for (int64_t c = 0; c < m.cols; ++c) {
          uint16_t h;
          std::memcpy(&h, row + 2 * c, 2);
          put_half(m.words, static_cast<size_t>(r * m.cols + c), h);
        }
      }
      return m;
    }
    default: {
      m.type = DeviceWeightType::F16;
      m.converted = true;
      m.words.assign((n + 1) / 2, 0u);
      std::vector<float> row(static_cast<size_t>(m.cols));
      for (int64_t r = 0; r < m.rows; ++r) {
        dequantize_row(w.type, w.row(r), row.data(), m.cols);
        for (int64_t c = 0; c < m.cols; ++c) {
          const float v = row[static_cast<size_t>(c)];
          if (!(std::fabs(v) <= 65504.0f))
            fail(w.name, "row " + std::to_string(r) + " holds " + std::to_string(v) + ", outside the f16 range the " +
                             "Vulkan backend converts " + info.name + " weights to",
                 "use --engine cpu, or convert the model to q8_0 / q4_0 / f32");
          put_half(m.words, static_cast<size_t>(r * m.cols + c), f32_to_fp16(v));
        }
      }
      return m;
    }
  }
}

}  // namespace nl::vk
