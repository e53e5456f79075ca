// The push constants every shader of the Vulkan backend gets (one layout for all pipelines,
// filled by vulkan_engine.cpp's Params; keep the two in the same order).
const uint WT_F32 = 0u;   // weight storage types of the device layout (weights.glsl)
const uint WT_F16 = 1u;
const uint WT_Q4_0 = 2u;
const uint WT_Q8_0 = 3u;

const uint MODE_F32 = 0u;  // nl::Precision, same numbering
const uint MODE_F16 = 1u;
const uint MODE_INT8 = 2u;

layout(push_constant) uniform Params {
  uint wtype;     // WT_*
  uint rows;      // rows of W (out features)
  uint cols;      // cols of W (in features)
  uint n_blocks;  // 32-column blocks of W: ceil(cols / 32)
  uint T;         // tokens (rows of the activations)
  uint mode;      // MODE_*
  uint len;       // row passes: length of each row of the buffer they work on
  uint target;    // guard pass: 0 rounds the input buffer, 1 the output buffer
} p;
