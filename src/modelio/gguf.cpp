// GGUF reader and writer. The reader trusts nothing in the file: every count, length,
// offset and shape is checked against the file size before use, so a truncated or hostile
// file gives an nl::Error that names the file, the byte offset and the problem.
#include "nightlora/modelio/gguf.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

#include "nightlora/job/file_ops.h"
#include "nightlora/util/error.h"

namespace nl {

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
// Sanity limits: far above any real model, low enough that a hostile count cannot make us
// allocate unbounded memory before the file-size checks catch it.
constexpr uint64_t kMaxTensors = 1u << 20;
constexpr uint64_t kMaxKv = 1u << 20;
constexpr uint32_t kMaxDims = 4;

bool is_valid_gguf_type(uint32_t t) { return t <= static_cast<uint32_t>(GgufType::FLOAT64); }

size_t scalar_size(GgufType t) {
  switch (t) {
    case GgufType::UINT8: case GgufType::INT8: case GgufType::BOOL: return 1;
    case GgufType::UINT16: case GgufType::INT16: return 2;
    case GgufType::UINT32: case GgufType::INT32: case GgufType::FLOAT32: return 4;
    case GgufType::UINT64: case GgufType::INT64: case GgufType::FLOAT64: return 8;
    default: return 0;
  }
}

bool is_signed_int(GgufType t) {
  return t == GgufType::INT8 || t == GgufType::INT16 || t == GgufType::INT32 || t == GgufType::INT64;
}
bool is_float(GgufType t) { return t == GgufType::FLOAT32 || t == GgufType::FLOAT64; }

}  // namespace

const char* gguf_type_name(GgufType t) {
  static const char* names[] = {"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
                                "bool", "string", "array", "uint64", "int64", "float64"};
  uint32_t i = static_cast<uint32_t>(t);
  return i < 13 ? names[i] : "unknown";
}

// ---------------------------------------------------------------------------------------
// GgufValue

GgufValue GgufValue::str(std::string v) { GgufValue x; x.type = GgufType::STRING; x.s = std::move(v); return x; }
GgufValue GgufValue::u32(uint32_t v) { GgufValue x; x.type = GgufType::UINT32; x.u = v; return x; }
GgufValue GgufValue::i32(int32_t v) { GgufValue x; x.type = GgufType::INT32; x.i = v; return x; }
GgufValue GgufValue::u64(uint64_t v) { GgufValue x; x.type = GgufType::UINT64; x.u = v; return x; }
GgufValue GgufValue::f32(float v) { GgufValue x; x.type = GgufType::FLOAT32; x.f = v; return x; }
GgufValue GgufValue::boolean(bool v) { GgufValue x; x.type = GgufType::BOOL; x.u = v; return x; }
GgufValue GgufValue::str_array(std::vector<std::string> v) {
  GgufValue x; x.type = GgufType::ARRAY; x.elem = GgufType::STRING; x.arr_s = std::move(v); return x;
}
GgufValue GgufValue::f32_array(std::vector<float> v) {
  GgufValue x; x.type = GgufType::ARRAY; x.elem = GgufType::FLOAT32; x.arr_f.assign(v.begin(), v.end()); return x;
}
GgufValue GgufValue::i32_array(std::vector<int32_t> v) {
  GgufValue x; x.type = GgufType::ARRAY; x.elem = GgufType::INT32; x.arr_i.assign(v.begin(), v.end()); return x;
}

size_t GgufValue::array_size() const {
  if (type != GgufType::ARRAY) return 0;
  if (elem == GgufType::STRING) return arr_s.size();
  if (is_float(elem)) return arr_f.size();
  if (is_signed_int(elem)) return arr_i.size();
  return arr_u.size();
}

double GgufValue::as_number() const {
  if (is_float(type)) return f;
  if (is_signed_int(type)) return static_cast<double>(i);
  return static_cast<double>(u);
}

std::string GgufValue::to_string(size_t max_items) const {
  std::ostringstream o;
  auto scalar = [&](GgufType t, size_t k) {
    if (t == GgufType::STRING) {
      const std::string& v = type == GgufType::ARRAY ? arr_s[k] : s;
      std::string shown = v.size() > 60 ? v.substr(0, 57) + "..." : v;
      for (char& c : shown) if (c == '\n') c = ' ';
      o << '"' << shown << '"';
    } else if (is_float(t)) {
      o << (type == GgufType::ARRAY ? arr_f[k] : f);
    } else if (is_signed_int(t)) {
      o << (type == GgufType::ARRAY ? arr_i[k] : i);
    } else if (t == GgufType::BOOL) {
      o << ((type == GgufType::ARRAY ? arr_u[k] : u) ? "true" : "false");
    } else {
      o << (type == GgufType::ARRAY ? arr_u[k] : u);
    }
  };
  if (type != GgufType::ARRAY) {
    scalar(type, 0);
    return o.str();
  }
  size_t n = array_size();
  o << "[" << gguf_type_name(elem) << " x " << n << "] ";
  for (size_t k = 0; k < n && k < max_items; ++k) {
    if (k) o << ", ";
    scalar(elem, k);
  }
  if (n > max_items) o << ", ...";
  return o.str();
}

int64_t GgufTensorInfo::n_elements() const {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  return n;
}

size_t gguf_tensor_bytes(QType type, const std::vector<int64_t>& ne) {
  if (ne.empty()) return qtype_row_bytes(type, 1);
  size_t rows = 1;
  for (size_t k = 1; k < ne.size(); ++k) rows *= static_cast<size_t>(ne[k]);
  return qtype_row_bytes(type, ne[0]) * rows;
}

// ---------------------------------------------------------------------------------------
// Reader

class GgufReader {
 public:
  GgufReader(GgufFile& f) : f_(f), p_(f.map_.data()), n_(f.map_.size()) {}

  void read() {
    if (n_ < 8) err(0, "file is too short to be GGUF (" + std::to_string(n_) + " bytes)");
    uint32_t magic = u32();
    if (magic != kMagic) {
      std::string hint = "expected a GGUF model file";
      if (std::memcmp(p_, "ggjt", 4) == 0 || std::memcmp(p_, "tjgg", 4) == 0 || std::memcmp(p_, "lmgg", 4) == 0)
        hint = "this is an old GGML/GGJT file: re-convert it to GGUF with llama.cpp";
      err(0, "wrong magic (not a GGUF file)", hint);
    }
    f_.version_ = u32();
    if (f_.version_ == 1) err(4, "GGUF version 1 is not supported", "re-convert the model with a current llama.cpp");
    if (f_.version_ != 2 && f_.version_ != 3)
      err(4, "unsupported GGUF version " + std::to_string(f_.version_), "nightlora reads GGUF v2 and v3");
    uint64_t n_tensors = u64(), n_kv = u64();
    if (n_tensors > kMaxTensors) err(8, "absurd tensor count " + std::to_string(n_tensors));
    if (n_kv > kMaxKv) err(16, "absurd metadata count " + std::to_string(n_kv));

    for (uint64_t k = 0; k < n_kv; ++k) {
      size_t at = pos_;
      std::string key = str();
      if (key.empty()) err(at, "empty metadata key");
      uint32_t t = u32();
      if (!is_valid_gguf_type(t)) err(at, "metadata '" + key + "' has unknown value type " + std::to_string(t));
      GgufValue v = value(static_cast<GgufType>(t), key, at);
      if (f_.kv_index_.count(key)) err(at, "duplicate metadata key '" + key + "'");
      f_.kv_index_[key] = f_.kv_.size();
      f_.kv_.emplace_back(std::move(key), std::move(v));
    }

    if (const GgufValue* a = f_.find("general.alignment")) {
      double al = a->is_array() || a->type == GgufType::STRING ? 0 : a->as_number();
      if (!(al >= 1 && al <= 65536) || (static_cast<uint64_t>(al) & (static_cast<uint64_t>(al) - 1)))
        err(0, "general.alignment must be a power of two between 1 and 65536, got " + a->to_string());
      f_.alignment_ = static_cast<size_t>(al);
    }

    for (uint64_t k = 0; k < n_tensors; ++k) {
      size_t at = pos_;
      GgufTensorInfo ti;
      ti.name = str();
      if (ti.name.empty()) err(at, "tensor " + std::to_string(k) + " has an empty name");
      uint32_t nd = u32();
      if (nd == 0 || nd > kMaxDims)
        err(at, "tensor '" + ti.name + "' has " + std::to_string(nd) + " dimensions (1 to 4 allowed)");
      int64_t total = 1;
      for (uint32_t d = 0; d < nd; ++d) {
        uint64_t ne = u64();
        if (ne == 0 || ne > (1ull << 40)) err(at, "tensor '" + ti.name + "' has an invalid dimension " + std::to_string(ne));
        if (total > std::numeric_limits<int64_t>::max() / static_cast<int64_t>(ne))
          err(at, "tensor '" + ti.name + "' has too many elements");
        total *= static_cast<int64_t>(ne);
        ti.ne.push_back(static_cast<int64_t>(ne));
      }
      uint32_t ty = u32();
      const QTypeInfo* info = qtype_info(ty);
      if (!info) err(at, "tensor '" + ti.name + "' has unknown type id " + std::to_string(ty),
                     "this file may need a newer reader; nightlora supports f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q4_K, q5_K, q6_K");
      ti.type = info->type;
      if (ti.ne[0] % info->block_size != 0)
        err(at, "tensor '" + ti.name + "' row length " + std::to_string(ti.ne[0]) + " is not a multiple of " +
                    info->name + "'s block size " + std::to_string(info->block_size));
      ti.offset = u64();
      if (ti.offset % f_.alignment_ != 0)
        err(at, "tensor '" + ti.name + "' offset " + std::to_string(ti.offset) + " is not aligned to " +
                    std::to_string(f_.alignment_));
      ti.nbytes = gguf_tensor_bytes(ti.type, ti.ne);
      if (f_.tensor_index_.count(ti.name)) err(at, "duplicate tensor name '" + ti.name + "'");
      f_.tensor_index_[ti.name] = f_.tensors_.size();
      f_.tensors_.push_back(std::move(ti));
    }

    size_t data = (pos_ + f_.alignment_ - 1) / f_.alignment_ * f_.alignment_;
    if (!f_.tensors_.empty() && data > n_) err(pos_, "file ends before the tensor data section (truncated?)");
    f_.data_offset_ = data;
    for (auto& ti : f_.tensors_) {
      uint64_t end = static_cast<uint64_t>(data) + ti.offset;
      if (ti.offset > n_ || end > n_ || ti.nbytes > n_ - end)
        err(end, "tensor '" + ti.name + "' (" + std::to_string(ti.nbytes) + " bytes at data offset " +
                     std::to_string(ti.offset) + ") extends past the end of the file (" + std::to_string(n_) +
                     " bytes): the file is truncated or corrupt",
            "download or convert the model again");
      ti.data = p_ + end;
    }
  }

 private:
  [[noreturn]] void err(size_t at, const std::string& what, const std::string& hint = "") {
    fail(f_.path() + " (byte " + std::to_string(at) + ")", what, hint);
  }

  void need(size_t k) {
    if (k > n_ - pos_) err(pos_, "unexpected end of file (need " + std::to_string(k) + " more bytes): truncated GGUF");
  }
  template <class T>
  T get() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  uint32_t u32() { return get<uint32_t>(); }
  uint64_t u64() { return get<uint64_t>(); }  // v2 and v3 both use 64-bit counts
  std::string str() {
    size_t at = pos_;
    uint64_t len = u64();
#if NL_FUZZ_PLANTED_BUG
    // A deliberate bug for the fuzzing self-test only (fuzz/CMakeLists.txt builds this file
    // with it into fuzz_gguf_planted; scripts/fuzz.sh --ci checks the fuzzer finds it): the
    // length is checked against the file's size instead of the bytes left, so a string near
    // the end may claim more than is there. Never defined in a real build.
    if (len > n_) err(at, "string length " + std::to_string(len) + " runs past the end of the file");
#else
    if (len > n_ - pos_) err(at, "string length " + std::to_string(len) + " runs past the end of the file");
#endif
    std::string s(reinterpret_cast<const char*>(p_ + pos_), static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    return s;
  }

  void scalar_into(GgufValue& v, GgufType t, bool array) {
    switch (t) {
      case GgufType::UINT8: { uint64_t x = get<uint8_t>(); array ? v.arr_u.push_back(x) : void(v.u = x); break; }
      case GgufType::UINT16: { uint64_t x = get<uint16_t>(); array ? v.arr_u.push_back(x) : void(v.u = x); break; }
      case GgufType::UINT32: { uint64_t x = get<uint32_t>(); array ? v.arr_u.push_back(x) : void(v.u = x); break; }
      case GgufType::UINT64: { uint64_t x = get<uint64_t>(); array ? v.arr_u.push_back(x) : void(v.u = x); break; }
      case GgufType::BOOL: {
        uint8_t b = get<uint8_t>();
        if (b > 1) err(pos_ - 1, "invalid bool value " + std::to_string(b));
        array ? v.arr_u.push_back(b) : void(v.u = b);
        break;
      }
      case GgufType::INT8: { int64_t x = get<int8_t>(); array ? v.arr_i.push_back(x) : void(v.i = x); break; }
      case GgufType::INT16: { int64_t x = get<int16_t>(); array ? v.arr_i.push_back(x) : void(v.i = x); break; }
      case GgufType::INT32: { int64_t x = get<int32_t>(); array ? v.arr_i.push_back(x) : void(v.i = x); break; }
      case GgufType::INT64: { int64_t x = get<int64_t>(); array ? v.arr_i.push_back(x) : void(v.i = x); break; }
      case GgufType::FLOAT32: { double x = get<float>(); array ? v.arr_f.push_back(x) : void(v.f = x); break; }
      case GgufType::FLOAT64: { double x = get<double>(); array ? v.arr_f.push_back(x) : void(v.f = x); break; }
      case GgufType::STRING: { std::string s = str(); array ? v.arr_s.push_back(std::move(s)) : void(v.s = std::move(s)); break; }
      default: err(pos_, "invalid value type");
    }
  }

  GgufValue value(GgufType t, const std::string& key, size_t at) {
    GgufValue v;
    v.type = t;
    if (t != GgufType::ARRAY) {
      scalar_into(v, t, false);
      return v;
    }
    uint32_t et = u32();
    if (!is_valid_gguf_type(et)) err(at, "array '" + key + "' has unknown element type " + std::to_string(et));
    v.elem = static_cast<GgufType>(et);
    if (v.elem == GgufType::ARRAY) err(at, "array '" + key + "' holds nested arrays, which nightlora does not read");
    uint64_t n = u64();
    // Each element takes at least one byte (strings at least 8), so a count larger than the
    // rest of the file is a lie; check before reserving memory.
    size_t min_elem = v.elem == GgufType::STRING ? 8 : scalar_size(v.elem);
    if (n > (n_ - pos_) / min_elem)
      err(at, "array '" + key + "' claims " + std::to_string(n) + " elements, more than the file can hold");
    if (v.elem == GgufType::STRING) v.arr_s.reserve(n);
    else if (is_float(v.elem)) v.arr_f.reserve(n);
    else if (is_signed_int(v.elem)) v.arr_i.reserve(n);
    else v.arr_u.reserve(n);
    for (uint64_t k = 0; k < n; ++k) scalar_into(v, v.elem, true);
    return v;
  }

  GgufFile& f_;
  const uint8_t* p_;
  size_t n_;
  size_t pos_ = 0;
};

std::unique_ptr<GgufFile> GgufFile::open(const std::string& path) {
  auto f = std::unique_ptr<GgufFile>(new GgufFile());
  f->map_ = FileMap(path);
  GgufReader(*f).read();
  return f;
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {
[[noreturn]] void bad_key(const std::string& path, const std::string& key, const std::string& what) {
  fail(path, "metadata '" + key + "' " + what);
}
}  // namespace

std::string GgufFile::get_str(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) bad_key(path(), key, "is missing");
  if (v->type != GgufType::STRING) bad_key(path(), key, std::string("should be a string, is ") + gguf_type_name(v->type));
  return v->s;
}
std::string GgufFile::get_str(const std::string& key, const std::string& def) const {
  return has(key) ? get_str(key) : def;
}
uint64_t GgufFile::get_uint(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) bad_key(path(), key, "is missing");
  if (v->type == GgufType::ARRAY || v->type == GgufType::STRING || is_float(v->type))
    bad_key(path(), key, std::string("should be an integer, is ") + gguf_type_name(v->type));
  if (is_signed_int(v->type) && v->i < 0) bad_key(path(), key, "is negative");
  return is_signed_int(v->type) ? static_cast<uint64_t>(v->i) : v->u;
}
uint64_t GgufFile::get_uint(const std::string& key, uint64_t def) const { return has(key) ? get_uint(key) : def; }
double GgufFile::get_float(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) bad_key(path(), key, "is missing");
  if (v->type == GgufType::ARRAY || v->type == GgufType::STRING)
    bad_key(path(), key, std::string("should be a number, is ") + gguf_type_name(v->type));
  double d = v->as_number();
  if (!std::isfinite(d)) bad_key(path(), key, "is not finite");
  return d;
}
double GgufFile::get_float(const std::string& key, double def) const { return has(key) ? get_float(key) : def; }
bool GgufFile::get_bool(const std::string& key, bool def) const {
  const GgufValue* v = find(key);
  if (!v) return def;
  if (v->type != GgufType::BOOL) bad_key(path(), key, std::string("should be a bool, is ") + gguf_type_name(v->type));
  return v->u != 0;
}

// ---------------------------------------------------------------------------------------
// Writer

void GgufWriter::set(const std::string& key, GgufValue v) {
  for (auto& kv : kv_)
    if (kv.first == key) {
      kv.second = std::move(v);
      return;
    }
  kv_.emplace_back(key, std::move(v));
}

void GgufWriter::add_tensor(const std::string& name, QType type, std::vector<int64_t> ne, Fill fill) {
  if (ne.empty() || ne.size() > kMaxDims) fail("gguf writer", "tensor '" + name + "' must have 1 to 4 dimensions");
  gguf_tensor_bytes(type, ne);  // validates the shape against the block size
  for (const auto& t : tensors_)
    if (t.name == name) fail("gguf writer", "duplicate tensor '" + name + "'");
  tensors_.push_back({name, type, std::move(ne), std::move(fill)});
}

void GgufWriter::add_tensor_data(const std::string& name, QType type, std::vector<int64_t> ne, const void* src) {
  add_tensor(name, type, std::move(ne), [src](uint8_t* dst, size_t n) { std::memcpy(dst, src, n); });
}

namespace {

class OutFile {
 public:
  explicit OutFile(std::string path) : path_(std::move(path)) {
    fd_ = file_ops().create(path_);
    if (fd_ < 0) fail(path_, std::string("cannot create: ") + std::strerror(errno));
  }
  ~OutFile() {
    if (fd_ >= 0) file_ops().close(fd_);
  }
  void write(const void* p, size_t n) {
    // Tensor data goes straight to the file: copying a whole tensor into the buffer would
    // double the writer's peak memory for the largest tensor.
    if (n >= kBufferBytes) {
      flush();
      write_all(static_cast<const uint8_t*>(p), n);
      written_ += n;
      return;
    }
    buf_.insert(buf_.end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
    if (buf_.size() >= kBufferBytes) flush();
  }
  template <class T>
  void put(T v) { write(&v, sizeof v); }
  void put_str(const std::string& s) {
    put<uint64_t>(s.size());
    write(s.data(), s.size());
  }
  void pad_to(size_t align) {
    static const uint8_t zeros[64] = {};
    while (pos() % align) write(zeros, std::min<size_t>(align - pos() % align, sizeof zeros));
  }
  size_t pos() const { return written_ + buf_.size(); }
  void flush() {
    write_all(buf_.data(), buf_.size());
    written_ += buf_.size();
    buf_.clear();
  }
  void sync_close() {
    flush();
    if (file_ops().fsync(fd_) != 0) fail(path_, std::string("fsync failed: ") + std::strerror(errno), "is the disk full?");
    const int rc = file_ops().close(fd_);
    fd_ = -1;
    if (rc != 0) fail(path_, std::string("close failed: ") + std::strerror(errno));
  }

 private:
  static constexpr size_t kBufferBytes = size_t{1} << 22;

  void write_all(const uint8_t* p, size_t n) { write_all_or_throw(fd_, path_, p, n); }

  std::string path_;
  int fd_ = -1;
  std::vector<uint8_t> buf_;
  size_t written_ = 0;
};

void put_value(OutFile& o, const GgufValue& v) {
  auto scalar = [&](GgufType t, size_t k, bool arr) {
    switch (t) {
      case GgufType::UINT8: o.put<uint8_t>(static_cast<uint8_t>(arr ? v.arr_u[k] : v.u)); break;
      case GgufType::UINT16: o.put<uint16_t>(static_cast<uint16_t>(arr ? v.arr_u[k] : v.u)); break;
      case GgufType::UINT32: o.put<uint32_t>(static_cast<uint32_t>(arr ? v.arr_u[k] : v.u)); break;
      case GgufType::UINT64: o.put<uint64_t>(arr ? v.arr_u[k] : v.u); break;
      case GgufType::BOOL: o.put<uint8_t>((arr ? v.arr_u[k] : v.u) ? 1 : 0); break;
      case GgufType::INT8: o.put<int8_t>(static_cast<int8_t>(arr ? v.arr_i[k] : v.i)); break;
      case GgufType::INT16: o.put<int16_t>(static_cast<int16_t>(arr ? v.arr_i[k] : v.i)); break;
      case GgufType::INT32: o.put<int32_t>(static_cast<int32_t>(arr ? v.arr_i[k] : v.i)); break;
      case GgufType::INT64: o.put<int64_t>(arr ? v.arr_i[k] : v.i); break;
      case GgufType::FLOAT32: o.put<float>(static_cast<float>(arr ? v.arr_f[k] : v.f)); break;
      case GgufType::FLOAT64: o.put<double>(arr ? v.arr_f[k] : v.f); break;
      case GgufType::STRING: o.put_str(arr ? v.arr_s[k] : v.s); break;
      default: fail("gguf writer", "cannot write a nested array");
    }
  };
  o.put<uint32_t>(static_cast<uint32_t>(v.type));
  if (v.type != GgufType::ARRAY) {
    scalar(v.type, 0, false);
    return;
  }
  o.put<uint32_t>(static_cast<uint32_t>(v.elem));
  size_t n = v.array_size();
  o.put<uint64_t>(n);
  for (size_t k = 0; k < n; ++k) scalar(v.elem, k, true);
}

}  // namespace

void GgufWriter::write(const std::string& path) const {
  std::string tmp = path + ".tmp";
  try {
    OutFile o(tmp);
    o.put<uint32_t>(kMagic);
    o.put<uint32_t>(3);
    o.put<uint64_t>(tensors_.size());
    bool has_align = false;
    for (const auto& kv : kv_) has_align |= kv.first == "general.alignment";
    o.put<uint64_t>(kv_.size() + (alignment_ != 32 && !has_align ? 1 : 0));
    for (const auto& kv : kv_) {
      o.put_str(kv.first);
      put_value(o, kv.second);
    }
    if (alignment_ != 32 && !has_align) {
      o.put_str("general.alignment");
      put_value(o, GgufValue::u32(static_cast<uint32_t>(alignment_)));
    }
    uint64_t off = 0;
    std::vector<uint64_t> offsets;
    for (const auto& t : tensors_) {
      o.put_str(t.name);
      o.put<uint32_t>(static_cast<uint32_t>(t.ne.size()));
      for (int64_t d : t.ne) o.put<uint64_t>(static_cast<uint64_t>(d));
      o.put<uint32_t>(static_cast<uint32_t>(t.type));
      o.put<uint64_t>(off);
      offsets.push_back(off);
      off += (gguf_tensor_bytes(t.type, t.ne) + alignment_ - 1) / alignment_ * alignment_;
    }
    o.pad_to(alignment_);
    std::vector<uint8_t> buf;
    for (const auto& t : tensors_) {
      size_t nb = gguf_tensor_bytes(t.type, t.ne);
      buf.assign(nb, 0);
      t.fill(buf.data(), nb);
      o.write(buf.data(), nb);
      o.pad_to(alignment_);
    }
    o.sync_close();
  } catch (...) {
    file_ops().unlink(tmp);
    throw;
  }
  // As every file that must survive (job/file_ops.h): renamed only once its data is on disk,
  // then the folder synced so the new name survives a power cut, then promised.
  if (file_ops().rename(tmp, path) != 0) {
    int e = errno;
    file_ops().unlink(tmp);
    fail(path, std::string("cannot rename the finished file into place: ") + std::strerror(e));
  }
  sync_dir_or_throw(parent_folder(path));
  file_ops().promised(path);
}

}  // namespace nl
