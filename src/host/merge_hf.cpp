// merge_to_hf: a merged model as a Hugging Face folder. The safetensors file is written
// here rather than with write_safetensors (which takes every tensor's bytes up front) so
// that only one tensor is in memory at a time, as for GGUF output.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <unistd.h>

#include "nightlora/host/merge.h"
#include "nightlora/modelio/gguf.h"
#include "nightlora/modelio/gguf_names.h"
#include "nightlora/modelio/quantize_model.h"
#include "nightlora/modelio/safetensors.h"
#include "nightlora/util/error.h"
#include "nightlora/util/thread_pool.h"

namespace nl {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// The weights the model uses, each once (a tied head is its embedding), with the
// projection each adapted one is.
struct HfTensor {
  const TensorView* view = nullptr;
  bool adapted = false;
  int64_t layer = 0;
  Proj proj = Proj::Q;
};

std::vector<HfTensor> model_tensors(const Model& m, const std::vector<ScaledAdapter>& adapters) {
  std::vector<HfTensor> out;
  std::set<std::string> seen;
  auto add = [&](const TensorView& v) {
    if (v.present() && seen.insert(v.name).second) out.push_back({&v});
  };
  add(m.weights.tok_embd);
  add(m.weights.output);
  add(m.weights.output_norm);
  for (size_t l = 0; l < m.weights.layers.size(); ++l) {
    const LayerWeights& lw = m.weights.layers[l];
    for (const LayerTensorName& t : layer_tensor_names()) add(lw.*t.member);
    for (int p = 0; p < kNumProj; ++p) {
      const TensorView& v = lw.proj(static_cast<Proj>(p));
      for (HfTensor& h : out)
        if (h.view == &v)
          for (const ScaledAdapter& sa : adapters)
            if (sa.adapter.at(static_cast<int64_t>(l), static_cast<Proj>(p)).enabled)
              h = {&v, true, static_cast<int64_t>(l), static_cast<Proj>(p)};
    }
  }
  return out;
}

const char* torch_dtype_name(QType t) {
  switch (t) {
    case QType::F16: return "float16";
    case QType::BF16: return "bfloat16";
    default: return "float32";
  }
}

// A file written through a temporary name, fsync'd and renamed into place on finish().
class AtomicOut {
 public:
  explicit AtomicOut(std::string path) : path_(std::move(path)), tmp_(path_ + ".tmp") {
    f_ = std::fopen(tmp_.c_str(), "wb");
    if (!f_) fail(tmp_, std::string("cannot create: ") + std::strerror(errno), "check that the folder is writable");
  }
  ~AtomicOut() {
    if (f_) {
      std::fclose(f_);
      ::unlink(tmp_.c_str());
    }
  }
  void write(const void* p, size_t n) {
    if (n && std::fwrite(p, 1, n, f_) != n) fail(tmp_, std::string("write failed: ") + std::strerror(errno));
  }
  void finish() {
    const bool ok = std::fflush(f_) == 0 && ::fsync(::fileno(f_)) == 0;
    const int e = errno;
    std::fclose(f_);
    f_ = nullptr;
    if (!ok || std::rename(tmp_.c_str(), path_.c_str()) != 0) {
      ::unlink(tmp_.c_str());
      fail(path_, std::string("cannot finish writing: ") + std::strerror(ok ? errno : e));
    }
  }

 private:
  std::string path_, tmp_;
  FILE* f_ = nullptr;
};

}  // namespace

MergeSummary merge_to_hf(const Model& base, const std::vector<ScaledAdapter>& adapters, const std::string& out_dir,
                         const MergeOptions& opt) {
  if (base.source_format != "hf")
    fail(base.source_path, "--format hf needs a Hugging Face folder as the base (its tokenizer.json is copied)",
         "give the model's Hugging Face folder as --model, or write GGUF (the default format)");
  if (adapters.empty()) fail("merge", "no adapter to merge", "give one or more --adapter PATH[:SCALE]");
  if (opt.type && *opt.type != QType::F32 && *opt.type != QType::F16 && *opt.type != QType::BF16)
    fail(std::string("type ") + qtype_name(*opt.type), "safetensors holds f32, f16 or bf16 weights",
         "use --type f32, f16 or bf16 with --format hf");
  const fs::path src_dir = base.source_path, dst_dir = out_dir;
  std::error_code ec;
  if (fs::exists(dst_dir, ec) && fs::equivalent(dst_dir, src_dir, ec))
    fail(out_dir, "is the base model's folder", "write the merged model to another folder");
  if (fs::exists(dst_dir, ec) && !fs::is_directory(dst_dir, ec)) fail(out_dir, "exists and is not a folder");
  fs::create_directories(dst_dir, ec);
  if (ec) fail(out_dir, "cannot create the folder: " + ec.message());

  const std::vector<HfTensor> tensors = model_tensors(base, adapters);
  MergeSummary s;
  s.gguf = false;
  json header = json::object();
  header["__metadata__"] = {{"format", "pt"}};
  std::vector<QType> types;
  size_t offset = 0;
  for (const HfTensor& h : tensors) {
    const TensorView& v = *h.view;
    MergedTensor r;
    r.name = v.name;
    r.from = v.type;
    r.to = opt.type ? *opt.type : v.type;
    r.adapted = h.adapted;
    r.converted = r.adapted || r.to != r.from;
    const size_t n = static_cast<size_t>(gguf_tensor_bytes(r.to, v.ne));
    std::vector<int64_t> shape(v.ne.rbegin(), v.ne.rend());  // safetensors: slowest-first
    header[v.name] = {{"dtype", safetensors_dtype_name(r.to)}, {"shape", shape}, {"data_offsets", {offset, offset + n}}};
    offset += n;
    types.push_back(r.to);
    s.n_adapted += r.adapted ? 1 : 0;
    s.n_converted += r.converted ? 1 : 0;
    s.tensors.push_back(std::move(r));
  }
  if (s.n_adapted == 0) fail("merge", "the adapters change no tensor of " + base.source_path, "check the adapter files");
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // as the safetensors library pads it

  ThreadPool pool(opt.threads);
  const std::string st_path = (dst_dir / "model.safetensors").string();
  {
    AtomicOut out(st_path);
    const uint64_t len = text.size();
    out.write(&len, sizeof len);
    out.write(text.data(), text.size());
    std::vector<uint8_t> buf;
    for (size_t i = 0; i < tensors.size(); ++i) {
      const TensorView& v = *tensors[i].view;
      const MergedTensor& r = s.tensors[i];
      buf.assign(gguf_tensor_bytes(r.to, v.ne), 0);
      if (!r.converted) {
        std::memcpy(buf.data(), v.data, buf.size());
      } else {
        GgufTensorInfo t;  // the view as the row converter reads tensors
        t.name = v.name;
        t.ne = v.ne;
        t.type = v.type;
        t.data = v.data;
        t.nbytes = v.nbytes;
        RowAdjust adjust;
        if (r.adapted) {
          const HfTensor h = tensors[i];
          const int64_t cols = v.cols();
          adjust = [&adapters, h, cols](int64_t row, float* values) {
            add_lora_to_row(adapters, h.layer, h.proj, row, values, cols);
          };
        }
        convert_tensor_rows(t, r.to, buf.data(), buf.size(), base.source_path, pool, adjust);
      }
      out.write(buf.data(), buf.size());
    }
    out.finish();
  }
  s.file_bytes = fs::file_size(st_path);

  // config.json as the base's, with the dtype written.
  json cfg;
  {
    std::ifstream in(src_dir / "config.json");
    cfg = json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!cfg.is_object()) fail((src_dir / "config.json").string(), "cannot be read back as a JSON object");
  }
  if (opt.type) cfg["torch_dtype"] = torch_dtype_name(*opt.type);
  {
    AtomicOut out((dst_dir / "config.json").string());
    const std::string c = cfg.dump(2) + "\n";
    out.write(c.data(), c.size());
    out.finish();
  }
  for (const char* name : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "generation_config.json"}) {
    if (!fs::exists(src_dir / name)) continue;
    fs::copy_file(src_dir / name, dst_dir / name, fs::copy_options::overwrite_existing, ec);
    if (ec) fail((dst_dir / name).string(), "cannot copy from the base folder: " + ec.message());
  }
  return s;
}

}  // namespace nl
