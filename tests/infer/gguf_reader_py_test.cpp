// tools/torch_ref/gguf_reader.py (the PyTorch reference's own GGUF reader) dequantizes every
// type it supports exactly as our reference dequantizers do: a GGUF with one tensor per type
// is written here and both sides' f32 values are compared bit for bit.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "infer_test_util.h"
#include "nightlora/quant/qtype.h"

using namespace nltest;

TEST(GgufReaderPy, DequantizesLikeOurReference) {
  const std::string py = python_with_torch();
  if (py.empty()) GTEST_SKIP() << "Debian's python3 with numpy/torch not found (/usr/bin/python3)";
  const std::vector<nl::QType> types = {nl::QType::F32,  nl::QType::F16,  nl::QType::BF16, nl::QType::Q8_0,
                                        nl::QType::Q4_0, nl::QType::Q4_1, nl::QType::Q5_0, nl::QType::Q5_1,
                                        nl::QType::Q4_K, nl::QType::Q5_K, nl::QType::Q6_K};
  const int64_t cols = 512, rows = 3;
  std::vector<float> src(static_cast<size_t>(cols * rows));
  uint32_t x = 12345;
  for (size_t i = 0; i < src.size(); ++i) {
    x = x * 1664525u + 1013904223u;
    // Mixed magnitudes and signs, so scales, mins and high bits all vary between blocks.
    src[i] = (static_cast<float>(x >> 8) / 16777216.0f - 0.4f) * (1.0f + static_cast<float>(i % 97) / 10.0f);
  }
  std::vector<std::vector<uint8_t>> data;
  nl::GgufWriter w;
  w.set("general.architecture", nl::GgufValue::str("none"));
  for (nl::QType t : types) {
    const size_t rb = nl::qtype_row_bytes(t, cols);
    data.emplace_back(rb * rows);
    for (int64_t r = 0; r < rows; ++r) nl::quantize_row(t, src.data() + r * cols, data.back().data() + r * rb, cols);
    w.add_tensor_data(std::string("t_") + nl::qtype_name(t), t, {cols, rows}, data.back().data());
  }
  TempDir tmp;
  w.write((tmp / "types.gguf").string());
  CmdResult r = run_cmd(py + " " + shq((source_dir() / "tools/torch_ref/gguf_reader.py").string()) + " " +
                        shq((tmp / "types.gguf").string()) + " " + shq((tmp / "out").string()));
  ASSERT_EQ(r.rc, 0) << r.err;

  for (size_t k = 0; k < types.size(); ++k) {
    const nl::QType t = types[k];
    const std::string name = std::string("t_") + nl::qtype_name(t);
    std::vector<float> ours(static_cast<size_t>(cols * rows)), theirs(ours.size());
    const size_t rb = nl::qtype_row_bytes(t, cols);
    for (int64_t row = 0; row < rows; ++row) nl::dequantize_row(t, data[k].data() + row * rb, ours.data() + row * cols, cols);
    std::ifstream in(tmp / "out" / (name + ".f32"), std::ios::binary);
    ASSERT_TRUE(in) << name << ": no output from gguf_reader.py";
    in.read(reinterpret_cast<char*>(theirs.data()), static_cast<std::streamsize>(theirs.size() * 4));
    ASSERT_EQ(in.gcount(), static_cast<std::streamsize>(theirs.size() * 4)) << name;
    size_t mismatches = 0;
    for (size_t i = 0; i < ours.size(); ++i) mismatches += std::memcmp(&ours[i], &theirs[i], 4) != 0;
    EXPECT_EQ(mismatches, 0u) << name << ": first values ours " << ours[0] << " / " << ours[1] << ", python "
                              << theirs[0] << " / " << theirs[1];
  }
}
