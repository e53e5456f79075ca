// `convert`: tinystories-656k (Hugging Face, half-split Q/K) to GGUF, checked against the
// source weights after undoing llama.cpp's Q/K permutation, against llama.cpp's own Python
// formulas (permute, llama3 rope factors) run in Debian's python3, and for its metadata.
#include "nightlora/modelio/convert.h"

#include <cmath>
#include <cstring>

#include <nlohmann/json.hpp>

#include "gguf_peer.h"
#include "nightlora/modelio/gguf.h"
#include "nightlora/modelio/gguf_names.h"
#include "nightlora/modelio/model.h"
#include "nightlora/tokenizer/tokenizer.h"
#include "nightlora/util/error.h"
#include "test_util.h"

namespace {

using nltest::TempDir;
namespace fs = std::filesystem;

std::vector<float> row_f32(const nl::TensorView& v, int64_t r) {
  std::vector<float> out(static_cast<size_t>(v.cols()));
  nl::dequantize_row(v.type, v.row(r), out.data(), v.cols());
  return out;
}

TEST(Convert, PermutationMatchesLlamaCppReshape) {
  // llama.cpp: w.reshape(n_head, 2, hd/2, cols).swapaxes(1, 2).reshape(w.shape): output row
  // (h, i, j) in (n_head, hd/2, 2) order comes from input row (h, j, i) in (n_head, 2, hd/2).
  const int64_t n_head = 3, hd = 8;
  for (int64_t h = 0; h < n_head; ++h)
    for (int64_t i = 0; i < hd / 2; ++i)
      for (int64_t j = 0; j < 2; ++j) {
        int64_t out_row = (h * (hd / 2) + i) * 2 + j;
        int64_t in_row = (h * 2 + j) * (hd / 2) + i;
        EXPECT_EQ(nl::hf_row_for_gguf_row(out_row, hd), in_row) << "out row " << out_row;
      }
}

TEST(Convert, Llama3FactorsHaveTheirDefiningShape) {
  nl::ModelConfig c;
  c.head_dim = 64;
  c.rope_theta = 500000.0f;
  c.rope_scaling.type = "llama3";
  c.rope_scaling.factor = 32.0f;
  c.rope_scaling.original_context = 8192;
  std::vector<float> f = nl::llama3_rope_freq_factors(c);
  ASSERT_EQ(f.size(), 32u);
  EXPECT_EQ(f.front(), 1.0f);   // highest frequency: unscaled
  EXPECT_EQ(f.back(), 32.0f);   // lowest frequency: scaled by the full factor
  for (size_t i = 1; i < f.size(); ++i) EXPECT_GE(f[i], f[i - 1]);
  bool smooth_region = false;
  for (float x : f) smooth_region |= x > 1.0f && x < 32.0f;
  EXPECT_TRUE(smooth_region);
}

class ConvertTinyStories : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::path d = nltest::shared_models_dir() / "tinystories-656k";
    if (nltest::shared_models_dir().empty() || !fs::exists(d))
      GTEST_SKIP() << "shared model data not present: tinystories-656k (expected under ../shared/models)";
    dir = d;
  }
  fs::path dir;
  TempDir tmp;
};

TEST_F(ConvertTinyStories, F32WeightsEqualSourceAfterUnpermutingQK) {
  auto hf = nl::Model::load(dir.string());
  const fs::path out = tmp / "ts.gguf";
  nl::GgufModelWriteReport r = nl::convert_model_to_gguf(*hf, out.string(), nl::QType::F32);
  EXPECT_TRUE(r.fallbacks.empty());
  EXPECT_EQ(r.tensors_by_type.size(), 1u);
  EXPECT_EQ(r.tensors_by_type["f32"], 1 + 1 + 2 * 9);  // token_embd, output_norm, 9 per block; tied: no output

  auto g = nl::Model::load(out.string());
  const nl::ModelConfig &a = hf->config, &b = g->config;
  EXPECT_EQ(g->source_format, "gguf");
  EXPECT_EQ(b.arch, nl::Arch::Llama);
  EXPECT_EQ(b.rope_style, nl::RopeStyle::Adjacent);
  EXPECT_EQ(b.d_model, a.d_model);
  EXPECT_EQ(b.n_layer, a.n_layer);
  EXPECT_EQ(b.n_head, a.n_head);
  EXPECT_EQ(b.n_kv_head, a.n_kv_head);
  EXPECT_EQ(b.head_dim, a.head_dim);
  EXPECT_EQ(b.d_ff, a.d_ff);
  EXPECT_EQ(b.vocab, a.vocab);
  EXPECT_EQ(b.context, a.context);
  EXPECT_FLOAT_EQ(b.rms_eps, a.rms_eps);
  EXPECT_FLOAT_EQ(b.rope_theta, a.rope_theta);
  EXPECT_TRUE(b.tied_output);
  EXPECT_TRUE(b.rope_freq_factors.empty());

  auto same = [](const nl::TensorView& x, const nl::TensorView& y) {
    return x.ne == y.ne && x.nbytes == y.nbytes && std::memcmp(x.data, y.data, x.nbytes) == 0;
  };
  EXPECT_TRUE(same(g->weights.tok_embd, hf->weights.tok_embd));
  EXPECT_TRUE(same(g->weights.output_norm, hf->weights.output_norm));
  for (size_t i = 0; i < 2; ++i) {
    const nl::LayerWeights &x = g->weights.layers[i], &y = hf->weights.layers[i];
    for (auto m : {&nl::LayerWeights::attn_norm, &nl::LayerWeights::wv, &nl::LayerWeights::wo, &nl::LayerWeights::ffn_norm,
                   &nl::LayerWeights::w_gate, &nl::LayerWeights::w_up, &nl::LayerWeights::w_down})
      EXPECT_TRUE(same(x.*m, y.*m)) << "layer " << i;
    // Q and K are permuted row by row; and they must not be equal unpermuted (else the
    // test would not see a missing permutation).
    for (auto m : {&nl::LayerWeights::wq, &nl::LayerWeights::wk}) {
      const nl::TensorView &gv = x.*m, &hv = y.*m;
      ASSERT_EQ(gv.ne, hv.ne);
      EXPECT_FALSE(same(gv, hv));
      for (int64_t r = 0; r < gv.rows(); ++r)
        ASSERT_EQ(row_f32(gv, r), row_f32(hv, nl::hf_row_for_gguf_row(r, a.head_dim))) << "layer " << i << " row " << r;
    }
  }

  // The tokenizer survives the trip.
  ASSERT_NE(g->tokenizer, nullptr);
  EXPECT_EQ(g->tokenizer->vocab_size(), hf->tokenizer->vocab_size());
  const std::string text = "Once upon a time, there was a little cat.";
  EXPECT_EQ(g->tokenizer->encode(text, true), hf->tokenizer->encode(text, true));
}

TEST_F(ConvertTinyStories, MetadataKeysAreLlamaCpps) {
  const fs::path out = tmp / "ts.gguf";
  nltest::CmdResult r = nltest::run_cli("convert " + nltest::shq(dir.string()) + " " + nltest::shq(out.string()) + " --type f32");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("f32"), std::string::npos);
  auto f = nl::GgufFile::open(out.string());
  EXPECT_EQ(f->get_str("general.architecture"), "llama");
  EXPECT_EQ(f->get_uint("general.file_type"), 0u);
  EXPECT_EQ(f->get_uint("general.quantization_version"), 2u);
  EXPECT_EQ(f->get_uint("llama.context_length"), 512u);
  EXPECT_EQ(f->get_uint("llama.embedding_length"), 128u);
  EXPECT_EQ(f->get_uint("llama.block_count"), 2u);
  EXPECT_EQ(f->get_uint("llama.feed_forward_length"), 384u);
  EXPECT_EQ(f->get_uint("llama.attention.head_count"), 8u);
  EXPECT_EQ(f->get_uint("llama.attention.head_count_kv"), 4u);
  EXPECT_EQ(f->get_uint("llama.rope.dimension_count"), 16u);
  EXPECT_EQ(f->get_uint("llama.vocab_size"), 2048u);
  EXPECT_FLOAT_EQ(static_cast<float>(f->get_float("llama.attention.layer_norm_rms_epsilon")), 1e-6f);
  EXPECT_FLOAT_EQ(static_cast<float>(f->get_float("llama.rope.freq_base")), 10000.0f);
  EXPECT_FALSE(f->has("llama.attention.key_length"));  // head_dim == d_model / n_head
  EXPECT_TRUE(f->has("tokenizer.ggml.model"));
  EXPECT_EQ(f->find("tokenizer.ggml.tokens")->array_size(), 2048u);

  for (const char* name : {"token_embd.weight", "output_norm.weight", "blk.0.attn_norm.weight", "blk.0.attn_q.weight",
                           "blk.0.attn_k.weight", "blk.0.attn_v.weight", "blk.0.attn_output.weight", "blk.1.ffn_norm.weight",
                           "blk.1.ffn_gate.weight", "blk.1.ffn_up.weight", "blk.1.ffn_down.weight"})
    EXPECT_NE(f->find_tensor(name), nullptr) << name;
  EXPECT_EQ(f->find_tensor("output.weight"), nullptr);  // tied
  EXPECT_EQ(f->find_tensor("blk.0.attn_k.weight")->ne, (std::vector<int64_t>{128, 64}));
  EXPECT_EQ(f->tensors().size(), 20u);
  nltest::expect_gguf_matches_peer(out);  // someone else's parser reads the same file
}

TEST_F(ConvertTinyStories, QuantizedTypesAndTheirFallbacks) {
  auto hf = nl::Model::load(dir.string());
  const fs::path q8 = tmp / "q8.gguf";
  nl::GgufModelWriteReport r = nl::convert_model_to_gguf(*hf, q8.string(), nl::QType::Q8_0);
  EXPECT_TRUE(r.fallbacks.empty());
  auto f = nl::GgufFile::open(q8.string());
  EXPECT_EQ(f->get_uint("general.file_type"), 7u);
  EXPECT_EQ(f->find_tensor("blk.0.ffn_down.weight")->type, nl::QType::Q8_0);
  EXPECT_EQ(f->find_tensor("token_embd.weight")->type, nl::QType::Q8_0);
  EXPECT_EQ(f->find_tensor("blk.0.attn_norm.weight")->type, nl::QType::F32);  // norms stay f32

  // Q8_0 values stay close to the source.
  auto g = nl::Model::load(q8.string());
  std::vector<float> a = row_f32(g->weights.layers[0].w_up, 5), b = row_f32(hf->weights.layers[0].w_up, 5);
  float max_abs = 0, max_err = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    max_abs = std::max(max_abs, std::fabs(b[i]));
    max_err = std::max(max_err, std::fabs(a[i] - b[i]));
  }
  EXPECT_LT(max_err, max_abs / 100);

  // 128- and 384-wide rows do not fit q4_K's 256-element blocks: q5_0 there, as llama.cpp's
  // quantizer does, and reported; llama.cpp reads the mixed file as it reads the Q8_0 one.
  const fs::path q4k = tmp / "q4k.gguf";
  nltest::CmdResult cr = nltest::run_cli("convert " + nltest::shq(dir.string()) + " " + nltest::shq(q4k.string()) + " -t q4_K");
  ASSERT_EQ(cr.rc, 0) << cr.err;
  EXPECT_NE(cr.err.find("blk.0.attn_q.weight (q5_0)"), std::string::npos) << cr.err;
  auto k = nl::GgufFile::open(q4k.string());
  EXPECT_EQ(k->find_tensor("blk.0.attn_q.weight")->type, nl::QType::Q5_0);
  nltest::expect_gguf_matches_peer(q8);
  nltest::expect_gguf_matches_peer(q4k);
}

TEST_F(ConvertTinyStories, BadInputsGiveClearErrors) {
  nltest::CmdResult r = nltest::run_cli("convert " + nltest::shq(dir.string()) + " " + nltest::shq((tmp / "x.gguf").string()) +
                                        " -t q9_9");
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.err.find("q9_9"), std::string::npos) << r.err;
  r = nltest::run_cli("convert " + nltest::shq((tmp / "nothing").string()) + " " + nltest::shq((tmp / "x.gguf").string()));
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.err.find("nothing"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(tmp / "x.gguf"));
}

// llama.cpp's converter code, run in Python on the same source: its permuted Q/K and its
// llama3 rope factors must equal what we wrote.
TEST_F(ConvertTinyStories, MatchesLlamaCppConverterInPython) {
  const std::string py = nltest::python_with_torch();
  if (py.empty()) GTEST_SKIP() << "Debian's python3 with torch not found";
  // A copy of the folder with llama3 scaling, so rope_freqs.weight is written too.
  fs::path src = tmp / "scaled";
  fs::create_directories(src);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json", "model.safetensors"}) fs::copy_file(dir / f, src / f);
  auto config = nlohmann::json::parse(nltest::read_text(dir / "config.json"));
  config["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                            {"original_max_position_embeddings", 512}};
  nltest::write_text(src / "config.json", config.dump());
  const fs::path out = tmp / "scaled.gguf";
  nl::convert_model_to_gguf(*nl::Model::load(src.string()), out.string(), nl::QType::F32);

  const std::string script = R"PY(
import sys, math, json
sys.path.insert(0, sys.argv[1])
import numpy as np, torch
from gguf_reader import read_gguf, dequantize
from hf_folder import read_safetensors
src, out = sys.argv[2], sys.argv[3]
hp = json.load(open(src + "/config.json"))
tensors, _ = read_safetensors(src + "/model.safetensors")
g = read_gguf(out)
def permute(weights, n_head, n_head_kv):  # convert_hf_to_gguf.py, LlamaModel.permute
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
            .swapaxes(1, 2).reshape(weights.shape))
bad = 0
for i in range(hp["num_hidden_layers"]):
    for hf, gg, nkv in (("q_proj", "attn_q", None), ("k_proj", "attn_k", hp["num_key_value_heads"])):
        ref = permute(np.asarray(tensors["model.layers.%d.self_attn.%s.weight" % (i, hf)]), hp["num_attention_heads"], nkv if nkv else hp["num_attention_heads"])
        ours = dequantize(g.tensors["blk.%d.%s.weight" % (i, gg)])
        if not np.array_equal(ref, ours):
            print("mismatch", gg, i); bad += 1
# LlamaModel.generate_extra_tensors (llama3 rope factors)
rs = hp["rope_scaling"]
base = hp.get("rope_theta", 10000.0)
dim = hp.get("head_dim", hp["hidden_size"] // hp["num_attention_heads"])
freqs = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
factor = rs.get("factor", 8.0); low = rs.get("low_freq_factor", 1.0); high = rs.get("high_freq_factor", 4.0)
old = rs.get("original_max_position_embeddings", 8192)
lw, hw = old / low, old / high
fac = []
for freq in freqs:
    wavelen = 2 * math.pi / freq
    if wavelen < hw: fac.append(1)
    elif wavelen > lw: fac.append(factor)
    else:
        smooth = (old / wavelen - low) / (high - low)
        fac.append(1 / ((1 - smooth) / factor + smooth))
ref = torch.tensor(fac, dtype=torch.float32).numpy()
ours = dequantize(g.tensors["rope_freqs.weight"])
if not np.allclose(ref, ours, rtol=1e-6, atol=0):
    print("rope factors differ", ref, ours); bad += 1
print("ok" if bad == 0 else "FAIL")
)PY";
  nltest::write_text(tmp / "check.py", script);
  nltest::CmdResult r = nltest::run_cmd(py + " " + nltest::shq((tmp / "check.py").string()) + " " +
                                        nltest::shq((nltest::source_dir() / "tools" / "torch_ref").string()) + " " +
                                        nltest::shq(src.string()) + " " + nltest::shq(out.string()));
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "ok\n") << r.err;
}

}  // namespace
