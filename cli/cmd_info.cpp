// `nightlora info MODEL`: what a model file holds: architecture, shapes, tensor types and
// sizes, tokenizer, chat template, RoPE layout, file size and source format.
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>

#include "command.h"
#include "nightlora/modelio/gguf.h"
#include "nightlora/modelio/gguf_names.h"
#include "nightlora/modelio/model.h"
#include "nightlora/quant/qtype.h"
#include "nightlora/tokenizer/chat_template.h"
#include "nightlora/tokenizer/tokenizer.h"
#include "nightlora/util/error.h"

namespace {

namespace fs = std::filesystem;

struct InfoArgs {
  std::string model;
  bool all_tensors = false;
};

std::string dims(const std::vector<int64_t>& ne) {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

std::string human_bytes(uint64_t n) {
  std::ostringstream o;
  o << n << " bytes";
  if (n >= (1u << 20)) o << " (" << std::fixed << std::setprecision(1) << static_cast<double>(n) / (1 << 20) << " MiB)";
  return o.str();
}

struct TensorRow {
  std::string name;
  nl::QType type;
  std::vector<int64_t> ne;
  size_t nbytes;
};

// Every weight tensor, in file order for GGUF and in model order for Hugging Face folders.
std::vector<TensorRow> tensor_rows(const nl::Model& m) {
  std::vector<TensorRow> rows;
  if (const nl::GgufFile* g = m.gguf()) {
    for (const auto& t : g->tensors()) rows.push_back({t.name, t.type, t.ne, t.nbytes});
    return rows;
  }
  auto add = [&](const nl::TensorView& v) {
    if (v.present()) rows.push_back({v.name, v.type, v.ne, v.nbytes});
  };
  add(m.weights.tok_embd);
  for (const auto& l : m.weights.layers)
    for (const auto& t : nl::layer_tensor_names()) add(l.*t.member);
  add(m.weights.output_norm);
  if (!m.config.tied_output) add(m.weights.output);
  return rows;
}

uint64_t source_size(const nl::Model& m) {
  if (const nl::GgufFile* g = m.gguf()) return g->file_size();
  uint64_t n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(m.source_path, ec))
    if (e.is_regular_file(ec) && e.path().extension() == ".safetensors") n += e.file_size(ec);
  return n;
}

void print_info(const nl::Model& m, bool all_tensors) {
  const nl::ModelConfig& c = m.config;
  std::cout << "model: " << m.source_path << "\n";
  if (const nl::GgufFile* g = m.gguf()) {
    std::cout << "source format: GGUF v" << g->version() << " (" << g->metadata().size() << " metadata keys, alignment "
              << g->alignment() << ")\n";
    if (g->has("general.file_type")) {
      uint64_t ft = g->get_uint("general.file_type");
      std::cout << "file type: " << ft << " (" << nl::gguf_file_type_name(static_cast<uint32_t>(ft)) << ")\n";
    }
    std::string desc = g->get_str("general.description", "");
    if (!desc.empty()) std::cout << "description: " << desc << "\n";
  } else {
    std::cout << "source format: Hugging Face folder (config.json + safetensors)\n";
  }
  std::cout << "file size: " << human_bytes(source_size(m)) << "\n";
  std::cout << "architecture: " << nl::arch_name(c.arch) << "\n";
  std::cout << "name: " << c.name << "\n";
  std::cout << "layers: " << c.n_layer << "\n"
            << "d_model: " << c.d_model << "\n"
            << "heads: " << c.n_head << " (kv heads " << c.n_kv_head << ", head_dim " << c.head_dim << ")\n"
            << "ffn: " << c.d_ff << "\n"
            << "vocab: " << c.vocab << "\n"
            << "context: " << c.context << "\n"
            << "rms eps: " << c.rms_eps << "\n";
  std::cout << "rope: theta " << c.rope_theta << ", "
            << (c.rope_style == nl::RopeStyle::Adjacent ? "adjacent pairs (2i, 2i+1)" : "half-split pairs (i, i+head_dim/2)");
  if (c.rope_scaling.type == "llama3")
    std::cout << ", llama3 scaling (factor " << c.rope_scaling.factor << ", low " << c.rope_scaling.low_freq_factor << ", high "
              << c.rope_scaling.high_freq_factor << ", original context " << c.rope_scaling.original_context << ")";
  if (!c.rope_freq_factors.empty())
    std::cout << ", " << c.rope_freq_factors.size() << " frequency factors (" << c.rope_freq_factors.front() << " .. "
              << c.rope_freq_factors.back() << ")";
  if (c.rope_scaling.type != "llama3" && c.rope_freq_factors.empty()) std::cout << ", no scaling";
  std::cout << "\n";
  std::cout << "output head: " << (c.tied_output ? "tied to token embedding" : "separate") << "\n";
  std::cout << "qkv bias: " << (c.qkv_bias ? "yes" : "no") << ", qk norm: " << (c.qk_norm ? "yes" : "no") << "\n";

  const std::vector<TensorRow> rows = tensor_rows(m);
  std::map<std::string, std::pair<int64_t, uint64_t>> by_type;
  uint64_t total = 0;
  int64_t params = 0;
  for (const auto& r : rows) {
    auto& e = by_type[nl::qtype_name(r.type)];
    e.first++;
    e.second += r.nbytes;
    total += r.nbytes;
    int64_t n = 1;
    for (int64_t d : r.ne) n *= d;
    params += n;
  }
  std::cout << "tensors: " << rows.size() << ", " << params << " parameters, " << human_bytes(total) << "\n";
  for (const auto& [t, e] : by_type) std::cout << "  " << t << ": " << e.first << " tensors, " << human_bytes(e.second) << "\n";

  // Shapes: every non-layer tensor and the first block's (fastest dimension first, as GGUF
  // lists them); with --tensors, every tensor.
  std::cout << "shapes (fastest dimension first):\n";
  const std::string blk0 = "blk.0.", layer0 = "model.layers.0.";
  size_t hidden = 0;
  for (const auto& r : rows) {
    bool is_layer = r.name.rfind("blk.", 0) == 0 || r.name.rfind("model.layers.", 0) == 0;
    bool first_layer = r.name.rfind(blk0, 0) == 0 || r.name.rfind(layer0, 0) == 0;
    if (all_tensors || !is_layer || first_layer)
      std::cout << "  " << std::left << std::setw(48) << r.name << std::right << " " << std::setw(6) << nl::qtype_name(r.type)
                << " " << dims(r.ne) << "\n";
    else
      ++hidden;
  }
  if (hidden) std::cout << "  ... and " << hidden << " tensors of blocks 1.." << c.n_layer - 1 << " (use --tensors to list them)\n";

  if (m.tokenizer) {
    const nl::Tokenizer& t = *m.tokenizer;
    std::cout << "tokenizer: " << t.describe() << ", " << t.vocab_size() << " tokens";
    if (t.bos() >= 0) std::cout << ", bos " << t.bos() << " " << t.token_text(t.bos());
    if (t.eos() >= 0) std::cout << ", eos " << t.eos() << " " << t.token_text(t.eos());
    std::cout << "\n";
    const std::string& tmpl = t.chat_template();
    if (tmpl.empty()) {
      std::cout << "chat template: none\n";
    } else {
      try {
        std::cout << "chat template: " << nl::chat_format_name(nl::detect_chat_format(tmpl, m.source_path)) << "\n";
      } catch (const nl::Error&) {
        std::cout << "chat template: unknown (" << tmpl.size() << " characters of Jinja that nightlora does not recognise)\n";
      }
    }
  } else {
    std::cout << "tokenizer: none\nchat template: none\n";
  }
}

nlcli::Register reg_info("info", "Show a model's architecture, shapes, tensor types, tokenizer and chat template",
                         [](CLI::App& sub) -> nlcli::Run {
                           auto a = std::make_shared<InfoArgs>();
                           sub.add_option("model", a->model, "GGUF file or Hugging Face folder")->required();
                           sub.add_flag("--tensors", a->all_tensors, "list every tensor, not only the first block's");
                           return [a]() {
                             auto m = nl::Model::load(a->model);
                             print_info(*m, a->all_tensors);
                             return 0;
                           };
                         });

}  // namespace
