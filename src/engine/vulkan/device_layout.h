// The layout of one weight matrix in a Vulkan device buffer, made once at load on the host
// and uploaded as it is. shaders/weights.glsl reads it (its header describes the words);
// this file writes it. Q4_0 / Q8_0 stay quantized in 8-row x 32-column tiles (scales apart
// from quants so both are word-aligned: the same bytes as the file, plus zero rows that pad
// the last row group to 8); F32 and F16 stay as they are, row-major. Other types (the
// K-quants, Q4_1, Q5_x, BF16) are dequantized here, once, to F16 rows.
#pragma once
#include <cstdint>
#include <vector>

#include "nightlora/modelio/model.h"

namespace nl::vk {

// Numbering shared with shaders/params.glsl (WT_*).
enum class DeviceWeightType : uint32_t { F32 = 0, F16 = 1, Q4_0 = 2, Q8_0 = 3 };

struct DeviceMatrix {
  DeviceWeightType type = DeviceWeightType::F32;
  int64_t rows = 0, cols = 0;
  int64_t n_blocks = 0;          // 32-column blocks: ceil(cols / 32)
  bool converted = false;        // true when the model's type was dequantized to F16 at load
  std::vector<uint32_t> words;
};

// Throws nl::Error naming the tensor for shapes or types the backend cannot hold, and when
// a weight dequantized to F16 does not fit the f16 range.
DeviceMatrix make_device_matrix(const TensorView& w);

}  // namespace nl::vk
