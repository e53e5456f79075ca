// Adapter files: PEFT and llama.cpp GGUF round trips, the Q/K row layouts, the fields
// other tools read, an independent GGUF parser, and clear errors for the wrong model.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>

#include "gguf_peer.h"
#include "nightlora/host/adapter_io.h"
#include "nightlora/modelio/gguf.h"
#include "nightlora/modelio/safetensors.h"
#include "nightlora/tokenizer/tokenizer.h"
#include "nightlora/util/error.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// A model description without weights: adapter files only need the configuration.
std::unique_ptr<nl::Model> fake_model(nl::Arch arch, nl::RopeStyle rope, int64_t d_ff = 24) {
  auto m = std::make_unique<nl::Model>();
  nl::ModelConfig& c = m->config;
  c.arch = arch;
  c.name = "tiny-test";
  c.n_layer = 2;
  c.d_model = 16;
  c.n_head = 4;
  c.n_kv_head = 2;
  c.head_dim = 4;
  c.d_ff = d_ff;
  c.vocab = 50;
  c.rope_style = rope;
  m->source_path = "/models/tiny-test.gguf";
  m->source_format = "gguf";
  return m;
}

// An adapter whose values say where they are: A = 1000*layer + 100*proj + index,
// B[row][c] = 1000*layer + 100*proj + 10*row + c (+0.5 to differ from A).
nl::LoraAdapter labelled_adapter(const nl::Model& m, const std::string& targets = "all") {
  nl::LoraConfig cfg;
  cfg.rank = 2;
  cfg.alpha = 8;
  cfg.dropout = 0.05f;
  cfg.targets = nl::LoraConfig::parse_targets(targets);
  nl::LoraAdapter a = nl::LoraAdapter::init(m.config, cfg);
  for (int64_t l = 0; l < a.n_layer; ++l)
    for (int p = 0; p < nl::kNumProj; ++p) {
      nl::LoraPair& pr = a.at(l, static_cast<nl::Proj>(p));
      if (!pr.enabled) continue;
      for (size_t i = 0; i < pr.A.size(); ++i) pr.A[i] = static_cast<float>(1000 * l + 100 * p + static_cast<int64_t>(i));
      for (int64_t r = 0; r < pr.out; ++r)
        for (int64_t c = 0; c < 2; ++c)
          pr.B[static_cast<size_t>(r * 2 + c)] = static_cast<float>(1000 * l + 100 * p + 10 * r + c) + 0.5f;
    }
  return a;
}

void expect_same(const nl::LoraAdapter& a, const nl::LoraAdapter& b) {
  ASSERT_EQ(a.pairs.size(), b.pairs.size());
  EXPECT_EQ(a.cfg.rank, b.cfg.rank);
  EXPECT_EQ(a.cfg.alpha, b.cfg.alpha);
  EXPECT_EQ(a.cfg.targets, b.cfg.targets);
  for (size_t i = 0; i < a.pairs.size(); ++i) {
    EXPECT_EQ(a.pairs[i].enabled, b.pairs[i].enabled) << i;
    EXPECT_EQ(a.pairs[i].A, b.pairs[i].A) << i;
    EXPECT_EQ(a.pairs[i].B, b.pairs[i].B) << i;
  }
}

// Row r of B in the model layout appears at this row of a file in the other layout.
int64_t adjacent_to_hf_row(int64_t r, int64_t head_dim) {
  int64_t h = r / head_dim, j = r % head_dim, i = j / 2, s = j % 2;
  return h * head_dim + s * (head_dim / 2) + i;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const nl::Error& e) {
    return e.what();
  }
  return "";
}

TEST(AdapterIo, PeftRoundTripAndHfRowLayoutForLlamaGguf) {
  auto m = fake_model(nl::Arch::Llama, nl::RopeStyle::Adjacent);
  nl::LoraAdapter a = labelled_adapter(*m);
  nltest::TempDir td;
  nl::save_adapter_peft(a, *m, (td / "peft").string());
  nl::LoraAdapter back = nl::load_adapter((td / "peft").string(), *m);
  expect_same(a, back);
  EXPECT_FLOAT_EQ(back.cfg.dropout, 0.05f);

  auto st = nl::SafetensorsFile::open((td / "peft/adapter_model.safetensors").string());
  EXPECT_EQ(st->tensors().size(), 2u * 7u * 2u);
  EXPECT_EQ(st->metadata().at("format"), "pt");
  const auto* qa = st->find("base_model.model.model.layers.1.self_attn.q_proj.lora_A.weight");
  const auto* kb = st->find("base_model.model.model.layers.1.self_attn.k_proj.lora_B.weight");
  const auto* vb = st->find("base_model.model.model.layers.0.self_attn.v_proj.lora_B.weight");
  const auto* db = st->find("base_model.model.model.layers.0.mlp.down_proj.lora_B.weight");
  ASSERT_TRUE(qa && kb && vb && db);
  EXPECT_EQ(qa->shape, (std::vector<int64_t>{2, 16}));  // rank x in
  EXPECT_EQ(kb->shape, (std::vector<int64_t>{8, 2}));   // out x rank
  EXPECT_EQ(db->shape, (std::vector<int64_t>{16, 2}));
  // K rows are un-permuted to Hugging Face's layout; V rows are not touched.
  const float* kf = reinterpret_cast<const float*>(kb->data);
  const auto& kmine = a.at(1, nl::Proj::K).B;
  for (int64_t r = 0; r < 8; ++r)
    for (int c = 0; c < 2; ++c)
      EXPECT_EQ(kf[adjacent_to_hf_row(r, 4) * 2 + c], kmine[static_cast<size_t>(r * 2 + c)]) << r;
  EXPECT_EQ(reinterpret_cast<const float*>(vb->data)[3], a.at(0, nl::Proj::V).B[3]);
  EXPECT_NE(kf[2], kmine[2]);  // the permutation is not the identity

  json cfg = json::parse(nltest::read_text(td / "peft/adapter_config.json"));
  EXPECT_EQ(cfg["peft_type"], "LORA");
  EXPECT_EQ(cfg["task_type"], "CAUSAL_LM");
  EXPECT_EQ(cfg["r"], 2);
  EXPECT_EQ(cfg["lora_alpha"], 8.0);
  EXPECT_NEAR(cfg["lora_dropout"].get<double>(), 0.05, 1e-6);
  EXPECT_EQ(cfg["bias"], "none");
  EXPECT_EQ(cfg["base_model_name_or_path"], "/models/tiny-test.gguf");
  EXPECT_EQ(cfg["target_modules"],
            json({"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}));
  EXPECT_FALSE(fs::exists(td / "peft/adapter_config.json.tmp"));
}

TEST(AdapterIo, GgufRoundTripNamesShapesAndMetadata) {
  auto m = fake_model(nl::Arch::Llama, nl::RopeStyle::Adjacent);
  nl::LoraAdapter a = labelled_adapter(*m, "q,k,down");
  nltest::TempDir td;
  const std::string path = (td / "a.gguf").string();
  nl::save_adapter_gguf(a, *m, path);
  expect_same(a, nl::load_adapter(path, *m));

  auto g = nl::GgufFile::open(path);
  EXPECT_EQ(g->get_str("general.type"), "adapter");
  EXPECT_EQ(g->get_str("adapter.type"), "lora");
  EXPECT_EQ(g->get_str("general.architecture"), "llama");
  EXPECT_EQ(g->find("adapter.lora.alpha")->type, nl::GgufType::FLOAT32);
  EXPECT_EQ(g->get_float("adapter.lora.alpha"), 8.0);
  EXPECT_EQ(g->tensors().size(), 2u * 3u * 2u);
  const auto* qa = g->find_tensor("blk.0.attn_q.weight.lora_a");
  const auto* kb = g->find_tensor("blk.1.attn_k.weight.lora_b");
  const auto* da = g->find_tensor("blk.1.ffn_down.weight.lora_a");
  ASSERT_TRUE(qa && kb && da);
  EXPECT_EQ(qa->ne, (std::vector<int64_t>{16, 2}));  // llama.cpp: lora_a ne = {in, rank}
  EXPECT_EQ(kb->ne, (std::vector<int64_t>{2, 8}));   //           lora_b ne = {rank, out}
  EXPECT_EQ(da->ne, (std::vector<int64_t>{24, 2}));
  EXPECT_EQ(qa->type, nl::QType::F32);
  EXPECT_EQ(g->find_tensor("blk.0.attn_v.weight.lora_a"), nullptr);
  // A llama GGUF model is already in llama.cpp's layout: B is stored as is.
  EXPECT_EQ(0, std::memcmp(kb->data, a.at(1, nl::Proj::K).B.data(), kb->nbytes));
}

TEST(AdapterIo, GgufParsedByHuggingFaceGguf) {
  auto m = fake_model(nl::Arch::Qwen2, nl::RopeStyle::HalfSplit);
  nl::LoraAdapter a = labelled_adapter(*m, "q,v,o,up");
  nltest::TempDir td;
  const fs::path path = td / "a.gguf";
  nl::save_adapter_gguf(a, *m, path.string());
  std::string node = nltest::node_with_oracles();
  if (node.empty()) GTEST_SKIP() << "node or tools/js/node_modules missing (run scripts/setup.sh)";
  EXPECT_TRUE(nltest::expect_gguf_matches_peer(path));
  auto r = nltest::run_cmd(node + " " + nltest::shq((nltest::source_dir() / "tools/js/gguf_dump.mjs").string()) + " " +
                           nltest::shq(path.string()));
  ASSERT_EQ(r.rc, 0) << r.err;
  json j = json::parse(r.out);
  EXPECT_EQ(j["metadata"]["general.type"]["value"], "adapter");
  EXPECT_EQ(j["metadata"]["adapter.type"]["value"], "lora");
  EXPECT_EQ(j["metadata"]["general.architecture"]["value"], "qwen2");
  EXPECT_DOUBLE_EQ(j["metadata"]["adapter.lora.alpha"]["value"].get<double>(), 8.0);
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& t : j["tensors"]) shapes[t["name"]] = t["shape"].get<std::vector<int64_t>>();
  EXPECT_EQ(shapes.size(), 16u);
  EXPECT_EQ(shapes["blk.0.attn_q.weight.lora_a"], (std::vector<int64_t>{16, 2}));
  EXPECT_EQ(shapes["blk.0.attn_q.weight.lora_b"], (std::vector<int64_t>{2, 16}));
  EXPECT_EQ(shapes["blk.1.attn_v.weight.lora_b"], (std::vector<int64_t>{2, 8}));
  EXPECT_EQ(shapes["blk.1.attn_output.weight.lora_a"], (std::vector<int64_t>{16, 2}));
  EXPECT_EQ(shapes["blk.1.ffn_up.weight.lora_b"], (std::vector<int64_t>{2, 24}));
}

TEST(AdapterIo, HfLlamaModelPermutesOnlyForGguf) {
  // A llama model from a Hugging Face folder is in HF layout: PEFT as is, GGUF permuted.
  auto m = fake_model(nl::Arch::Llama, nl::RopeStyle::HalfSplit);
  m->source_format = "hf";
  nl::LoraAdapter a = labelled_adapter(*m, "q,k");
  nltest::TempDir td;
  nl::save_adapter_peft(a, *m, (td / "p").string());
  nl::save_adapter_gguf(a, *m, (td / "a.gguf").string());
  expect_same(a, nl::load_adapter((td / "p").string(), *m));
  expect_same(a, nl::load_adapter((td / "a.gguf").string(), *m));
  auto st = nl::SafetensorsFile::open((td / "p/adapter_model.safetensors").string());
  const auto* qb = st->find("base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight");
  EXPECT_EQ(0, std::memcmp(qb->data, a.at(0, nl::Proj::Q).B.data(), qb->nbytes));
  auto g = nl::GgufFile::open((td / "a.gguf").string());
  const float* gq = reinterpret_cast<const float*>(g->find_tensor("blk.0.attn_q.weight.lora_b")->data);
  const auto& mine = a.at(0, nl::Proj::Q).B;
  for (int64_t r = 0; r < 16; ++r)  // GGUF row r (adjacent) holds HF row adjacent_to_hf_row(r)
    EXPECT_EQ(gq[r * 2], mine[static_cast<size_t>(adjacent_to_hf_row(r, 4) * 2)]) << r;
  // And the same adapter written for the GGUF version of this model gives identical files.
  auto mg = fake_model(nl::Arch::Llama, nl::RopeStyle::Adjacent);
  nl::LoraAdapter as_gguf_model = nl::load_adapter((td / "p").string(), *mg);
  nl::save_adapter_gguf(as_gguf_model, *mg, (td / "b.gguf").string());
  EXPECT_EQ(nltest::read_text(td / "a.gguf"), nltest::read_text(td / "b.gguf"));
}

TEST(AdapterIo, QwenIsNeverPermuted) {
  auto m = fake_model(nl::Arch::Qwen2, nl::RopeStyle::HalfSplit);
  nl::LoraAdapter a = labelled_adapter(*m, "q,k");
  nltest::TempDir td;
  nl::save_adapter_peft(a, *m, (td / "p").string());
  nl::save_adapter_gguf(a, *m, (td / "a.gguf").string());
  auto st = nl::SafetensorsFile::open((td / "p/adapter_model.safetensors").string());
  auto g = nl::GgufFile::open((td / "a.gguf").string());
  const auto* pk = st->find("base_model.model.model.layers.1.self_attn.k_proj.lora_B.weight");
  const auto* gk = g->find_tensor("blk.1.attn_k.weight.lora_b");
  EXPECT_EQ(0, std::memcmp(pk->data, a.at(1, nl::Proj::K).B.data(), pk->nbytes));
  EXPECT_EQ(0, std::memcmp(gk->data, a.at(1, nl::Proj::K).B.data(), gk->nbytes));
}

TEST(AdapterIo, AdapterForAnotherModelIsAClearError) {
  auto m = fake_model(nl::Arch::Llama, nl::RopeStyle::Adjacent);
  nl::LoraAdapter a = labelled_adapter(*m);
  nltest::TempDir td;
  nl::save_adapter_peft(a, *m, (td / "p").string());
  nl::save_adapter_gguf(a, *m, (td / "a.gguf").string());
  auto other = fake_model(nl::Arch::Llama, nl::RopeStyle::Adjacent, /*d_ff=*/32);
  for (const char* p : {"p", "a.gguf"}) {
    std::string err = error_of([&] { nl::load_adapter((td / p).string(), *other); });
    EXPECT_NE(err.find("another model"), std::string::npos) << err;
    EXPECT_NE(err.find("24"), std::string::npos) << err;  // says what it found
  }
  auto qwen = fake_model(nl::Arch::Qwen2, nl::RopeStyle::HalfSplit);
  std::string err = error_of([&] { nl::load_adapter((td / "a.gguf").string(), *qwen); });
  EXPECT_NE(err.find("architecture 'llama'"), std::string::npos) << err;
  auto shallow = fake_model(nl::Arch::Llama, nl::RopeStyle::Adjacent);
  shallow->config.n_layer = 1;
  err = error_of([&] { nl::load_adapter((td / "p").string(), *shallow); });
  EXPECT_NE(err.find("layer"), std::string::npos) << err;
}

TEST(AdapterIo, NotAnAdapter) {
  auto m = fake_model(nl::Arch::Llama, nl::RopeStyle::Adjacent);
  nltest::TempDir td;
  EXPECT_NE(error_of([&] { nl::load_adapter((td / "missing").string(), *m); }).find("no such"), std::string::npos);
  nltest::write_text(td / "x.bin", "hello, not an adapter");
  EXPECT_NE(error_of([&] { nl::load_adapter((td / "x.bin").string(), *m); }).find("not a LoRA adapter"),
            std::string::npos);
  fs::create_directory(td / "empty");
  EXPECT_NE(error_of([&] { nl::load_adapter((td / "empty").string(), *m); }).find("adapter_config.json"),
            std::string::npos);
  // A model GGUF passed as an adapter.
  nl::GgufWriter w;
  w.set("general.architecture", nl::GgufValue::str("llama"));
  static const float one = 1.0f;
  w.add_tensor_data("output_norm.weight", nl::QType::F32, {1}, &one);
  w.write((td / "model.gguf").string());
  std::string err = error_of([&] { nl::load_adapter((td / "model.gguf").string(), *m); });
  EXPECT_NE(err.find("not 'adapter'"), std::string::npos) << err;
  // A PEFT config with an option we do not implement.
  nl::LoraAdapter a = labelled_adapter(*m);
  nl::save_adapter_peft(a, *m, (td / "p").string());
  json cfg = json::parse(nltest::read_text(td / "p/adapter_config.json"));
  cfg["use_dora"] = true;
  nltest::write_text(td / "p/adapter_config.json", cfg.dump());
  err = error_of([&] { nl::load_adapter((td / "p").string(), *m); });
  EXPECT_NE(err.find("use_dora"), std::string::npos) << err;
}

}  // namespace
