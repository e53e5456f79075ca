// GGUF v2/v3: reader (memory-mapped, validated against hostile input) and writer.
// Conventions follow ggml: tensor dims are listed fastest-first, so a [rows x cols]
// row-major matrix has ne = {cols, rows}; tensor data offsets are relative to the data
// section, which starts at the first multiple of `general.alignment` (default 32) after
// the header.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "nightlora/quant/qtype.h"
#include "nightlora/util/file_map.h"

namespace nl {

enum class GgufType : uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6,
  BOOL = 7, STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};
const char* gguf_type_name(GgufType t);

// One metadata value. Scalars keep their declared type; integers are held in `i` (signed
// types) or `u` (unsigned), floats in `f`. Arrays keep their element type in `elem` and
// their elements in the vector matching that kind (`arr_s` for strings, `arr_i`/`arr_u`/
// `arr_f` otherwise; BOOL arrays use arr_u). Nested arrays are rejected by the reader.
struct GgufValue {
  GgufType type = GgufType::UINT32;
  GgufType elem = GgufType::UINT32;
  uint64_t u = 0;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<std::string> arr_s;
  std::vector<int64_t> arr_i;
  std::vector<uint64_t> arr_u;
  std::vector<double> arr_f;

  static GgufValue str(std::string v);
  static GgufValue u32(uint32_t v);
  static GgufValue i32(int32_t v);
  static GgufValue u64(uint64_t v);
  static GgufValue f32(float v);
  static GgufValue boolean(bool v);
  static GgufValue str_array(std::vector<std::string> v);
  static GgufValue f32_array(std::vector<float> v);
  static GgufValue i32_array(std::vector<int32_t> v);

  bool is_array() const { return type == GgufType::ARRAY; }
  size_t array_size() const;
  // Numeric view of a scalar of any integer/float/bool type.
  double as_number() const;
  std::string to_string(size_t max_items = 8) const;  // for `nightlora info`
};

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> ne;   // dims, fastest-first
  QType type = QType::F32;
  uint64_t offset = 0;       // relative to the data section
  const uint8_t* data = nullptr;  // into the mapped file
  size_t nbytes = 0;
  int64_t n_elements() const;
};

class GgufFile {
 public:
  // Opens and validates the whole file; throws nl::Error naming the file and the problem.
  static std::unique_ptr<GgufFile> open(const std::string& path);

  uint32_t version() const { return version_; }
  size_t alignment() const { return alignment_; }
  size_t data_offset() const { return data_offset_; }
  const std::string& path() const { return map_.path(); }
  size_t file_size() const { return map_.size(); }

  // Metadata in file order.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }
  const GgufValue* find(const std::string& key) const;
  bool has(const std::string& key) const { return find(key) != nullptr; }
  // Typed getters: throw nl::Error naming the file and key when missing or of the wrong kind.
  std::string get_str(const std::string& key) const;
  std::string get_str(const std::string& key, const std::string& def) const;
  uint64_t get_uint(const std::string& key) const;
  uint64_t get_uint(const std::string& key, uint64_t def) const;
  double get_float(const std::string& key) const;
  double get_float(const std::string& key, double def) const;
  bool get_bool(const std::string& key, bool def) const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(const std::string& name) const;

 private:
  FileMap map_;
  uint32_t version_ = 0;
  size_t alignment_ = 32;
  size_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::map<std::string, size_t> kv_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;
  friend class GgufReader;
};

// Writes a GGUF v3 file. Tensor data is produced on demand by a fill callback, so huge
// (synthetic or converted) models never need to be held in memory at once. The file is
// written to "<path>.tmp", fsync'd and renamed: a reader never sees a half-written file.
class GgufWriter {
 public:
  using Fill = std::function<void(uint8_t* dst, size_t nbytes)>;

  void set(const std::string& key, GgufValue v);  // replaces an existing key in place
  // The value set for a key, or nullptr. Lets one part adjust what another wrote (convert
  // pads the tokenizer's vocabulary to the embedding's row count, as llama.cpp requires).
  const GgufValue* find(const std::string& key) const {
    for (const auto& kv : kv_)
      if (kv.first == key) return &kv.second;
    return nullptr;
  }
  void add_tensor(const std::string& name, QType type, std::vector<int64_t> ne, Fill fill);
  // Convenience: copies `nbytes` bytes from `src` (which must outlive write()).
  void add_tensor_data(const std::string& name, QType type, std::vector<int64_t> ne, const void* src);
  void set_alignment(size_t a) { alignment_ = a; }
  void write(const std::string& path) const;

 private:
  struct Pending {
    std::string name;
    QType type;
    std::vector<int64_t> ne;
    Fill fill;
  };
  size_t alignment_ = 32;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::vector<Pending> tensors_;
};

// Bytes a tensor of this type and shape occupies (throws for a shape that does not fit
// the type's block size).
size_t gguf_tensor_bytes(QType type, const std::vector<int64_t>& ne);

}  // namespace nl
