// GGUF model writing shared by `convert` and `synth-model`. Tensors are produced and
// quantized row by row inside the GGUF writer's fill callback, in parallel over rows, so a
// multi-gigabyte model needs memory for one tensor at a time, never for the whole model.
#include "nightlora/modelio/convert.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <mutex>
#include <thread>

#include "nightlora/modelio/gguf.h"
#include "nightlora/modelio/gguf_names.h"
#include "nightlora/modelio/quantize_model.h"
#include "nightlora/tokenizer/tokenizer.h"
#include "nightlora/util/error.h"

namespace nl {

int64_t hf_row_for_gguf_row(int64_t out_row, int64_t head_dim) {
  const int64_t half = head_dim / 2;
  const int64_t head = out_row / head_dim, k = out_row % head_dim;
  const int64_t i = k / 2, j = k % 2;
  return head * head_dim + j * half + i;
}

std::vector<float> llama3_rope_freq_factors(const ModelConfig& c) {
  // Mirrors llama.cpp's convert_hf_to_gguf (LlamaModel.generate_extra_tensors), in float32
  // as it computes them with torch.
  const RopeScaling& s = c.rope_scaling;
  const float low_wavelen = static_cast<float>(s.original_context) / s.low_freq_factor;
  const float high_wavelen = static_cast<float>(s.original_context) / s.high_freq_factor;
  std::vector<float> out;
  for (int64_t i = 0; i < c.head_dim; i += 2) {
    float freq = 1.0f / std::pow(c.rope_theta, static_cast<float>(i) / static_cast<float>(c.head_dim));
    float wavelen = static_cast<float>(2.0 * M_PI) / freq;
    if (wavelen < high_wavelen) {
      out.push_back(1.0f);
    } else if (wavelen > low_wavelen) {
      out.push_back(s.factor);
    } else {
      float smooth = (static_cast<float>(s.original_context) / wavelen - s.low_freq_factor) /
                     (s.high_freq_factor - s.low_freq_factor);
      out.push_back(1.0f / ((1.0f - smooth) / s.factor + smooth));
    }
  }
  return out;
}

namespace {

int64_t rows_of(const std::vector<int64_t>& ne) {
  int64_t r = 1;
  for (size_t i = 1; i < ne.size(); ++i) r *= ne[i];
  return r;
}

// Appends placeholder tokens until the vocabulary has `vocab` entries, as llama.cpp's
// converter does for models whose embedding has more rows than the tokenizer has tokens.
int64_t pad_vocabulary(GgufWriter& w, int64_t vocab) {
  const GgufValue* tokens = w.find("tokenizer.ggml.tokens");
  if (!tokens) return 0;
  const int64_t have = static_cast<int64_t>(tokens->array_size());
  if (have > vocab)
    fail("gguf writer", "the tokenizer has " + std::to_string(have) + " tokens but the model only " + std::to_string(vocab) +
                            " embedding rows",
         "tokenizer and model do not belong together");
  if (have == vocab) return 0;
  GgufValue t = *tokens;
  for (int64_t i = have; i < vocab; ++i) t.arr_s.push_back("[PAD" + std::to_string(i) + "]");
  w.set("tokenizer.ggml.tokens", std::move(t));
  auto pad_array = [&](const char* key, double value) {
    const GgufValue* v = w.find(key);
    if (!v || !v->is_array() || static_cast<int64_t>(v->array_size()) != have) return;
    GgufValue x = *v;
    for (int64_t i = have; i < vocab; ++i) {
      if (x.elem == GgufType::FLOAT32 || x.elem == GgufType::FLOAT64)
        x.arr_f.push_back(value);
      else if (x.elem == GgufType::INT8 || x.elem == GgufType::INT16 || x.elem == GgufType::INT32 || x.elem == GgufType::INT64)
        x.arr_i.push_back(static_cast<int64_t>(value));
      else
        x.arr_u.push_back(static_cast<uint64_t>(value));
    }
    w.set(key, std::move(x));
  };
  pad_array("tokenizer.ggml.token_type", 5);  // llama.cpp's UNUSED token type
  pad_array("tokenizer.ggml.scores", -1000.0);
  return vocab - have;
}

// Produces a tensor's rows into `dst`, quantized to `type`, on several threads.
void fill_rows(const GgufTensorSource& src, QType type, uint8_t* dst, size_t nbytes) {
  const int64_t cols = src.ne[0], rows = rows_of(src.ne);
  const size_t row_bytes = qtype_row_bytes(type, cols);
  if (row_bytes * static_cast<size_t>(rows) != nbytes)
    fail("gguf writer", "internal size mismatch for tensor '" + src.name + "'");
  unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  // Small tensors are not worth a thread.
  const int64_t work = rows * cols;
  unsigned n_threads = work < (int64_t{1} << 16) ? 1u : static_cast<unsigned>(std::min<int64_t>(hw, rows));
  std::atomic<int64_t> next{0};
  std::exception_ptr error;
  std::mutex error_mu;
  auto worker = [&] {
    std::vector<float> buf(static_cast<size_t>(cols));
    try {
      constexpr int64_t kChunk = 16;
      for (;;) {
        int64_t r0 = next.fetch_add(kChunk);
        if (r0 >= rows) break;
        for (int64_t r = r0; r < std::min(rows, r0 + kChunk); ++r) {
          src.row(r, buf.data());
          quantize_row(type, buf.data(), dst + static_cast<size_t>(r) * row_bytes, cols);
        }
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mu);
      if (!error) error = std::current_exception();
      next = rows;
    }
  };
  if (n_threads == 1) {
    worker();
  } else {
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < n_threads; ++t) threads.emplace_back(worker);
    for (auto& t : threads) t.join();
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace

GgufModelWriteReport write_gguf_model(const std::string& path, const ModelConfig& c,
                                      const std::function<void(GgufWriter&)>& write_tokenizer,
                                      const std::vector<GgufTensorSource>& tensors, const QuantTarget& target) {
  if (!qtype_info(target.type).supported)
    fail("convert", std::string("type ") + qtype_name(target.type) + " cannot be written yet");
  GgufModelWriteReport report;
  GgufWriter w;
  write_gguf_model_config(w, c, llama_ftype_for(target));
  const bool separate_output =
      std::any_of(tensors.begin(), tensors.end(), [](const GgufTensorSource& t) { return t.name == "output.weight"; });
  if (write_tokenizer) {
    write_tokenizer(w);
    report.vocab_padding = pad_vocabulary(w, c.vocab);
  }
  for (const auto& src : tensors) {
    QType t = QType::F32;
    if (src.quantize) {
      std::string why;
      t = matrix_type_for(target, src.name, src.ne[0], c.n_layer, separate_output, &why);
      if (!why.empty()) report.fallbacks.push_back({src.name, t});
    }
    report.tensors_by_type[qtype_name(t)]++;
    report.tensor_bytes += gguf_tensor_bytes(t, src.ne);
    const GgufTensorSource* s = &src;
    w.add_tensor(src.name, t, src.ne, [s, t](uint8_t* dst, size_t n) { fill_rows(*s, t, dst, n); });
  }
  w.write(path);
  return report;
}

std::vector<GgufTensorSource> model_tensor_sources(const Model& m) {
  const ModelConfig& c = m.config;
  std::vector<GgufTensorSource> out;

  auto plain = [](const TensorView& v) {
    return [&v](int64_t r, float* dst) { dequantize_row(v.type, v.row(r), dst, v.cols()); };
  };
  auto add = [&](std::string name, const TensorView& v, bool quantize) {
    if (!v.present()) fail(m.source_path, "tensor for '" + name + "' is missing");
    out.push_back({std::move(name), v.ne, quantize && v.ne.size() >= 2, plain(v)});
  };

  add(kTensorTokEmbd, m.weights.tok_embd, true);
  add(kTensorOutputNorm, m.weights.output_norm, false);
  if (!c.tied_output) add(kTensorOutput, m.weights.output, true);

  if (!c.rope_freq_factors.empty() || (c.arch == Arch::Llama && c.rope_scaling.type == "llama3")) {
    auto factors = std::make_shared<std::vector<float>>(
        c.rope_freq_factors.empty() ? llama3_rope_freq_factors(c) : c.rope_freq_factors);
    out.push_back({kTensorRopeFreqs, {static_cast<int64_t>(factors->size())}, false,
                   [factors](int64_t, float* dst) { std::copy(factors->begin(), factors->end(), dst); }});
  }

  // llama.cpp's `llama` graph rotates adjacent pairs; Hugging Face rows are half-split.
  const bool permute = c.arch == Arch::Llama && c.rope_style == RopeStyle::HalfSplit;
  const int64_t hd = c.head_dim;
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const LayerWeights& l = m.weights.layers[static_cast<size_t>(i)];
    for (const auto& t : layer_tensor_names()) {
      if (!layer_tensor_present(c, t.kind)) continue;
      const TensorView& v = l.*t.member;
      std::string name = gguf_layer_tensor(i, t.gguf_suffix);
      if (permute && (t.member == &LayerWeights::wq || t.member == &LayerWeights::wk)) {
        if (!v.present()) fail(m.source_path, "tensor for '" + name + "' is missing");
        out.push_back({name, v.ne, true, [&v, hd](int64_t r, float* dst) {
                         dequantize_row(v.type, v.row(hf_row_for_gguf_row(r, hd)), dst, v.cols());
                       }});
      } else {
        add(name, v, true);
      }
    }
  }
  return out;
}

GgufModelWriteReport convert_model_to_gguf(const Model& m, const std::string& out_path, const QuantTarget& target) {
  std::function<void(GgufWriter&)> tok;
  if (m.tokenizer) tok = [&m](GgufWriter& w) { m.tokenizer->write_gguf(w); };
  return write_gguf_model(out_path, m.config, tok, model_tensor_sources(m), target);
}

}  // namespace nl
