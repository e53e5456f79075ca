// quantize_gguf and `nightlora quantize`, end to end: on a tiny GGUF written here (runs
// without shared data) and on the real stories260K model. The output is re-read and its
// dequantized weights compared with the originals.
#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "nightlora/modelio/gguf.h"
#include "nightlora/modelio/quantize_model.h"
#include "nightlora/modelio/synth.h"
#include "nightlora/util/error.h"
#include "nightlora/util/half.h"
#include "gguf_peer.h"
#include "test_util.h"

using namespace nltest;
using nl::QType;

namespace {

std::vector<float> gaussian(size_t n, uint32_t seed, float sigma) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, sigma);
  std::vector<float> v(n);
  for (float& x : v) x = g(rng);
  return v;
}

// A small model-like file: matrices whose rows fit K-quant blocks (256), only 32-element
// blocks (96), neither (40); an f16 matrix; 1-D norms; a 3-D tensor; varied metadata.
struct TinyModel {
  std::vector<float> attn_q = gaussian(256 * 8, 1, 0.02f);
  std::vector<float> ffn_down = gaussian(96 * 4, 2, 0.05f);
  std::vector<float> odd = gaussian(40 * 3, 3, 0.1f);
  std::vector<float> embd = gaussian(256 * 16, 4, 1.0f);
  std::vector<uint16_t> embd_f16;
  std::vector<float> norm = gaussian(256, 5, 1.0f);
  std::vector<float> cube = gaussian(32 * 2 * 2, 6, 1.0f);

  void write(const std::string& path) {
    for (float& v : embd) v = nl::fp16_to_f32(nl::f32_to_fp16(v));  // exactly representable in f16
    for (float v : embd) embd_f16.push_back(nl::f32_to_fp16(v));
    nl::GgufWriter w;
    w.set("general.architecture", nl::GgufValue::str("llama"));
    w.set("general.name", nl::GgufValue::str("tiny quantize test"));
    w.set("general.file_type", nl::GgufValue::u32(0));
    w.set("llama.block_count", nl::GgufValue::u32(1));
    w.set("llama.rope.freq_base", nl::GgufValue::f32(10000.0f));
    w.set("tokenizer.ggml.tokens", nl::GgufValue::str_array({"<unk>", "<s>", "</s>", "hello"}));
    w.set("tokenizer.ggml.scores", nl::GgufValue::f32_array({0.0f, -1.5f, 2.25f, 3.0f}));
    w.add_tensor_data("token_embd.weight", QType::F16, {256, 16}, embd_f16.data());
    w.add_tensor_data("blk.0.attn_norm.weight", QType::F32, {256}, norm.data());
    w.add_tensor_data("blk.0.attn_q.weight", QType::F32, {256, 8}, attn_q.data());
    w.add_tensor_data("blk.0.ffn_down.weight", QType::F32, {96, 4}, ffn_down.data());
    w.add_tensor_data("blk.0.odd.weight", QType::F32, {40, 3}, odd.data());
    w.add_tensor_data("blk.0.cube.weight", QType::F32, {32, 2, 2}, cube.data());
    w.write(path);
  }
};

std::vector<float> dequantize_tensor(const nl::GgufTensorInfo& t) {
  const int64_t cols = t.ne[0], rows = t.n_elements() / cols;
  const size_t row_bytes = nl::qtype_row_bytes(t.type, cols);
  std::vector<float> out(static_cast<size_t>(t.n_elements()));
  for (int64_t r = 0; r < rows; ++r)
    nl::dequantize_row(t.type, t.data + r * row_bytes, out.data() + r * cols, cols);
  return out;
}

// RMS(quantized - original) / RMS(original).
double relative_rms_error(const std::vector<float>& got, const std::vector<float>& want) {
  double e = 0, s = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    e += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
    s += static_cast<double>(want[i]) * want[i];
  }
  return s > 0 ? std::sqrt(e / s) : std::sqrt(e);
}

// The error a type may add to Gaussian-like weights, relative to their RMS: ~ step /
// sqrt(12) with step ~ (range of a block ~ 4-5 sigma) / levels, with ~1.5x headroom for
// outliers and scale rounding.
double allowed_relative_error(QType t) {
  switch (t) {
    case QType::F32: return 0;
    case QType::F16: return 1e-3;
    case QType::BF16: return 8e-3;
    case QType::Q8_0: return 0.012;
    case QType::Q6_K: return 0.04;
    case QType::Q5_0: case QType::Q5_1: case QType::Q5_K: return 0.08;
    case QType::Q4_0: case QType::Q4_1: case QType::Q4_K: return 0.16;
    default: return 0;
  }
}

std::string value_text(const nl::GgufValue& v) { return std::string(nl::gguf_type_name(v.type)) + ":" + v.to_string(100000); }

// Every metadata key of `in` except general.file_type is in `out` with the same value, in
// the same order, and general.file_type is `file_type` (appended when `in` has none).
void expect_metadata_copied(const nl::GgufFile& in, const nl::GgufFile& out, uint32_t file_type) {
  ASSERT_EQ(in.metadata().size() + (in.has("general.file_type") ? 0 : 1), out.metadata().size());
  for (size_t i = 0; i < in.metadata().size(); ++i) {
    const auto& [key, value] = in.metadata()[i];
    EXPECT_EQ(out.metadata()[i].first, key);
    if (key == "general.file_type") continue;
    EXPECT_EQ(value_text(out.metadata()[i].second), value_text(value)) << key;
  }
  EXPECT_EQ(out.get_uint("general.file_type"), file_type);
}

// Compares every tensor of `out` with `in`: same names, shapes and order; matrices within
// the error their type allows; everything else byte-identical.
void expect_close_to_original(const nl::GgufFile& in, const nl::GgufFile& out, const nl::QuantizeSummary* s = nullptr) {
  ASSERT_EQ(in.tensors().size(), out.tensors().size());
  for (size_t i = 0; i < in.tensors().size(); ++i) {
    const auto& a = in.tensors()[i];
    const auto& b = out.tensors()[i];
    ASSERT_EQ(a.name, b.name);
    ASSERT_EQ(a.ne, b.ne) << a.name;
    if (s) {
      EXPECT_EQ(s->tensors[i].to, b.type) << a.name;
      EXPECT_EQ(s->tensors[i].bytes_out, b.nbytes) << a.name;
    }
    if (a.type == b.type) {
      ASSERT_EQ(a.nbytes, b.nbytes);
      EXPECT_EQ(std::memcmp(a.data, b.data, a.nbytes), 0) << a.name << " should be copied unchanged";
      continue;
    }
    const double err = relative_rms_error(dequantize_tensor(b), dequantize_tensor(a));
    EXPECT_LE(err, allowed_relative_error(b.type)) << a.name << " as " << nl::qtype_name(b.type);
    if (b.type != QType::F16 && b.type != QType::BF16 && b.type != QType::F32) {
      EXPECT_GT(err, 1e-4) << a.name << ": a quantized tensor identical to the original is suspicious";
    }
  }
}

const nl::TensorQuantResult& result_for(const nl::QuantizeSummary& s, const std::string& name) {
  for (const auto& t : s.tensors)
    if (t.name == name) return t;
  throw std::runtime_error("no tensor " + name + " in the summary");
}

}  // namespace

TEST(QuantizeModel, FileTypesAreLlamaCppValues) {
  EXPECT_EQ(nl::llama_ftype_for(QType::F32), 0u);
  EXPECT_EQ(nl::llama_ftype_for(QType::F16), 1u);
  EXPECT_EQ(nl::llama_ftype_for(QType::Q4_0), 2u);
  EXPECT_EQ(nl::llama_ftype_for(QType::Q4_1), 3u);
  EXPECT_EQ(nl::llama_ftype_for(QType::Q8_0), 7u);
  EXPECT_EQ(nl::llama_ftype_for(QType::Q5_0), 8u);
  EXPECT_EQ(nl::llama_ftype_for(QType::Q5_1), 9u);
  EXPECT_EQ(nl::llama_ftype_for(QType::Q4_K), 14u);  // Q4_K_S: all matrices Q4_K
  EXPECT_EQ(nl::llama_ftype_for(QType::Q5_K), 16u);  // Q5_K_S
  EXPECT_EQ(nl::llama_ftype_for(QType::Q6_K), 18u);
  EXPECT_EQ(nl::llama_ftype_for(QType::BF16), 32u);
  EXPECT_THROW(nl::llama_ftype_for(QType::Q2_K), nl::Error);
}

TEST(QuantizeModel, FallbackTypesFollowLlamaCpp) {
  std::string why;
  EXPECT_EQ(nl::matrix_type_for(QType::Q4_K, 4096, &why), QType::Q4_K);
  EXPECT_TRUE(why.empty());
  EXPECT_EQ(nl::matrix_type_for(QType::Q4_K, 96, &why), QType::Q5_0);
  EXPECT_NE(why.find("96"), std::string::npos) << why;
  EXPECT_NE(why.find("q5_0"), std::string::npos) << why;
  EXPECT_EQ(nl::matrix_type_for(QType::Q5_K, 64), QType::Q5_1);
  EXPECT_EQ(nl::matrix_type_for(QType::Q6_K, 64), QType::Q8_0);
  EXPECT_EQ(nl::matrix_type_for(QType::Q4_K, 172), QType::F16);  // stories260K's FFN width
  EXPECT_EQ(nl::matrix_type_for(QType::Q8_0, 172, &why), QType::F16);
  EXPECT_NE(why.find("f16"), std::string::npos) << why;
  EXPECT_EQ(nl::matrix_type_for(QType::F16, 172), QType::F16);
  EXPECT_EQ(nl::matrix_type_for(QType::BF16, 7), QType::BF16);
}

TEST(QuantizeModel, WhichTensorsAreMatrices) {
  EXPECT_TRUE(nl::is_quantizable_matrix("blk.0.attn_q.weight", {64, 64}));
  EXPECT_FALSE(nl::is_quantizable_matrix("blk.0.attn_norm.weight", {64}));
  EXPECT_FALSE(nl::is_quantizable_matrix("blk.0.attn_q.bias", {64, 64}));
  EXPECT_FALSE(nl::is_quantizable_matrix("blk.0.cube.weight", {8, 8, 8}));
}

TEST(QuantizeModel, TinyModelEveryTypeRoundTrips) {
  TempDir dir;
  TinyModel m;
  const std::string in_path = (dir / "tiny.gguf").string();
  m.write(in_path);
  auto in = nl::GgufFile::open(in_path);
  for (const char* name : {"q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q4_K", "q5_K", "q6_K", "f16", "bf16", "f32"}) {
    SCOPED_TRACE(name);
    const QType type = nl::parse_qtype(name);
    const std::string out_path = (dir / (std::string("tiny-") + name + ".gguf")).string();
    const nl::QuantizeSummary s = nl::quantize_gguf(in_path, out_path, type);
    auto out = nl::GgufFile::open(out_path);
    expect_metadata_copied(*in, *out, nl::llama_ftype_for(type));
    expect_close_to_original(*in, *out, &s);
    EXPECT_FALSE(std::filesystem::exists(out_path + ".tmp"));
    // Norms and 3-D tensors are never converted.
    EXPECT_EQ(result_for(s, "blk.0.attn_norm.weight").to, QType::F32);
    EXPECT_FALSE(result_for(s, "blk.0.attn_norm.weight").converted);
    EXPECT_EQ(result_for(s, "blk.0.cube.weight").to, QType::F32);
    EXPECT_EQ(result_for(s, "blk.0.attn_q.weight").to, type);
    EXPECT_EQ(s.file_bytes_out, out->file_size());
    EXPECT_EQ(s.file_bytes_in, in->file_size());
  }
}

TEST(QuantizeModel, TinyModelQ4KFallsBackPerTensorAndSaysWhy) {
  TempDir dir;
  TinyModel m;
  const std::string in_path = (dir / "tiny.gguf").string(), out_path = (dir / "q4k.gguf").string();
  m.write(in_path);
  const nl::QuantizeSummary s = nl::quantize_gguf(in_path, out_path, QType::Q4_K);
  EXPECT_EQ(s.file_type, 14u);
  EXPECT_EQ(result_for(s, "blk.0.attn_q.weight").to, QType::Q4_K);
  EXPECT_TRUE(result_for(s, "blk.0.attn_q.weight").fallback.empty());
  EXPECT_EQ(result_for(s, "token_embd.weight").to, QType::Q4_K);  // from f16
  EXPECT_EQ(result_for(s, "blk.0.ffn_down.weight").to, QType::Q5_0);
  EXPECT_EQ(result_for(s, "blk.0.odd.weight").to, QType::F16);
  EXPECT_FALSE(result_for(s, "blk.0.odd.weight").fallback.empty());
  EXPECT_EQ(s.n_fallback, 2);
  EXPECT_EQ(s.n_converted, 4);
  const std::string report = nl::format_quantize_summary(s);
  EXPECT_NE(report.find("blk.0.ffn_down.weight: rows of 96 elements"), std::string::npos) << report;
  EXPECT_NE(report.find("using f16"), std::string::npos) << report;
  // 256x8 f32 (8192 bytes) -> 8 rows of one 144-byte block.
  EXPECT_EQ(result_for(s, "blk.0.attn_q.weight").bytes_out, 8u * 144);
  EXPECT_LT(s.bytes_out, s.bytes_in);
  // Someone else's parser (@huggingface/gguf) reads the same metadata and tensor infos.
  if (!expect_gguf_matches_peer(out_path)) GTEST_SKIP() << "node or tools/js/node_modules missing: peer check skipped";
}

TEST(QuantizeModel, MixTargetsParseAndHaveLlamaCppFileTypes) {
  const nl::QuantTarget m = nl::parse_quant_target("q4_K_M");
  EXPECT_EQ(m.type, QType::Q4_K);
  EXPECT_TRUE(m.medium);
  EXPECT_EQ(nl::quant_target_name(m), "q4_K_M");
  EXPECT_TRUE(nl::parse_quant_target("q5_k_m").medium);
  EXPECT_FALSE(nl::parse_quant_target("q4_K").medium);
  EXPECT_EQ(nl::llama_ftype_for(m), 15u);                            // LLAMA_FTYPE_MOSTLY_Q4_K_M
  EXPECT_EQ(nl::llama_ftype_for(nl::QuantTarget{QType::Q5_K, true}), 17u);  // Q5_K_M
  EXPECT_EQ(nl::llama_ftype_for(QType::Q4_K), 14u);
  try {
    nl::parse_quant_target("q6_K_M");
    FAIL() << "q6_K_M is no llama.cpp mix";
  } catch (const nl::Error& e) {
    EXPECT_NE(std::string(e.what()).find("q4_K_M"), std::string::npos) << e.what();
  }
  // llama.cpp's use_more_bits over 16 layers: the first and last eighth, every third between.
  std::vector<int> more;
  for (int i = 0; i < 16; ++i)
    if (nl::use_more_bits(i, 16)) more.push_back(i);
  EXPECT_EQ(more, (std::vector<int>{0, 1, 4, 7, 10, 13, 14, 15}));
}

// q4_K_M as llama.cpp's quantizer makes it, per tensor, on a 16-layer llama whose widths are
// whole super-blocks (a separate head) and on a qwen2 with a tied head and 64-wide rows;
// `synth-model -t q4_K_M` writes the same types as quantizing its f16 file.
TEST(QuantizeModel, Q4KMGivesLlamaCppsMixPerTensor) {
  TempDir dir;
  for (const char* preset : {"tiny-llama-k", "tiny-qwen2"}) {
    SCOPED_TRACE(preset);
    const bool llama = std::string(preset) == "tiny-llama-k";
    nl::SynthOptions so;
    so.preset = preset;
    so.layers = llama ? 16 : 2;
    so.tokenizer = "generated";
    const std::string f16 = (dir / (std::string(preset) + "-f16.gguf")).string();
    const std::string mixed = (dir / (std::string(preset) + "-q4km.gguf")).string();
    nl::synth_model(f16, so);
    const nl::QuantizeSummary s = nl::quantize_gguf(f16, mixed, nl::parse_quant_target("q4_K_M"));
    EXPECT_EQ(s.file_type, 15u);
    so.type = nl::parse_quant_target("q4_K_M");
    const std::string synth = (dir / (std::string(preset) + "-synth.gguf")).string();
    nl::synth_model(synth, so);
    auto written = nl::GgufFile::open(synth);
    EXPECT_EQ(written->get_uint("general.file_type"), 15u);
    for (const nl::TensorQuantResult& r : s.tensors) {
      if (r.ne.size() != 2) continue;
      EXPECT_EQ(written->find_tensor(r.name)->type, r.to) << r.name << ": synth-model and quantize agree";
    }
    if (llama) {
      for (int i = 0; i < 16; ++i) {
        const std::string blk = "blk." + std::to_string(i) + ".";
        const QType more = nl::use_more_bits(i, 16) ? QType::Q6_K : QType::Q4_K;
        EXPECT_EQ(result_for(s, blk + "attn_v.weight").to, more) << i;
        EXPECT_EQ(result_for(s, blk + "ffn_down.weight").to, more) << i;
        EXPECT_EQ(result_for(s, blk + "attn_q.weight").to, QType::Q4_K) << i;
        EXPECT_EQ(result_for(s, blk + "ffn_up.weight").to, QType::Q4_K) << i;
      }
      EXPECT_EQ(result_for(s, "output.weight").to, QType::Q6_K);
      EXPECT_EQ(result_for(s, "token_embd.weight").to, QType::Q4_K);
      EXPECT_EQ(s.n_fallback, 0);
    } else {
      // 64-wide rows: the tied head wants q6_K, gets q8_0 (llama.cpp's rule for the head);
      // the others' q4_K and q6_K fall back to q5_0 and q8_0.
      EXPECT_EQ(result_for(s, "token_embd.weight").to, QType::Q8_0);
      EXPECT_EQ(result_for(s, "blk.0.attn_q.weight").to, QType::Q5_0);
      EXPECT_EQ(result_for(s, "blk.0.attn_v.weight").to, QType::Q5_0);    // of 2 layers only the last gets more bits
      EXPECT_EQ(result_for(s, "blk.1.attn_v.weight").to, QType::Q8_0);    // q6_K wanted
      EXPECT_EQ(result_for(s, "blk.1.ffn_down.weight").to, QType::Q8_0);  // 128 wide, q6_K wanted
      EXPECT_EQ(result_for(s, "blk.1.ffn_up.weight").to, QType::Q5_0);
    }
    if (!expect_gguf_matches_peer(mixed)) GTEST_SKIP() << "node or tools/js/node_modules missing: peer check skipped";
  }
}

TEST(QuantizeModel, NonFiniteWeightsAreAnErrorAndLeaveNoFile) {
  TempDir dir;
  TinyModel m;
  m.attn_q[300] = std::nanf("");
  m.attn_q[256 * 6 + 10] = INFINITY;  // a later row: the first bad value is the one reported
  const std::string in_path = (dir / "nan.gguf").string(), out_path = (dir / "out.gguf").string();
  m.write(in_path);
  try {
    nl::quantize_gguf(in_path, out_path, QType::Q8_0, 3);
    FAIL() << "expected an error";
  } catch (const nl::Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("blk.0.attn_q.weight"), std::string::npos) << msg;
    EXPECT_NE(msg.find("row 1, column 44"), std::string::npos) << msg;
    EXPECT_NE(msg.find(in_path), std::string::npos) << msg;
  }
  EXPECT_FALSE(std::filesystem::exists(out_path));
  EXPECT_FALSE(std::filesystem::exists(out_path + ".tmp"));
}

TEST(QuantizeModel, OutputDoesNotDependOnThreadCount) {
  TempDir dir;
  TinyModel m;
  const std::string in_path = (dir / "tiny.gguf").string();
  m.write(in_path);
  for (QType t : {QType::Q4_K, QType::Q8_0}) {
    nl::quantize_gguf(in_path, (dir / "one.gguf").string(), t, 1);
    nl::quantize_gguf(in_path, (dir / "three.gguf").string(), t, 3);
    EXPECT_EQ(read_text(dir / "one.gguf"), read_text(dir / "three.gguf")) << nl::qtype_name(t);
  }
}

TEST(QuantizeModel, UnsupportedTargetTypeIsAnError) {
  TempDir dir;
  TinyModel m;
  const std::string in_path = (dir / "tiny.gguf").string();
  m.write(in_path);
  EXPECT_THROW(nl::quantize_gguf(in_path, (dir / "o.gguf").string(), QType::Q2_K), nl::Error);
  EXPECT_FALSE(std::filesystem::exists(dir / "o.gguf"));
}

TEST(QuantizeCli, TinyModelEndToEnd) {
  TempDir dir;
  TinyModel m;
  const std::string in_path = (dir / "tiny.gguf").string(), out_path = (dir / "out.gguf").string();
  m.write(in_path);
  CmdResult r = run_cli("quantize " + shq(in_path) + " " + shq(out_path) + " --type q6_K --threads 2");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("blk.0.attn_q.weight"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("f32 -> q6_K"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rows of 96 elements"), std::string::npos) << r.out;  // q6_K -> q8_0
  EXPECT_NE(r.out.find("general.file_type = 18"), std::string::npos) << r.out;
  auto in = nl::GgufFile::open(in_path);
  auto out = nl::GgufFile::open(out_path);
  EXPECT_EQ(out->find_tensor("blk.0.attn_q.weight")->type, QType::Q6_K);
  EXPECT_EQ(out->find_tensor("blk.0.ffn_down.weight")->type, QType::Q8_0);
  expect_metadata_copied(*in, *out, 18);
  expect_close_to_original(*in, *out);

  // --quiet drops the per-tensor lines but keeps the fallbacks and totals.
  CmdResult q = run_cli("quantize -q " + shq(in_path) + " " + shq(out_path) + " -t Q4_0");
  ASSERT_EQ(q.rc, 0) << q.err;
  EXPECT_EQ(q.out.find("f32 -> q4_0"), std::string::npos) << q.out;
  EXPECT_NE(q.out.find("blk.0.odd.weight: rows of 40"), std::string::npos) << q.out;
}

TEST(QuantizeCli, BadInputsGiveClearErrorsAndNoOutput) {
  TempDir dir;
  TinyModel m;
  const std::string in_path = (dir / "tiny.gguf").string(), out_path = (dir / "out.gguf").string();
  m.write(in_path);

  CmdResult bad_type = run_cli("quantize " + shq(in_path) + " " + shq(out_path) + " --type q9_9");
  EXPECT_NE(bad_type.rc, 0);
  EXPECT_NE(bad_type.err.find("q9_9"), std::string::npos) << bad_type.err;
  EXPECT_NE(bad_type.err.find("use one of"), std::string::npos) << bad_type.err;

  CmdResult missing = run_cli("quantize " + shq((dir / "nope.gguf").string()) + " " + shq(out_path) + " --type q8_0");
  EXPECT_NE(missing.rc, 0);
  EXPECT_NE(missing.err.find("nope.gguf"), std::string::npos) << missing.err;

  // A truncated model: the reader names the problem; nothing is written.
  const std::string whole = read_text(in_path);
  const std::string cut_path = (dir / "cut.gguf").string();
  write_text(cut_path, whole.substr(0, whole.size() / 2));
  CmdResult cut = run_cli("quantize " + shq(cut_path) + " " + shq(out_path) + " --type q8_0");
  EXPECT_NE(cut.rc, 0);
  EXPECT_NE(cut.err.find("cut.gguf"), std::string::npos) << cut.err;

  CmdResult no_type = run_cli("quantize " + shq(in_path) + " " + shq(out_path));
  EXPECT_NE(no_type.rc, 0);

  EXPECT_FALSE(std::filesystem::exists(out_path));
  EXPECT_FALSE(std::filesystem::exists(out_path + ".tmp"));

  // An unwritable destination fails cleanly too.
  CmdResult unwritable = run_cli("quantize " + shq(in_path) + " " + shq((dir / "no/such/dir/o.gguf").string()) + " -t q8_0");
  EXPECT_NE(unwritable.rc, 0);
  EXPECT_NE(unwritable.err.find("no/such/dir"), std::string::npos) << unwritable.err;
}

TEST(QuantizeCli, Stories260K) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", model);
  TempDir dir;
  auto in = nl::GgufFile::open(model.string());
  for (const char* type : {"q8_0", "q4_K"}) {
    SCOPED_TRACE(type);
    const std::string out_path = (dir / (std::string("s-") + type + ".gguf")).string();
    CmdResult r = run_cli("quantize " + shq(model.string()) + " " + shq(out_path) + " --type " + type);
    ASSERT_EQ(r.rc, 0) << r.err;
    auto out = nl::GgufFile::open(out_path);
    expect_metadata_copied(*in, *out, nl::llama_ftype_for(nl::parse_qtype(type)));
    expect_close_to_original(*in, *out);
    // Dim 64 fits q8_0 but not K-quant blocks (q4_K -> q5_0); the FFN width 172 fits
    // neither (-> f16). Both fallbacks are reported.
    const auto* q = out->find_tensor("blk.0.attn_q.weight");
    const auto* down = out->find_tensor("blk.0.ffn_down.weight");
    ASSERT_NE(q, nullptr);
    ASSERT_NE(down, nullptr);
    EXPECT_EQ(down->ne[0], 172);
    EXPECT_EQ(down->type, QType::F16);
    EXPECT_NE(r.out.find("blk.0.ffn_down.weight: rows of 172 elements"), std::string::npos) << r.out;
    if (std::string(type) == "q8_0") {
      EXPECT_EQ(q->type, QType::Q8_0);
    } else {
      EXPECT_EQ(q->type, QType::Q5_0);
      EXPECT_NE(r.out.find("blk.0.attn_q.weight: rows of 64 elements"), std::string::npos) << r.out;
    }
    EXPECT_EQ(out->find_tensor("blk.0.attn_norm.weight")->type, QType::F32);
    EXPECT_LT(out->file_size(), in->file_size());
    expect_gguf_matches_peer(out_path);  // no-op (logged) without node
  }
}
