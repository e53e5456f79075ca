#include "nightlora/host/merge.h"

#include <cstring>
#include <functional>
#include <filesystem>
#include <map>
#include <sstream>

#include "nightlora/modelio/convert.h"
#include "nightlora/modelio/gguf.h"
#include "nightlora/modelio/gguf_names.h"
#include "nightlora/modelio/quantize_model.h"
#include "nightlora/util/error.h"
#include "nightlora/tokenizer/tokenizer.h"
#include "nightlora/util/thread_pool.h"

namespace nl {

namespace fs = std::filesystem;

void add_lora_to_row(const std::vector<ScaledAdapter>& adapters, int64_t layer, Proj p, int64_t row, float* values,
                     int64_t cols) {
  for (const ScaledAdapter& sa : adapters) {
    const LoraPair& pair = sa.adapter.at(layer, p);
    if (!pair.enabled) continue;
    const int64_t rank = sa.adapter.cfg.rank;
    const float factor = sa.factor();
    const float* b = pair.B.data() + row * rank;
    for (int64_t k = 0; k < rank; ++k) {
      const float c = factor * b[k];
      if (c == 0.0f) continue;
      const float* a = pair.A.data() + k * cols;
      for (int64_t j = 0; j < cols; ++j) values[j] += c * a[j];
    }
  }
}

namespace {

struct LayerProj {
  int64_t layer = 0;
  Proj proj = Proj::Q;
};

// The file's tensor names of the projections some adapter changes.
std::map<std::string, LayerProj> adapted_tensors(const Model& m, const std::vector<ScaledAdapter>& adapters) {
  std::map<std::string, LayerProj> out;
  for (int64_t l = 0; l < m.config.n_layer; ++l)
    for (int p = 0; p < kNumProj; ++p)
      for (const ScaledAdapter& sa : adapters)
        if (sa.adapter.at(l, static_cast<Proj>(p)).enabled)
          out[m.weights.layers[static_cast<size_t>(l)].proj(static_cast<Proj>(p)).name] = {l, static_cast<Proj>(p)};
  return out;
}

// A Hugging Face base written as GGUF the way `convert` writes it (llama.cpp names,
// permuted Q/K rows for `llama`, the tokenizer as GGUF metadata), with the adapters added
// to each adapted projection's rows on the way.
MergeSummary merge_hf_base_to_gguf(const Model& base, const std::vector<ScaledAdapter>& adapters,
                                   const std::string& out_path, const MergeOptions& opt) {
  const ModelConfig& c = base.config;
  const QType type = opt.type ? *opt.type : base.weights.tok_embd.type;
  std::vector<GgufTensorSource> sources = model_tensor_sources(base);
  std::map<std::string, LayerProj> by_name;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const LayerWeights& lw = base.weights.layers[static_cast<size_t>(l)];
    for (const LayerTensorName& t : layer_tensor_names())
      for (int p = 0; p < kNumProj; ++p)
        if (&(lw.*t.member) == &lw.proj(static_cast<Proj>(p))) by_name[gguf_layer_tensor(l, t.gguf_suffix)] = {l, static_cast<Proj>(p)};
  }
  // The GGUF row r of a permuted Q/K tensor is the model's (Hugging Face) row below.
  const bool permuted = c.arch == Arch::Llama && c.rope_style == RopeStyle::HalfSplit;
  MergeSummary s;
  for (GgufTensorSource& src : sources) {
    MergedTensor r;
    r.name = src.name;
    r.to = src.quantize ? type : QType::F32;
    r.from = r.to;
    r.converted = true;
    const auto hit = by_name.find(src.name);
    bool any = false;
    if (hit != by_name.end())
      for (const ScaledAdapter& sa : adapters) any |= sa.adapter.at(hit->second.layer, hit->second.proj).enabled;
    if (any) {
      const LayerProj lp = hit->second;
      const bool perm = permuted && (lp.proj == Proj::Q || lp.proj == Proj::K);
      const int64_t cols = src.ne[0], hd = c.head_dim;
      src.row = [row = std::move(src.row), &adapters, lp, perm, cols, hd](int64_t r, float* dst) {
        row(r, dst);
        add_lora_to_row(adapters, lp.layer, lp.proj, perm ? hf_row_for_gguf_row(r, hd) : r, dst, cols);
      };
      r.adapted = true;
      ++s.n_adapted;
    }
    ++s.n_converted;
    s.tensors.push_back(std::move(r));
  }
  if (s.n_adapted == 0) fail("merge", "the adapters change no tensor of " + base.source_path, "check the adapter files");
  std::function<void(GgufWriter&)> tok;
  if (base.tokenizer) tok = [&base](GgufWriter& w) { base.tokenizer->write_gguf(w); };
  write_gguf_model(out_path, c, tok, sources, type);
  auto written = GgufFile::open(out_path);  // a final check that it reads back
  s.file_type = static_cast<uint32_t>(written->get_uint("general.file_type", 0));
  s.file_bytes = written->file_size();
  return s;
}

void check_out_folder(const std::string& out_path) {
  std::error_code ec;
  fs::path parent = fs::path(out_path).parent_path();
  if (!parent.empty() && !fs::is_directory(parent, ec))
    fail(out_path, "the folder " + parent.string() + " does not exist", "create it or write the merged model elsewhere");
}

}  // namespace

MergeSummary merge_to_gguf(const Model& base, const std::vector<ScaledAdapter>& adapters, const std::string& out_path,
                           const MergeOptions& opt) {
  if (adapters.empty()) fail("merge", "no adapter to merge", "give one or more --adapter PATH[:SCALE]");
  std::error_code ec;
  if (fs::exists(out_path, ec) && fs::equivalent(out_path, base.source_path, ec))
    fail(out_path, "is the base model itself", "write the merged model to another file");
  if (opt.type && !qtype_info(*opt.type).supported)
    fail(std::string("type ") + qtype_name(*opt.type), "cannot write this type",
         "use one of f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_K, q5_K or q6_K");
  for (const ScaledAdapter& sa : adapters)
    if (sa.adapter.n_layer != base.config.n_layer)
      fail(sa.spec.path, "is not loaded for this model", "load it with load_adapter for the same base");
  check_out_folder(out_path);
  const GgufFile* in = base.gguf();
  if (!in) return merge_hf_base_to_gguf(base, adapters, out_path, opt);

  const std::map<std::string, LayerProj> adapted = adapted_tensors(base, adapters);
  const std::string& in_path = in->path();
  MergeSummary s;
  s.file_type = opt.type ? llama_ftype_for(*opt.type) : static_cast<uint32_t>(in->get_uint("general.file_type", 0));

  ThreadPool pool(opt.threads);
  GgufWriter w;
  w.set_alignment(in->alignment());
  for (const auto& [key, value] : in->metadata()) w.set(key, value);
  if (opt.type) w.set("general.file_type", GgufValue::u32(s.file_type));

  for (const GgufTensorInfo& t : in->tensors()) {
    MergedTensor r;
    r.name = t.name;
    r.from = t.type;
    r.to = t.type;
    if (opt.type && is_quantizable_matrix(t.name, t.ne)) r.to = matrix_type_for(*opt.type, t.ne[0]);
    const auto hit = adapted.find(t.name);
    r.adapted = hit != adapted.end();
    r.converted = r.adapted || r.to != r.from;
    if (r.converted && !qtype_info(r.from).supported)
      fail(in_path, "tensor '" + t.name + "' has type " + qtype_name(r.from) + ", which we cannot dequantize",
           "re-quantize the base to a type nightlora reads first");

    const GgufTensorInfo* src = &t;  // owned by the model's GgufFile, which outlives w.write()
    const QType to = r.to;
    if (r.adapted) {
      const LayerProj lp = hit->second;
      const int64_t cols = t.ne[0];
      const RowAdjust adjust = [&adapters, lp, cols](int64_t row, float* values) {
        add_lora_to_row(adapters, lp.layer, lp.proj, row, values, cols);
      };
      w.add_tensor(t.name, to, t.ne, [src, to, &in_path, &pool, adjust](uint8_t* dst, size_t n) {
        convert_tensor_rows(*src, to, dst, n, in_path, pool, adjust);
      });
    } else if (r.converted) {
      w.add_tensor(t.name, to, t.ne,
                   [src, to, &in_path, &pool](uint8_t* dst, size_t n) { convert_tensor_rows(*src, to, dst, n, in_path, pool); });
    } else {
      w.add_tensor(t.name, t.type, t.ne, [src, &in_path](uint8_t* dst, size_t n) {
        if (n != src->nbytes) fail(in_path, "tensor '" + src->name + "': internal size mismatch while copying");
        std::memcpy(dst, src->data, n);
      });
    }
    s.n_adapted += r.adapted ? 1 : 0;
    s.n_converted += r.converted ? 1 : 0;
    s.tensors.push_back(std::move(r));
  }
  if (s.n_adapted == 0) fail("merge", "the adapters change no tensor of " + in_path, "check the adapter files");

  w.write(out_path);
  s.file_bytes = GgufFile::open(out_path)->file_size();  // a final check that it reads back
  return s;
}

std::string format_merge_summary(const MergeSummary& s, bool per_tensor) {
  std::ostringstream o;
  for (const MergedTensor& t : s.tensors) {
    if (!per_tensor || !t.converted) continue;
    o << "  " << t.name << ": " << qtype_name(t.from);
    if (t.to != t.from) o << " -> " << qtype_name(t.to);
    o << (t.adapted ? " + LoRA" : "") << "\n";
  }
  o << "merged adapters into " << s.n_adapted << " tensors; re-encoded " << s.n_converted << ", copied "
    << s.tensors.size() - static_cast<size_t>(s.n_converted) << " of " << s.tensors.size()
    << "; ";
  if (s.gguf) o << "general.file_type = " << s.file_type << "; ";
  o << s.file_bytes << " bytes\n";
  return o.str();
}

}  // namespace nl
