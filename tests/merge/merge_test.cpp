// `nightlora merge`: merged weights against a reference computed here from the dequantized
// base and the adapters (two scaled adapters, in one go and in sequence), greedy tokens of
// the merged model against base + adapter, types and metadata carried over, the
// independent GGUF parser, bad inputs, and llama.cpp (node-llama-cpp) as an oracle.
#include <unistd.h>

#include <cctype>
#include <cmath>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gguf_peer.h"
#include "nightlora/host/adapter_io.h"
#include "nightlora/host/adapter_spec.h"
#include "nightlora/host/lora.h"
#include "nightlora/modelio/gguf.h"
#include "nightlora/modelio/model.h"
#include "nightlora/modelio/synth.h"
#include "nightlora/quant/qtype.h"
#include "nightlora/util/error.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;
using nltest::run_cli;
using nltest::shq;
using nltest::TempDir;

// An adapter for `m` with random (non-zero) B, so merging changes the weights.
nl::LoraAdapter random_adapter(const nl::Model& m, int64_t rank, float alpha, const std::string& targets, uint32_t seed,
                               float b_scale) {
  nl::LoraConfig cfg;
  cfg.rank = rank;
  cfg.alpha = alpha;
  cfg.targets = nl::LoraConfig::parse_targets(targets);
  cfg.seed = seed;
  nl::LoraAdapter a = nl::LoraAdapter::init(m.config, cfg);
  uint32_t i = 0;
  for (nl::LoraPair& p : a.pairs)
    if (p.enabled) p.B = nltest::random_vec(p.B.size(), seed * 1000 + i++, b_scale);
  return a;
}

fs::path synth(const TempDir& tmp, const std::string& preset, nl::QType type, const std::string& name) {
  nl::SynthOptions o;
  o.preset = preset;
  o.type = type;
  o.seed = 3;
  o.tokenizer = "generated";
  const fs::path out = tmp / name;
  nl::synth_model(out.string(), o);
  return out;
}

// Two adapters saved in both file layouts: `a` as a llama.cpp LoRA GGUF (tmp/a.gguf), `b`
// as a PEFT folder (tmp/b); A and B are their paths, quoted for the shell.
struct SavedPair {
  nl::LoraAdapter a, b;
  std::string A, B;
};
SavedPair save_pair(const nl::Model& m, const TempDir& tmp, nl::LoraAdapter a, nl::LoraAdapter b) {
  nl::save_adapter_gguf(a, m, (tmp / "a.gguf").string());
  nl::save_adapter_peft(b, m, (tmp / "b").string());
  return {std::move(a), std::move(b), shq((tmp / "a.gguf").string()), shq((tmp / "b").string())};
}

// All rows of a tensor as f32.
std::vector<float> tensor_f32(const nl::GgufFile& f, const std::string& name) {
  const nl::GgufTensorInfo* t = f.find_tensor(name);
  EXPECT_NE(t, nullptr) << name;
  if (!t) return {};
  const int64_t cols = t->ne[0], rows = t->n_elements() / cols;
  const size_t row_bytes = nl::qtype_row_bytes(t->type, cols);
  std::vector<float> v(static_cast<size_t>(t->n_elements()));
  for (int64_t r = 0; r < rows; ++r) nl::dequantize_row(t->type, t->data + r * row_bytes, v.data() + r * cols, cols);
  return v;
}

struct Scaled {
  const nl::LoraAdapter* a;
  double scale;
};

// W + Σ scale·(alpha/rank)·B·A for projection p of layer l, in double: the reference.
std::vector<double> reference_merge(const std::vector<float>& W, const std::vector<Scaled>& adapters, int64_t l, nl::Proj p,
                                    int64_t cols) {
  std::vector<double> out(W.begin(), W.end());
  const int64_t rows = static_cast<int64_t>(W.size()) / cols;
  for (const Scaled& s : adapters) {
    const nl::LoraPair& pr = s.a->at(l, p);
    if (!pr.enabled) continue;
    const int64_t rank = s.a->cfg.rank;
    const double f = s.scale * s.a->cfg.alpha / static_cast<double>(rank);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < cols; ++j) {
        double d = 0;
        for (int64_t k = 0; k < rank; ++k) d += double(pr.B[r * rank + k]) * pr.A[k * cols + j];
        out[r * cols + j] += f * d;
      }
  }
  return out;
}

// One adapter equivalent to applying several: ranks stacked (A rows, B columns), each
// adapter's scale·alpha/rank folded into its B columns, alpha = rank so the factor is 1.
nl::LoraAdapter stack_adapters(const nl::Model& m, const std::vector<Scaled>& parts) {
  int64_t rank = 0;
  for (const Scaled& s : parts) rank += s.a->cfg.rank;
  nl::LoraAdapter out;
  out.cfg.rank = rank;
  out.cfg.alpha = static_cast<float>(rank);
  out.n_layer = m.config.n_layer;
  out.pairs.resize(parts[0].a->pairs.size());
  for (size_t i = 0; i < out.pairs.size(); ++i) {
    nl::LoraPair& o = out.pairs[i];
    for (const Scaled& s : parts) o.enabled |= s.a->pairs[i].enabled;
    if (!o.enabled) continue;
    const auto [in, outd] = nl::proj_shape(m.config, static_cast<nl::Proj>(i % nl::kNumProj));
    o.in = in;
    o.out = outd;
    o.A.assign(static_cast<size_t>(rank * in), 0.0f);
    o.B.assign(static_cast<size_t>(outd * rank), 0.0f);
    int64_t k0 = 0;
    for (const Scaled& s : parts) {
      const nl::LoraPair& p = s.a->pairs[i];
      const int64_t r = s.a->cfg.rank;
      if (p.enabled) {
        const float f = static_cast<float>(s.scale) * s.a->cfg.scale();
        for (int64_t k = 0; k < r; ++k)
          for (int64_t j = 0; j < in; ++j) o.A[(k0 + k) * in + j] = p.A[k * in + j];
        for (int64_t row = 0; row < outd; ++row)
          for (int64_t k = 0; k < r; ++k) o.B[row * rank + k0 + k] = f * p.B[row * r + k];
      }
      k0 += r;
    }
  }
  return out;
}

// Every projection of `merged` equals the reference from `base` and the adapters (f32
// output: float rounding only); every other tensor is byte for byte the base's.
void expect_merged_equals_reference(const nl::Model& base, const fs::path& merged, const std::vector<Scaled>& adapters) {
  auto f = nl::GgufFile::open(merged.string());
  const nl::GgufFile& b = *base.gguf();
  ASSERT_EQ(f->tensors().size(), b.tensors().size());
  int adapted = 0;
  for (int64_t l = 0; l < base.config.n_layer; ++l)
    for (int pi = 0; pi < nl::kNumProj; ++pi) {
      const nl::Proj p = static_cast<nl::Proj>(pi);
      const nl::TensorView& w = base.weights.layers[l].proj(p);
      bool any = false;
      for (const Scaled& s : adapters) any |= s.a->at(l, p).enabled;
      if (!any) continue;
      ++adapted;
      const std::vector<double> ref = reference_merge(tensor_f32(b, w.name), adapters, l, p, w.cols());
      const std::vector<float> got = tensor_f32(*f, w.name);
      ASSERT_EQ(got.size(), ref.size()) << w.name;
      double worst = 0, moved = 0;
      const std::vector<float> orig = tensor_f32(b, w.name);
      for (size_t i = 0; i < ref.size(); ++i) {
        worst = std::max(worst, std::fabs(got[i] - ref[i]) / (1e-3 + std::fabs(ref[i])));
        moved = std::max(moved, std::fabs(ref[i] - orig[i]));
      }
      EXPECT_LT(worst, 1e-4) << w.name;
      EXPECT_GT(moved, 1e-3) << w.name << ": the adapters should change this tensor";
    }
  EXPECT_GT(adapted, 0);
  for (const nl::GgufTensorInfo& t : b.tensors()) {
    bool is_proj = false;
    for (const auto& lw : base.weights.layers)
      for (int pi = 0; pi < nl::kNumProj; ++pi) is_proj |= lw.proj(static_cast<nl::Proj>(pi)).name == t.name;
    if (is_proj || t.type != nl::QType::F32) continue;
    const nl::GgufTensorInfo* m = f->find_tensor(t.name);
    ASSERT_NE(m, nullptr) << t.name;
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(m->data), m->nbytes),
              std::string(reinterpret_cast<const char*>(t.data), t.nbytes))
        << t.name << " should be copied as it is";
  }
}

// generate's exact path (f32 products and KV cache): the merge is checked against the base
// plus adapter and against llama.cpp, so nothing else may move the logits.
const std::string kExact = " --precision f32 --kv-type f32";

// Greedy token ids from `generate`.
std::string greedy(const fs::path& model, const std::string& adapter_args = "", int n = 30) {
  nltest::CmdResult r = run_cli("generate --model " + shq(model.string()) + " " + adapter_args +
                                " --prompt 'Once upon a time' --temp 0 -n " + std::to_string(n) + " --print-ids" + kExact);
  EXPECT_EQ(r.rc, 0) << r.err;
  return r.out;
}

// The logits of the first generated token (generate --logits-json).
std::vector<float> first_logits(const fs::path& model, const std::string& adapter_args, const fs::path& json_path) {
  nltest::CmdResult r = run_cli("generate --model " + shq(model.string()) + " " + adapter_args +
                                " --prompt 'Once upon a time' --temp 0 -n 1 --print-ids" + kExact + " --logits-json " +
                                shq(json_path.string()));
  EXPECT_EQ(r.rc, 0) << r.err;
  return nlohmann::json::parse(nltest::read_text(json_path)).at("first_logits").get<std::vector<float>>();
}

size_t count_ids(const std::string& s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size(); ++i) n += std::isdigit(static_cast<unsigned char>(s[i])) && (i == 0 || s[i - 1] == ' ');
  return n;
}

nltest::CmdResult merge_cli(const std::string& args) { return run_cli("merge " + args); }

// Runs a merge that must succeed; records its stderr when it does not.
bool merge_ok(const std::string& args) {
  const nltest::CmdResult r = merge_cli(args);
  if (r.rc != 0) ADD_FAILURE() << "merge " << args << "\nexit " << r.rc << ": " << r.err;
  return r.rc == 0;
}

TEST(MergeTiny, TwoScaledAdaptersEqualTheReferenceAndMergingInSequence) {
  TempDir tmp;
  const fs::path base_path = synth(tmp, "tiny-qwen2", nl::QType::F32, "base.gguf");
  auto base = nl::Model::load(base_path.string());
  const SavedPair pair = save_pair(*base, tmp, random_adapter(*base, 4, 8.0f, "all", 1, 0.05f),
                                   random_adapter(*base, 2, 2.0f, "q,v,down", 2, 0.05f));
  const nl::LoraAdapter &a = pair.a, &b = pair.b;
  const std::string &A = pair.A, &B = pair.B;
  nltest::CmdResult r = merge_cli("--model " + shq(base_path.string()) + " --adapter " + A + ":0.5 --lora " + B +
                                  ":1.0 --out " + shq((tmp / "ab.gguf").string()));
  ASSERT_EQ(r.rc, 0) << r.err;
  expect_merged_equals_reference(*base, tmp / "ab.gguf", {{&a, 0.5}, {&b, 1.0}});

  // The same two merges one after the other.
  r = merge_cli("--model " + shq(base_path.string()) + " --adapter " + A + ":0.5 --out " + shq((tmp / "a_only.gguf").string()));
  ASSERT_EQ(r.rc, 0) << r.err;
  r = merge_cli("--model " + shq((tmp / "a_only.gguf").string()) + " --adapter " + B + " --out " +
                shq((tmp / "a_then_b.gguf").string()));
  ASSERT_EQ(r.rc, 0) << r.err;
  auto both = nl::GgufFile::open((tmp / "ab.gguf").string());
  auto seq = nl::GgufFile::open((tmp / "a_then_b.gguf").string());
  for (const nl::GgufTensorInfo& t : both->tensors()) {
    const std::vector<float> x = tensor_f32(*both, t.name), y = tensor_f32(*seq, t.name);
    ASSERT_EQ(x.size(), y.size());
    for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(x[i], y[i], 1e-5 + 1e-5 * std::fabs(x[i])) << t.name << " [" << i << "]";
  }

  // Metadata carried over unchanged (the type is the base's, so general.file_type too).
  ASSERT_EQ(both->metadata().size(), base->gguf()->metadata().size());
  for (size_t i = 0; i < both->metadata().size(); ++i) {
    EXPECT_EQ(both->metadata()[i].first, base->gguf()->metadata()[i].first);
    EXPECT_EQ(both->metadata()[i].second.to_string(1u << 20), base->gguf()->metadata()[i].second.to_string(1u << 20))
        << both->metadata()[i].first;
  }
  // Applying both adapters at generation time (as one adapter of rank 4 + 2 holding both,
  // scales folded into B) gives the merged model's tokens.
  const nl::LoraAdapter ab = stack_adapters(*base, {{&a, 0.5}, {&b, 1.0}});
  nl::save_adapter_gguf(ab, *base, (tmp / "stacked.gguf").string());
  // A random tiny model repeats one token whatever the weights, so its logits are compared.
  const std::string stacked = "--adapter " + shq((tmp / "stacked.gguf").string());
  EXPECT_EQ(greedy(tmp / "ab.gguf"), greedy(base_path, stacked));
  const std::vector<float> merged_logits = first_logits(tmp / "ab.gguf", "", tmp / "l1.json");
  const std::vector<float> applied_logits = first_logits(base_path, stacked, tmp / "l2.json");
  const std::vector<float> base_logits = first_logits(base_path, "", tmp / "l3.json");
  ASSERT_EQ(merged_logits.size(), applied_logits.size());
  double diff = 0, moved = 0;
  for (size_t i = 0; i < merged_logits.size(); ++i) {
    diff = std::max(diff, double(std::fabs(merged_logits[i] - applied_logits[i])));
    moved = std::max(moved, double(std::fabs(base_logits[i] - applied_logits[i])));
  }
  EXPECT_LT(diff, 1e-4);
  EXPECT_GT(moved, 100 * diff + 1e-3) << "the adapters should change the logits, or this check proves nothing";
  nltest::expect_gguf_matches_peer(tmp / "ab.gguf");
}

TEST(MergeTiny, QuantizedBaseKeepsEachTensorsTypeUnlessTold) {
  TempDir tmp;
  const fs::path base_path = synth(tmp, "tiny-qwen2", nl::QType::Q8_0, "base.gguf");
  auto base = nl::Model::load(base_path.string());
  nl::save_adapter_gguf(random_adapter(*base, 4, 8.0f, "all", 5, 0.05f), *base, (tmp / "a.gguf").string());
  ASSERT_TRUE(merge_ok("--model " + shq(base_path.string()) + " --adapter " + shq((tmp / "a.gguf").string()) + " --out " +
                       shq((tmp / "same.gguf").string())));
  auto same = nl::GgufFile::open((tmp / "same.gguf").string());
  ASSERT_EQ(same->tensors().size(), base->gguf()->tensors().size());
  for (size_t i = 0; i < same->tensors().size(); ++i) EXPECT_EQ(same->tensors()[i].type, base->gguf()->tensors()[i].type);
  EXPECT_NE(same->find_tensor("blk.1.ffn_up.weight")->data[40], 0);  // a sanity read of merged data
  EXPECT_EQ(count_ids(greedy(tmp / "same.gguf", "", 12)), 12u);

  for (const char* type : {"f16", "q4_0", "f32"}) {
    const fs::path out = tmp / (std::string(type) + ".gguf");
    nltest::CmdResult r = merge_cli("--model " + shq(base_path.string()) + " --adapter " + shq((tmp / "a.gguf").string()) +
                                    " --type " + type + " -q --out " + shq(out.string()));
    ASSERT_EQ(r.rc, 0) << r.err;
    auto f = nl::GgufFile::open(out.string());
    EXPECT_EQ(f->find_tensor("blk.0.attn_q.weight")->type, nl::parse_qtype(type));
    EXPECT_EQ(f->find_tensor("blk.0.attn_norm.weight")->type, nl::QType::F32);  // 1-D tensors keep theirs
    EXPECT_EQ(count_ids(greedy(out, "", 12)), 12u) << type;
  }
}

TEST(MergeStories, F32MergeGivesTheTokensOfBasePlusAdapter) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", model);
  TempDir tmp;
  auto base = nl::Model::load(model.string());
  // A llama.cpp LoRA GGUF (permuted Q/K rows) and a PEFT folder (Hugging Face rows).
  const SavedPair pair = save_pair(*base, tmp, random_adapter(*base, 8, 16.0f, "all", 11, 0.04f),
                                   random_adapter(*base, 4, 4.0f, "q,k,o,up", 12, 0.04f));
  const nl::LoraAdapter &a = pair.a, &b = pair.b;
  const std::string &A = pair.A, &B = pair.B;

  ASSERT_TRUE(merge_ok("--model " + shq(model.string()) + " --adapter " + A + " --type f32 --out " +
                       shq((tmp / "m32.gguf").string())));
  const std::string with_adapter = greedy(model, "--adapter " + A);
  EXPECT_NE(with_adapter, greedy(model)) << "the adapter should change the output, or this test proves nothing";
  EXPECT_EQ(greedy(tmp / "m32.gguf"), with_adapter);
  expect_merged_equals_reference(*base, tmp / "m32.gguf", {{&a, 1.0}});

  // Two adapters, one through each file layout, with scales.
  ASSERT_TRUE(merge_ok("--model " + shq(model.string()) + " --adapter " + A + ":0.5 --adapter " + B + ":-1.5 --out " +
                       shq((tmp / "ab.gguf").string())));
  expect_merged_equals_reference(*base, tmp / "ab.gguf", {{&a, 0.5}, {&b, -1.5}});

  // f16: loads and generates (rounding to f16 may change a token, so no equality asked).
  ASSERT_TRUE(merge_ok("--model " + shq(model.string()) + " --adapter " + A + " --type f16 --out " +
                       shq((tmp / "m16.gguf").string())));
  EXPECT_EQ(count_ids(greedy(tmp / "m16.gguf")), count_ids(with_adapter));
  nltest::expect_gguf_matches_peer(tmp / "m32.gguf");
}

TEST(MergeCli, BadInputsExitOneWithAClearMessage) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", model);
  TempDir tmp;
  const fs::path other = synth(tmp, "tiny-qwen2", nl::QType::F32, "other.gguf");
  auto other_model = nl::Model::load(other.string());
  nl::save_adapter_gguf(random_adapter(*other_model, 2, 4.0f, "all", 3, 0.05f), *other_model, (tmp / "other.gguf.lora").string());
  auto base = nl::Model::load(model.string());
  nl::save_adapter_gguf(random_adapter(*base, 2, 4.0f, "all", 3, 0.05f), *base, (tmp / "mine.gguf").string());
  const std::string M = "--model " + shq(model.string());
  const std::string mine = shq((tmp / "mine.gguf").string());

  struct Case {
    std::string args, expect;
  };
  const std::vector<Case> cases = {
      {M + " --adapter " + shq((tmp / "other.gguf.lora").string()) + " --out " + shq((tmp / "o1.gguf").string()),
       "another model"},
      {M + " --adapter " + mine + ":abc --out " + shq((tmp / "o2.gguf").string()), "scale 'abc' is not a finite number"},
      {M + " --adapter " + mine + ":nan --out " + shq((tmp / "o3.gguf").string()), "not a finite number"},
      {M + " --adapter " + mine + " --out " + shq((tmp / "no/such/dir/o4.gguf").string()), "does not exist"},
      {M + " --adapter " + mine + " --out " + shq(model.string()), "is the base model itself"},
      {M + " --adapter " + shq((tmp / "missing.gguf").string()) + " --out " + shq((tmp / "o5.gguf").string()),
       "no such adapter"},
      {M + " --adapter " + mine + " --type q9_9 --out " + shq((tmp / "o6.gguf").string()), "q9_9"},
  };
  for (const Case& c : cases) {
    nltest::CmdResult r = merge_cli(c.args);
    EXPECT_EQ(r.rc, 1) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << c.args << "\n" << r.err;
  }
  for (const char* name : {"o1.gguf", "o2.gguf", "o3.gguf", "o5.gguf", "o6.gguf"}) EXPECT_FALSE(fs::exists(tmp / name)) << name;
  // An unwritable folder: nothing is left behind either.
  fs::create_directory(tmp / "ro");
  fs::permissions(tmp / "ro", fs::perms::owner_read | fs::perms::owner_exec);
  if (::access((tmp / "ro").c_str(), W_OK) != 0) {
    nltest::CmdResult r = merge_cli(M + " --adapter " + mine + " --out " + shq((tmp / "ro/o.gguf").string()));
    EXPECT_EQ(r.rc, 1) << r.err;
    EXPECT_NE(r.err.find("ro/o.gguf"), std::string::npos) << r.err;
  }
  fs::permissions(tmp / "ro", fs::perms::owner_all);
}

TEST(MergeHf, FolderOutputLoadsBackWithTheTokensOfBasePlusAdapter) {
  NL_REQUIRE_SHARED("tinystories-656k", hf);
  TempDir tmp;
  auto base = nl::Model::load(hf.string());
  const nl::LoraAdapter a = random_adapter(*base, 4, 8.0f, "all", 31, 0.04f);
  nl::save_adapter_peft(a, *base, (tmp / "a").string());
  const std::string A = shq((tmp / "a").string());
  const std::string with_adapter = greedy(hf, "--adapter " + A);
  EXPECT_NE(with_adapter, greedy(hf)) << "the adapter should change the output, or this test proves nothing";

  nltest::CmdResult r = merge_cli("--model " + shq(hf.string()) + " --adapter " + A + " --format hf --out " +
                                  shq((tmp / "merged").string()));
  ASSERT_EQ(r.rc, 0) << r.err;
  for (const char* f : {"model.safetensors", "config.json", "tokenizer.json", "tokenizer_config.json"})
    EXPECT_TRUE(fs::exists(tmp / "merged" / f)) << f;
  EXPECT_EQ(greedy(tmp / "merged"), with_adapter);
  // The merged q projection against the reference.
  auto merged = nl::Model::load((tmp / "merged").string());
  const nl::TensorView& q0 = base->weights.layers[0].wq;
  const nl::TensorView& m0 = merged->weights.layers[0].wq;
  ASSERT_EQ(m0.type, nl::QType::F32);
  std::vector<float> w(static_cast<size_t>(q0.rows() * q0.cols())), got(w.size());
  for (int64_t row = 0; row < q0.rows(); ++row) {
    nl::dequantize_row(q0.type, q0.row(row), w.data() + row * q0.cols(), q0.cols());
    nl::dequantize_row(m0.type, m0.row(row), got.data() + row * q0.cols(), q0.cols());
  }
  const std::vector<double> ref = reference_merge(w, {{&a, 1.0}}, 0, nl::Proj::Q, q0.cols());
  for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(got[i], ref[i], 1e-5 + 1e-5 * std::fabs(ref[i])) << i;

  // The same merge as GGUF (written as `convert` writes it: llama.cpp's permuted Q/K rows).
  r = merge_cli("--model " + shq(hf.string()) + " --adapter " + A + " --type f32 --out " + shq((tmp / "m.gguf").string()));
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(greedy(tmp / "m.gguf"), with_adapter);

  // bf16 output loads and generates; a quantized type cannot be written so.
  r = merge_cli("--model " + shq(hf.string()) + " --adapter " + A + " --format hf --type bf16 --out " +
                shq((tmp / "bf16").string()));
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(nl::Model::load((tmp / "bf16").string())->weights.layers[1].w_down.type, nl::QType::BF16);
  EXPECT_EQ(count_ids(greedy(tmp / "bf16")), count_ids(with_adapter));
  r = merge_cli("--model " + shq(hf.string()) + " --adapter " + A + " --format hf --type q8_0 --out " +
                shq((tmp / "q8").string()));
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("f32, f16 or bf16"), std::string::npos) << r.err;
}

// Why llama.cpp (node-llama-cpp's prebuilt CPU binary) cannot run here, or "" when it can.
std::string llama_cpp_missing() {
  if (nltest::node_with_oracles().empty()) return "node or tools/js/node_modules is missing (run scripts/setup.sh)";
  if (!fs::exists(nltest::source_dir() / "tools/js/node_modules/node-llama-cpp"))
    return "the npm package node-llama-cpp is not installed in tools/js (run scripts/setup.sh)";
  return "";
}

// Greedy token ids from llama.cpp (tools/js/llama_greedy.mjs) for a prompt given as ids.
std::string llama_cpp_greedy(const fs::path& model, const std::string& ids, const std::string& lora = "", int n = 30) {
  nltest::CmdResult r = nltest::run_cmd("node " + shq((nltest::source_dir() / "tools/js/llama_greedy.mjs").string()) +
                                        " --model " + shq(model.string()) + " --prompt-ids " + shq(ids) + " -n " +
                                        std::to_string(n) + (lora.empty() ? "" : " --lora " + shq(lora)));
  EXPECT_EQ(r.rc, 0) << r.err;
  return r.out;
}

// "Once upon a time" as token ids (with BOS) by our tokenizer: both engines get the same ids.
std::string prompt_ids(const fs::path& model) {
  nltest::CmdResult tok = run_cli("tokenize --bos --model " + shq(model.string()), "Once upon a time\n");
  EXPECT_EQ(tok.rc, 0) << tok.err;
  return tok.out.substr(0, tok.out.find('\n'));
}

// Our greedy tokens for a prompt given as ids, with an adapter.
std::string ours_with_adapter(const fs::path& model, const fs::path& adapter, const std::string& ids) {
  return run_cli("generate --model " + shq(model.string()) + " --adapter " + shq(adapter.string()) + " --prompt-ids " +
                 shq(ids) + " --temp 0 -n 30 --print-ids" + kExact)
      .out;
}

// A GGUF base with a llama.cpp LoRA GGUF adapter (also applied in llama.cpp with its
// `lora` option), and a Hugging Face base with a PEFT adapter merged to GGUF.
struct LlamaCase {
  const char* model;  // under ../shared/models
  bool gguf_adapter;
};
void PrintTo(const LlamaCase& c, std::ostream* os) { *os << c.model; }
class MergeLlamaCpp : public ::testing::TestWithParam<LlamaCase> {};

TEST_P(MergeLlamaCpp, MergedF32GivesTheTokensOfBasePlusAdapter) {
  NL_REQUIRE_SHARED(GetParam().model, model);
  if (const std::string why = llama_cpp_missing(); !why.empty()) GTEST_SKIP() << "llama.cpp oracle unavailable: " << why;
  TempDir tmp;
  auto base = nl::Model::load(model.string());
  const nl::LoraAdapter a = random_adapter(*base, 8, 16.0f, "all", 21, 0.04f);
  const fs::path adapter = tmp / (GetParam().gguf_adapter ? "a.gguf" : "a");
  if (GetParam().gguf_adapter) nl::save_adapter_gguf(a, *base, adapter.string());
  else nl::save_adapter_peft(a, *base, adapter.string());
  ASSERT_TRUE(merge_ok("--model " + shq(model.string()) + " --adapter " + shq(adapter.string()) + " --type f32 --out " +
                       shq((tmp / "m32.gguf").string())));

  const std::string ids = prompt_ids(model);
  const std::string ours_applied = ours_with_adapter(model, adapter, ids);
  const std::string llama_merged = llama_cpp_greedy(tmp / "m32.gguf", ids);
  EXPECT_EQ(count_ids(llama_merged), 30u) << llama_merged;
  EXPECT_EQ(llama_merged, ours_applied) << "llama.cpp's merged model vs ours with --adapter";
  if (GetParam().gguf_adapter) {
    const std::string llama_applied = llama_cpp_greedy(model, ids, adapter.string());
    EXPECT_NE(llama_applied, llama_cpp_greedy(model, ids)) << "the adapter should change the output";
    EXPECT_EQ(llama_merged, llama_applied) << "llama.cpp: merged model vs base + --lora";
  }
}

INSTANTIATE_TEST_SUITE_P(SharedModels, MergeLlamaCpp,
                         ::testing::Values(LlamaCase{"stories260K/stories260K.gguf", true},
                                           LlamaCase{"tinystories-656k", false}),
                         [](const ::testing::TestParamInfo<LlamaCase>& info) {
                           return std::string(info.param.gguf_adapter ? "GgufBaseLoraGguf" : "HfBasePeft");
                         });

TEST(AdapterSpec, ParsesPathAndScale) {
  EXPECT_EQ(nl::parse_adapter_spec("a.gguf").path, "a.gguf");
  EXPECT_FLOAT_EQ(nl::parse_adapter_spec("a.gguf").scale, 1.0f);
  EXPECT_EQ(nl::parse_adapter_spec("dir/a.gguf:0.25").path, "dir/a.gguf");
  EXPECT_FLOAT_EQ(nl::parse_adapter_spec("dir/a.gguf:0.25").scale, 0.25f);
  EXPECT_FLOAT_EQ(nl::parse_adapter_spec("a:-2").scale, -2.0f);
  EXPECT_EQ(nl::parse_adapter_spec("odd:name/a.gguf").path, "odd:name/a.gguf");  // a ':' in a folder name
  EXPECT_THROW(nl::parse_adapter_spec("a.gguf:"), nl::Error);
  EXPECT_THROW(nl::parse_adapter_spec("a.gguf:1x"), nl::Error);
  EXPECT_THROW(nl::parse_adapter_spec("a.gguf:inf"), nl::Error);
  EXPECT_THROW(nl::parse_adapter_spec(":0.5"), nl::Error);
}

}  // namespace
