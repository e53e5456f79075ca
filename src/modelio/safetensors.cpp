// safetensors reader and writer. The reader trusts nothing in the file: the header length,
// the JSON, every dtype, shape and byte range is checked before a view is handed out, so a
// truncated or hostile file gives an nl::Error naming the file, the tensor and the problem.
#include "nightlora/util/strformat.h"
#include "nightlora/modelio/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "nightlora/job/file_ops.h"
#include "nightlora/util/error.h"
#include "nightlora/util/half.h"
#include "nightlora/util/json_read.h"

namespace nl {

namespace {

using json = nlohmann::json;

// The reference implementation refuses headers above 100 MB; a real header (even for a
// sharded 70B model) is a few hundred KB.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;
constexpr size_t kMaxSafetensorsDims = 8;

struct DtypeName {
  const char* name;
  QType type;
  size_t size;
};
constexpr DtypeName kDtypes[] = {
    {"F32", QType::F32, 4}, {"F16", QType::F16, 2}, {"BF16", QType::BF16, 2}, {"F64", QType::F64, 8},
    {"I8", QType::I8, 1},   {"I16", QType::I16, 2}, {"I32", QType::I32, 4},   {"I64", QType::I64, 8},
};

const DtypeName* find_dtype(const std::string& name) {
  for (const auto& d : kDtypes)
    if (name == d.name) return &d;
  return nullptr;
}

// Element count of a shape, or -1 when it overflows.
int64_t checked_elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return -1;
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) return -1;
    n *= d;
  }
  return n;
}

}  // namespace

int64_t SafetensorsTensor::n_elements() const { return checked_elements(shape); }

const char* safetensors_dtype_name(QType t) {
  for (const auto& d : kDtypes)
    if (d.type == t) return d.name;
  fail("safetensors", std::string("type ") + qtype_name(t) + " cannot be stored in safetensors",
       "use F32, F16 or BF16");
}

size_t safetensors_dtype_size(QType t) {
  for (const auto& d : kDtypes)
    if (d.type == t) return d.size;
  fail("safetensors", std::string("type ") + qtype_name(t) + " cannot be stored in safetensors",
       "use F32, F16 or BF16");
}

// ---------------------------------------------------------------------------------------
// Reader

std::unique_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  auto f = std::unique_ptr<SafetensorsFile>(new SafetensorsFile());
  f->map_ = FileMap(path);
  const uint8_t* base = f->map_.data();
  const size_t size = f->map_.size();
  const std::string where = path;

  if (size < 8) fail(where, "file too short for a safetensors header (" + std::to_string(size) + " bytes)", "the file is truncated or not a safetensors file");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = header_len << 8 | base[i];
  if (header_len > kMaxHeaderBytes)
    fail(where, "header length " + std::to_string(header_len) + " bytes is absurd (limit 100 MB)", "the file is corrupt or not a safetensors file");
  if (header_len > size - 8)
    fail(where, "header length " + std::to_string(header_len) + " runs past the end of the file (" + std::to_string(size) + " bytes)", "the file is truncated");
  if (header_len < 2 || base[8] != '{')
    fail(where, "header does not start with a JSON object", "not a safetensors file");

  const json header = parse_json(std::string_view(reinterpret_cast<const char*>(base) + 8, static_cast<size_t>(header_len)),
                                 where + " (JSON header)", "the file is corrupt or truncated");
  if (!header.is_object()) fail(where, "header is not a JSON object", "not a safetensors file");

  const size_t data_start = 8 + static_cast<size_t>(header_len);
  const size_t data_size = size - data_start;

  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) fail(where, "__metadata__ is not an object of strings");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string()) fail(where, "__metadata__ entry '" + m.key() + "' is not a string");
        f->metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string tw = where + ": tensor '" + name + "'";
    if (!v.is_object()) fail(tw, "entry is not an object");
    if (!v.contains("dtype") || !v["dtype"].is_string()) fail(tw, "missing or non-string \"dtype\"");
    if (!v.contains("shape") || !v["shape"].is_array()) fail(tw, "missing or non-array \"shape\"");
    if (!v.contains("data_offsets") || !v["data_offsets"].is_array() || v["data_offsets"].size() != 2)
      fail(tw, "\"data_offsets\" must be an array [begin, end]");

    SafetensorsTensor t;
    t.name = name;
    std::string dtype = v["dtype"].get<std::string>();
    const DtypeName* d = find_dtype(dtype);
    if (!d) fail(tw, "unsupported dtype \"" + dtype + "\"", "model weights must be F32, F16 or BF16");
    t.dtype = d->type;

    if (v["shape"].size() > kMaxSafetensorsDims) fail(tw, "shape has " + std::to_string(v["shape"].size()) + " dimensions (at most 8 supported)");
    for (const json& dim : v["shape"]) {
      if (!dim.is_number_unsigned() || dim.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        fail(tw, "shape element " + json_brief(dim) + " is not a non-negative integer");
      t.shape.push_back(static_cast<int64_t>(dim.get<uint64_t>()));
    }
    int64_t n = checked_elements(t.shape);
    if (n < 0 || static_cast<uint64_t>(n) > std::numeric_limits<uint64_t>::max() / d->size)
      fail(tw, "shape " + shape_string(t.shape) + " is too large");
    uint64_t want_bytes = static_cast<uint64_t>(n) * d->size;

    for (const json& o : v["data_offsets"])
      if (!o.is_number_unsigned()) fail(tw, "data_offsets element " + json_brief(o) + " is not a non-negative integer");
    uint64_t begin = v["data_offsets"][0].get<uint64_t>();
    uint64_t end = v["data_offsets"][1].get<uint64_t>();
    if (end < begin) fail(tw, "data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + "] end before they begin");
    if (end > data_size)
      fail(tw, "data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + "] run past the end of the data (" +
                   std::to_string(data_size) + " bytes)",
           "the file is truncated or corrupt");
    if (end - begin != want_bytes)
      fail(tw, "shape " + shape_string(t.shape) + " of " + dtype + " needs " + std::to_string(want_bytes) + " bytes but data_offsets hold " +
                   std::to_string(end - begin));
    t.data = base + data_start + begin;
    t.nbytes = static_cast<size_t>(want_bytes);
    f->tensors_.push_back(std::move(t));
  }

  // Two tensors must never share bytes: sort by offset and compare neighbours.
  std::sort(f->tensors_.begin(), f->tensors_.end(), [](const auto& a, const auto& b) {
    return a.data != b.data ? a.data < b.data : a.nbytes < b.nbytes;
  });
  for (size_t i = 1; i < f->tensors_.size(); ++i) {
    const auto& a = f->tensors_[i - 1];
    const auto& b = f->tensors_[i];
    if (a.nbytes > 0 && b.nbytes > 0 && a.data + a.nbytes > b.data)
      fail(where + ": tensor '" + b.name + "'", "data overlaps tensor '" + a.name + "'", "the file is corrupt");
  }
  for (size_t i = 0; i < f->tensors_.size(); ++i) f->index_[f->tensors_[i].name] = i;
  return f;
}

const SafetensorsTensor* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

// ---------------------------------------------------------------------------------------
// Writer

SafetensorsOut SafetensorsOut::from_f32(std::string name, std::vector<int64_t> shape, const float* data, QType dtype) {
  SafetensorsOut o;
  o.name = std::move(name);
  o.dtype = dtype;
  o.shape = std::move(shape);
  int64_t n = checked_elements(o.shape);
  if (n < 0) fail("safetensors writer", "tensor '" + o.name + "' has an invalid shape " + shape_string(o.shape));
  size_t es = safetensors_dtype_size(dtype);
  o.bytes.resize(static_cast<size_t>(n) * es);
  for (int64_t i = 0; i < n; ++i) {
    switch (dtype) {
      case QType::F32: std::memcpy(&o.bytes[i * 4], &data[i], 4); break;
      case QType::F16: { uint16_t h = f32_to_fp16(data[i]); std::memcpy(&o.bytes[i * 2], &h, 2); break; }
      case QType::BF16: { uint16_t h = f32_to_bf16(data[i]); std::memcpy(&o.bytes[i * 2], &h, 2); break; }
      default: fail("safetensors writer", std::string("from_f32 cannot produce ") + safetensors_dtype_name(dtype), "use F32, F16 or BF16");
    }
  }
  return o;
}

namespace {

}  // namespace

void write_safetensors(const std::string& path, const std::vector<SafetensorsOut>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  // Validate first, so nothing is created for a bad request.
  std::set<std::string> names;
  for (const auto& t : tensors) {
    if (t.name == "__metadata__") fail("safetensors writer", "a tensor cannot be named __metadata__");
    if (!names.insert(t.name).second) fail("safetensors writer", "duplicate tensor '" + t.name + "'");
    int64_t n = checked_elements(t.shape);
    if (n < 0) fail("safetensors writer", "tensor '" + t.name + "' has an invalid shape " + shape_string(t.shape));
    size_t want = static_cast<size_t>(n) * safetensors_dtype_size(t.dtype);
    if (want != t.bytes.size())
      fail("safetensors writer", "tensor '" + t.name + "': shape " + shape_string(t.shape) + " needs " + std::to_string(want) +
                                     " bytes, got " + std::to_string(t.bytes.size()));
  }

  // nlohmann's ordered_json keeps our tensor order in the header (readers do not care, but
  // it makes files diffable and deterministic).
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json m = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header["__metadata__"] = m;
  }
  uint64_t off = 0;
  for (const auto& t : tensors) {
    nlohmann::ordered_json e;
    e["dtype"] = safetensors_dtype_name(t.dtype);
    e["shape"] = t.shape;
    e["data_offsets"] = {off, off + t.bytes.size()};
    header[t.name] = e;
    off += t.bytes.size();
  }
  std::string text = header.dump();
  // Pad with spaces so the data buffer starts 8-byte aligned, as the reference writer does.
  while ((8 + text.size()) % 8) text.push_back(' ');

  // Through nl::file_ops() (job/file_ops.h), in the order that survives a power cut: data
  // fsync'd, renamed into place, the folder fsync'd, then promised.
  std::string tmp = path + ".tmp";
  int fd = file_ops().create(tmp);
  if (fd < 0) fail(tmp, std::string("cannot create: ") + std::strerror(errno), "check that the folder exists and is writable");
  try {
    uint8_t len[8];
    uint64_t n = text.size();
    for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(n >> (8 * i));
    write_all_or_throw(fd, tmp, len, 8);
    write_all_or_throw(fd, tmp, text.data(), text.size());
    for (const auto& t : tensors) write_all_or_throw(fd, tmp, t.bytes.data(), t.bytes.size());
    if (file_ops().fsync(fd) != 0) fail(tmp, std::string("fsync failed: ") + std::strerror(errno), "is the disk full?");
    int rc = file_ops().close(fd);
    fd = -1;
    if (rc != 0) fail(tmp, std::string("close failed: ") + std::strerror(errno));
  } catch (...) {
    if (fd >= 0) file_ops().close(fd);
    file_ops().unlink(tmp);
    throw;
  }
  if (file_ops().rename(tmp, path) != 0) {
    int e = errno;
    file_ops().unlink(tmp);
    fail(path, std::string("cannot rename the finished file into place: ") + std::strerror(e));
  }
  sync_dir_or_throw(parent_folder(path));
  file_ops().promised(path);
}

}  // namespace nl
