#include "nightlora/util/strformat.h"
#include "nightlora/modelio/quantize_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <sstream>

#include "nightlora/modelio/gguf.h"
#include "nightlora/util/error.h"
#include "nightlora/util/thread_pool.h"

namespace nl {

namespace {
const char* const kTargets = "f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_K, q5_K, q6_K, q4_K_M or q5_K_M";
}  // namespace

QuantTarget parse_quant_target(const std::string& name) {
  if (name.size() > 2 && (name.substr(name.size() - 2) == "_M" || name.substr(name.size() - 2) == "_m")) {
    const std::string base = name.substr(0, name.size() - 2);
    if (base == "q4_K" || base == "q4_k") return {QType::Q4_K, true};
    if (base == "q5_K" || base == "q5_k") return {QType::Q5_K, true};
    fail("type '" + name + "'", "is not a quantization nightlora writes", std::string("use one of ") + kTargets);
  }
  return {parse_qtype(name), false};
}

std::string quant_target_name(const QuantTarget& t) { return std::string(qtype_name(t.type)) + (t.medium ? "_M" : ""); }

uint32_t llama_ftype_for(const QuantTarget& target) {
  // Values of llama.cpp's enum llama_ftype (include/llama.h). A file where every matrix is
  // one K-quant is what llama.cpp calls the "_S" (small) mix of that type.
  const QType t = target.type;
  if (target.medium) {
    if (t == QType::Q4_K) return 15;  // LLAMA_FTYPE_MOSTLY_Q4_K_M
    if (t == QType::Q5_K) return 17;  // LLAMA_FTYPE_MOSTLY_Q5_K_M
    fail(std::string("type ") + quant_target_name(target), "has no llama.cpp file type", std::string("use one of ") + kTargets);
  }
  switch (t) {
    case QType::F32: return 0;    // LLAMA_FTYPE_ALL_F32
    case QType::F16: return 1;    // LLAMA_FTYPE_MOSTLY_F16
    case QType::Q4_0: return 2;   // LLAMA_FTYPE_MOSTLY_Q4_0
    case QType::Q4_1: return 3;   // LLAMA_FTYPE_MOSTLY_Q4_1
    case QType::Q8_0: return 7;   // LLAMA_FTYPE_MOSTLY_Q8_0
    case QType::Q5_0: return 8;   // LLAMA_FTYPE_MOSTLY_Q5_0
    case QType::Q5_1: return 9;   // LLAMA_FTYPE_MOSTLY_Q5_1
    case QType::Q4_K: return 14;  // LLAMA_FTYPE_MOSTLY_Q4_K_S
    case QType::Q5_K: return 16;  // LLAMA_FTYPE_MOSTLY_Q5_K_S
    case QType::Q6_K: return 18;  // LLAMA_FTYPE_MOSTLY_Q6_K
    case QType::BF16: return 32;  // LLAMA_FTYPE_MOSTLY_BF16
    default:
      fail(std::string("type ") + qtype_info(t).name, "has no llama.cpp file type", std::string("use one of ") + kTargets);
  }
}

bool is_quantizable_matrix(const std::string& name, const std::vector<int64_t>& ne) {
  static const std::string suffix = ".weight";
  const bool is_weight = name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  return is_weight && ne.size() == 2;
}

QType matrix_type_for(QType wanted, int64_t row_len, std::string* why) {
  if (why) why->clear();
  const QTypeInfo& w = qtype_info(wanted);
  if (row_len % w.block_size == 0) return wanted;

  QType fallback = QType::F16;
  switch (wanted) {
    case QType::Q4_K: fallback = QType::Q5_0; break;
    case QType::Q5_K: fallback = QType::Q5_1; break;
    case QType::Q6_K: fallback = QType::Q8_0; break;
    default: break;  // legacy 32-element types: nothing smaller than f16 fits either
  }
  if (row_len % qtype_info(fallback).block_size != 0) fallback = QType::F16;
  if (why)
    *why = "rows of " + std::to_string(row_len) + " elements are not whole " + std::to_string(w.block_size) +
           "-element " + w.name + " blocks; using " + qtype_name(fallback);
  return fallback;
}

QType matrix_type_for(const QuantTarget& t, const std::string& tensor, int64_t row_len, int64_t n_layer,
                      bool separate_output, std::string* why) {
  QType wanted = t.type;
  if (t.medium) {
    int layer = -1;
    std::sscanf(tensor.c_str(), "blk.%d.", &layer);
    const auto has = [&](const char* part) { return tensor.find(part) != std::string::npos; };
    if (tensor == "output.weight" || (!separate_output && tensor == "token_embd.weight"))
      wanted = row_len % qtype_info(QType::Q6_K).block_size != 0 ? QType::Q8_0 : QType::Q6_K;
    else if ((has("attn_v.weight") || has("ffn_down")) && layer >= 0 && use_more_bits(layer, n_layer))
      wanted = QType::Q6_K;
  }
  return matrix_type_for(wanted, row_len, why);
}

void convert_tensor_rows(const GgufTensorInfo& t, QType to, uint8_t* dst, size_t dst_bytes, const std::string& file,
                         ThreadPool& pool, const RowAdjust& adjust) {
  const int64_t cols = t.ne[0];
  const int64_t rows = t.n_elements() / cols;
  const size_t in_row = qtype_row_bytes(t.type, cols);
  const size_t out_row = qtype_row_bytes(to, cols);
  if (out_row * static_cast<size_t>(rows) != dst_bytes || in_row * static_cast<size_t>(rows) != t.nbytes)
    fail(file, "tensor '" + t.name + "': internal size mismatch while quantizing");

  // Pool tasks must not throw: the first non-finite value (lowest row) is recorded and
  // reported after the loop.
  std::mutex mu;
  int64_t bad_row = -1, bad_col = -1;
  float bad_value = 0;
  pool.parallel_ranges(rows, [&](int64_t r0, int64_t r1) {
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = r0; r < r1; ++r) {
      dequantize_row(t.type, t.data + static_cast<size_t>(r) * in_row, row.data(), cols);
      if (adjust) adjust(r, row.data());
      for (int64_t c = 0; c < cols; ++c) {
        if (std::isfinite(row[static_cast<size_t>(c)])) continue;
        std::lock_guard<std::mutex> lock(mu);
        if (bad_row < 0 || r < bad_row) {
          bad_row = r;
          bad_col = c;
          bad_value = row[static_cast<size_t>(c)];
        }
        return;
      }
      quantize_row(to, row.data(), dst + static_cast<size_t>(r) * out_row, cols);
    }
  });
  if (bad_row >= 0)
    fail(file, "tensor '" + t.name + "' has a non-finite value (" + std::to_string(bad_value) + ") at row " +
                   std::to_string(bad_row) + ", column " + std::to_string(bad_col),
         adjust ? "the base model or an adapter holds non-finite values; check both files"
                : "the model file is damaged; quantizing it would spread the damage over whole blocks");
}

namespace {

std::string mib(size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

}  // namespace

QuantizeSummary quantize_gguf(const std::string& in_path, const std::string& out_path, const QuantTarget& target,
                              int n_threads) {
  const QTypeInfo& info = qtype_info(target.type);
  if (!info.supported)
    fail(std::string("type ") + info.name, "cannot quantize to this type", std::string("use one of ") + kTargets);

  std::unique_ptr<GgufFile> in = GgufFile::open(in_path);
  QuantizeSummary s;
  s.requested = target;
  s.file_type = llama_ftype_for(target);
  s.file_bytes_in = in->file_size();
  // The mixes' rules look at the layer count and whether the head is tied to the embedding.
  int64_t n_layer = 0;
  bool separate_output = false;
  for (const GgufTensorInfo& t : in->tensors()) {
    int layer = -1;
    if (std::sscanf(t.name.c_str(), "blk.%d.", &layer) == 1) n_layer = std::max<int64_t>(n_layer, layer + 1);
    separate_output = separate_output || t.name == "output.weight";
  }

  ThreadPool pool(n_threads);
  GgufWriter w;
  w.set_alignment(in->alignment());
  for (const auto& [key, value] : in->metadata()) w.set(key, value);
  w.set("general.file_type", GgufValue::u32(s.file_type));

  for (const GgufTensorInfo& t : in->tensors()) {
    TensorQuantResult r;
    r.name = t.name;
    r.ne = t.ne;
    r.from = t.type;
    r.bytes_in = t.nbytes;
    r.to = t.type;
    if (is_quantizable_matrix(t.name, t.ne))
      r.to = matrix_type_for(target, t.name, t.ne[0], n_layer, separate_output, &r.fallback);
    r.converted = r.to != r.from;
    if (r.converted && !qtype_info(r.from).supported)
      fail(in_path, "tensor '" + t.name + "' has type " + qtype_name(r.from) + ", which we cannot dequantize",
           "start from an f32, f16, bf16 or q8_0 model");
    r.bytes_out = gguf_tensor_bytes(r.to, t.ne);

    const GgufTensorInfo* src = &t;  // owned by `in`, which outlives w.write()
    if (r.converted) {
      const QType to = r.to;
      w.add_tensor(t.name, to, t.ne,
                   [src, to, in_path, &pool](uint8_t* dst, size_t n) { convert_tensor_rows(*src, to, dst, n, in_path, pool); });
    } else {
      w.add_tensor(t.name, t.type, t.ne, [src, in_path](uint8_t* dst, size_t n) {
        if (n != src->nbytes) fail(in_path, "tensor '" + src->name + "': internal size mismatch while copying");
        std::memcpy(dst, src->data, n);
      });
    }
    s.bytes_in += r.bytes_in;
    s.bytes_out += r.bytes_out;
    s.n_converted += r.converted ? 1 : 0;
    s.n_fallback += r.fallback.empty() ? 0 : 1;
    s.tensors.push_back(std::move(r));
  }

  w.write(out_path);
  std::unique_ptr<GgufFile> out = GgufFile::open(out_path);  // a final check that it reads back
  s.file_bytes_out = out->file_size();
  return s;
}

std::string format_quantize_summary(const QuantizeSummary& s, bool per_tensor) {
  std::ostringstream o;
  size_t width = 0;
  for (const auto& t : s.tensors) width = std::max(width, t.name.size());
  for (const auto& t : s.tensors) {
    if (!per_tensor) break;
    char line[512];
    std::string types = t.converted ? std::string(qtype_name(t.from)) + " -> " + qtype_name(t.to)
                                    : std::string(qtype_name(t.from)) + " (kept)";
    std::snprintf(line, sizeof line, "  %-*s %-14s %-16s %10zu -> %10zu bytes", static_cast<int>(width), t.name.c_str(),
                  shape_string(t.ne).c_str(), types.c_str(), t.bytes_in, t.bytes_out);
    o << line << "\n";
  }
  if (s.n_fallback) {
    o << s.n_fallback << " tensor(s) could not use " << quant_target_name(s.requested) << "'s types:\n";
    for (const auto& t : s.tensors)
      if (!t.fallback.empty()) o << "  " << t.name << ": " << t.fallback << "\n";
  }
  o << "converted " << s.n_converted << " of " << s.tensors.size() << " tensors (requested " << quant_target_name(s.requested)
    << ", " << s.n_fallback << " fallback(s)); general.file_type = " << s.file_type << "\n";
  o << "tensor data: " << mib(s.bytes_in) << " -> " << mib(s.bytes_out) << "; file: " << mib(s.file_bytes_in) << " -> "
    << mib(s.file_bytes_out) << "\n";
  return o.str();
}

}  // namespace nl
