// Hugging Face folder loading: the real tinystories-656k folder, a sharded copy of it, and
// damaged folders that must give clear errors.
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "nightlora/modelio/model.h"
#include "nightlora/modelio/safetensors.h"
#include "nightlora/tokenizer/tokenizer.h"
#include "nightlora/util/error.h"
#include "test_util.h"

namespace {

using nltest::TempDir;
namespace fs = std::filesystem;
using json = nlohmann::json;

void expect_hf_load_error(const fs::path& dir, std::vector<std::string> fragments) {
  try {
    nl::Model::load(dir.string());
    FAIL() << "expected an error loading " << dir;
  } catch (const nl::Error& e) {
    std::string msg = e.what();
    for (const auto& f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << "missing '" << f << "' in: " << msg;
  }
}

// A writable copy of the folder's small files (weights are rewritten by each test).
void copy_hf_folder(const fs::path& from, const fs::path& to) {
  fs::create_directories(to);
  for (const char* f : {"config.json", "tokenizer.json", "tokenizer_config.json", "model.safetensors"})
    fs::copy_file(from / f, to / f, fs::copy_options::overwrite_existing);
  fs::permissions(to / "config.json", fs::perms::owner_write, fs::perm_options::add);
}

json read_hf_json(const fs::path& p) { return json::parse(nltest::read_text(p)); }

TEST(LoadHf, TinyStoriesConfigAndTiedHead) {
  NL_REQUIRE_SHARED("tinystories-656k", dir);
  auto m = nl::Model::load(dir.string());
  const nl::ModelConfig& c = m->config;
  EXPECT_EQ(m->source_format, "hf");
  EXPECT_EQ(c.arch, nl::Arch::Llama);
  EXPECT_EQ(c.d_model, 128);
  EXPECT_EQ(c.n_layer, 2);
  EXPECT_EQ(c.n_head, 8);
  EXPECT_EQ(c.n_kv_head, 4);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.d_ff, 384);
  EXPECT_EQ(c.vocab, 2048);
  EXPECT_EQ(c.context, 512);
  EXPECT_FLOAT_EQ(c.rms_eps, 1e-6f);
  EXPECT_FLOAT_EQ(c.rope_theta, 10000.0f);
  EXPECT_EQ(c.rope_style, nl::RopeStyle::HalfSplit);
  EXPECT_EQ(c.rope_scaling.type, "none");
  EXPECT_TRUE(c.tied_output);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_FALSE(c.qk_norm);

  // Only lm_head.weight is stored: the embedding is the same bytes.
  const nl::ModelWeights& w = m->weights;
  ASSERT_TRUE(w.tok_embd.present());
  EXPECT_EQ(w.tok_embd.data, w.output.data);
  EXPECT_EQ(w.tok_embd.ne, (std::vector<int64_t>{128, 2048}));
  EXPECT_EQ(w.tok_embd.type, nl::QType::F32);
  ASSERT_EQ(w.layers.size(), 2u);
  EXPECT_EQ(w.layers[1].wk.ne, (std::vector<int64_t>{128, 64}));
  EXPECT_EQ(w.layers[1].w_down.ne, (std::vector<int64_t>{384, 128}));
  EXPECT_FALSE(w.layers[0].bq.present());

  // The views point at the right bytes: compare with the safetensors file read directly.
  auto st = nl::SafetensorsFile::open((dir / "model.safetensors").string());
  const nl::SafetensorsTensor* q1 = st->find("model.layers.1.self_attn.q_proj.weight");
  ASSERT_NE(q1, nullptr);
  EXPECT_EQ(std::memcmp(w.layers[1].wq.data, q1->data, q1->nbytes), 0);
  EXPECT_EQ(w.layers[1].wq.row_bytes(), 128u * 4);

  ASSERT_NE(m->tokenizer, nullptr);
  EXPECT_EQ(m->tokenizer->vocab_size(), 2048);
  EXPECT_EQ(m->weight_bytes(), 2624000u);  // every tensor once: the shared head is not counted twice
}

TEST(LoadHf, ShardedFolderLoadsTheSameWeights) {
  NL_REQUIRE_SHARED("tinystories-656k", dir);
  TempDir tmp;
  fs::path out = tmp / "sharded";
  copy_hf_folder(dir, out);
  fs::remove(out / "model.safetensors");

  // Split the tensors over two shards, as transformers does for big models.
  auto st = nl::SafetensorsFile::open((dir / "model.safetensors").string());
  std::vector<nl::SafetensorsOut> a, b;
  json index;
  index["metadata"] = {{"total_size", 2624000}};
  for (const auto& t : st->tensors()) {
    nl::SafetensorsOut o;
    o.name = t.name;
    o.dtype = t.dtype;
    o.shape = t.shape;
    o.bytes.assign(t.data, t.data + t.nbytes);
    bool first = t.name.find("layers.1.") == std::string::npos;
    (first ? a : b).push_back(std::move(o));
    index["weight_map"][t.name] = first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  nl::write_safetensors((out / "model-00001-of-00002.safetensors").string(), a, {{"format", "pt"}});
  nl::write_safetensors((out / "model-00002-of-00002.safetensors").string(), b, {{"format", "pt"}});
  nltest::write_text(out / "model.safetensors.index.json", index.dump(2));

  auto ref = nl::Model::load(dir.string());
  auto m = nl::Model::load(out.string());
  EXPECT_EQ(m->config.n_layer, 2);
  for (size_t i = 0; i < 2; ++i)
    EXPECT_EQ(std::memcmp(m->weights.layers[i].w_up.data, ref->weights.layers[i].w_up.data, ref->weights.layers[i].w_up.nbytes), 0);
  EXPECT_EQ(std::memcmp(m->weights.tok_embd.data, ref->weights.tok_embd.data, ref->weights.tok_embd.nbytes), 0);

  // A shard named in the index but absent from the folder.
  fs::remove(out / "model-00002-of-00002.safetensors");
  expect_hf_load_error(out, {"model-00002-of-00002.safetensors", "missing"});
}

TEST(LoadHf, F16AndBf16WeightsLoadWithTheirType) {
  NL_REQUIRE_SHARED("tinystories-656k", dir);
  TempDir tmp;
  fs::path out = tmp / "half";
  copy_hf_folder(dir, out);
  auto st = nl::SafetensorsFile::open((dir / "model.safetensors").string());
  std::vector<nl::SafetensorsOut> ts;
  for (const auto& t : st->tensors()) {
    std::vector<float> v(t.nbytes / 4);
    std::memcpy(v.data(), t.data, t.nbytes);
    nl::QType dt = t.name.find("layers.0.") != std::string::npos ? nl::QType::BF16 : nl::QType::F16;
    ts.push_back(nl::SafetensorsOut::from_f32(t.name, t.shape, v.data(), dt));
  }
  nl::write_safetensors((out / "model.safetensors").string(), ts);
  auto m = nl::Model::load(out.string());
  EXPECT_EQ(m->weights.layers[0].wq.type, nl::QType::BF16);
  EXPECT_EQ(m->weights.layers[1].wq.type, nl::QType::F16);
  EXPECT_EQ(m->weights.layers[1].wq.row_bytes(), 128u * 2);
}

TEST(LoadHf, Llama3RopeScalingIsRead) {
  NL_REQUIRE_SHARED("tinystories-656k", dir);
  TempDir tmp;
  fs::path out = tmp / "scaled";
  copy_hf_folder(dir, out);
  json c = read_hf_json(dir / "config.json");
  c["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 32.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 8192}};
  nltest::write_text(out / "config.json", c.dump(2));
  auto m = nl::Model::load(out.string());
  EXPECT_EQ(m->config.rope_scaling.type, "llama3");
  EXPECT_FLOAT_EQ(m->config.rope_scaling.factor, 32.0f);
  EXPECT_EQ(m->config.rope_scaling.original_context, 8192);
  // Also as the factors llama.cpp stores, so HF and converted GGUF rotate identically.
  ASSERT_EQ(m->config.rope_freq_factors.size(), 8u);
  EXPECT_EQ(m->config.rope_freq_factors.front(), 1.0f);
  EXPECT_EQ(m->config.rope_freq_factors.back(), 32.0f);
}

}  // namespace
