// safetensors files (Hugging Face weights, PEFT adapters): a memory-mapped, validated reader
// and an atomic writer.
//
// Layout: an 8-byte little-endian header length N, N bytes of JSON
//   {"name": {"dtype": "F32", "shape": [rows, cols], "data_offsets": [begin, end]}, ...,
//    "__metadata__": {"key": "value", ...}}
// then the data buffer; offsets are relative to the start of the buffer. Shapes are written
// slowest-first (PyTorch order): a [rows x cols] matrix has shape {rows, cols}. Note that
// GGUF lists dims the other way round (see gguf.h).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "nightlora/quant/qtype.h"
#include "nightlora/util/file_map.h"

namespace nl {

// One tensor of a safetensors file. `dtype` is the QType with the same element layout:
// F32, F16, BF16 (the float types models use), and F64/I8/I16/I32/I64 for completeness.
struct SafetensorsTensor {
  std::string name;
  QType dtype = QType::F32;
  std::vector<int64_t> shape;     // as written: slowest-first
  const uint8_t* data = nullptr;  // into the mapped file (may be unaligned for odd offsets)
  size_t nbytes = 0;
  int64_t n_elements() const;
};

class SafetensorsFile {
 public:
  // Maps and validates the whole header: header length, JSON syntax, dtype names, shapes,
  // and that every tensor's byte range matches its shape, lies inside the file and does
  // not overlap another. Throws nl::Error naming the file, the tensor and the problem.
  static std::unique_ptr<SafetensorsFile> open(const std::string& path);

  const std::string& path() const { return map_.path(); }
  size_t file_size() const { return map_.size(); }

  // Tensors in the order of their data offsets.
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* find(const std::string& name) const;
  // The `__metadata__` map (empty when absent).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  FileMap map_;
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// Name of a dtype as safetensors spells it ("F32", "F16", "BF16", ...); throws for a QType
// safetensors cannot hold (the quantized block types).
const char* safetensors_dtype_name(QType t);
// Bytes per element of a safetensors-representable QType.
size_t safetensors_dtype_size(QType t);

// One tensor to write: raw little-endian bytes of `dtype` elements, shape slowest-first.
struct SafetensorsOut {
  std::string name;
  QType dtype = QType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;

  // Convenience constructors from float data (converted to the requested dtype, rounding
  // to nearest even for F16/BF16).
  static SafetensorsOut from_f32(std::string name, std::vector<int64_t> shape, const float* data,
                                 QType dtype = QType::F32);
};

// Writes a safetensors file with the tensors in the given order and the `__metadata__` map.
// The file is written to "<path>.tmp", fsync'd and renamed into place, so a reader never
// sees a half-written file. Throws nl::Error for duplicate names or a shape/size mismatch.
void write_safetensors(const std::string& path, const std::vector<SafetensorsOut>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace nl
