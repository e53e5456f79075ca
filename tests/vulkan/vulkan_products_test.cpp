// The Vulkan backend's shaders against the scalar references, for every weight type the
// backend holds (F32, F16, Q8_0, Q4_0 natively; Q4_K converted to F16 at load), both
// products, and the three precision modes, on odd shapes (rows not a multiple of the 8-row
// tile, f32/f16 columns not a multiple of 32, token counts around the 32-token tile):
//  - f32:  against nl::reference_forward / reference_input_grad;
//  - f16 / int8: against the cpu engine's mode definitions (src/engine/precision_reference.h),
//    and the mode must really be applied (the result differs from the f32 product);
// plus asynchronous submission (several products in flight, waited out of order), staging
// buffers that grow, device timestamps, and the error and choice rules of make_engine.
// Every test skips with a message when this build has no Vulkan backend or the machine no
// Vulkan device (CI installs lavapipe, Mesa's software device).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../../src/engine/precision_reference.h"
#include "nightlora/engine/frozen_engine.h"
#include "nightlora/engine/reference_products.h"
#include "nightlora/quant/qtype.h"
#include "nightlora/util/error.h"
#include "vulkan_test_util.h"
#include "test_util.h"

namespace {

using nl::Precision;
using nl::QType;

using nltest::random_vec;

// A one-layer model whose 8 matrices (7 projections + head) all have one shape.
struct OneShapeModel {
  nl::Model model;
  std::vector<uint8_t> bytes;
  OneShapeModel(QType type, int64_t rows, int64_t cols, uint32_t seed) {
    const size_t rb = nl::qtype_row_bytes(type, cols);
    bytes.resize(rb * static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
      // Rows of different magnitudes: W's block scales vary along the input-gradient
      // reduction (what the int8 mode folds into dY).
      const auto row = random_vec(static_cast<size_t>(cols), seed + static_cast<uint32_t>(r),
                                  0.5f * std::ldexp(1.0f, static_cast<int>(r % 5) - 2));
      nl::quantize_row(type, row.data(), bytes.data() + rb * static_cast<size_t>(r), cols);
    }
    model.config.n_layer = 1;
    model.weights.layers.resize(1);
    nl::LayerWeights& L = model.weights.layers[0];
    for (nl::TensorView* v : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down, &model.weights.output}) {
      v->name = "w";
      v->type = type;
      v->ne = {cols, rows};
      v->data = bytes.data();
      v->nbytes = bytes.size();
    }
  }
  const nl::TensorView& W() const { return model.weights.output; }
};

struct Case {
  QType type;
  int64_t rows, cols;
};

// Shapes: rows that leave a partial 8-row group, columns that leave a partial 32-column
// block (f32/f16 only: quantized rows are whole blocks), and a few tokens counts.
const Case kCases[] = {
    {QType::F32, 37, 172}, {QType::F16, 29, 45}, {QType::Q8_0, 21, 96},
    {QType::Q4_0, 13, 160}, {QType::Q4_0, 40, 64}, {QType::Q4_K, 19, 256},
    {QType::Q8_0, 100, 64},  // int8: a whole 64-row reduction block and a partial one
};
// One token (a GEMV) and a count that leaves a partial 32-token tile; kept few: lavapipe on a
// loaded 2-core machine takes a noticeable fraction of a second per product.
const int64_t kTokens[] = {1, 37};

struct Errors {
  double max_abs = 0;     // max |got - ref|
  double ref_scale = 1;   // max(1, max |ref|)
  double rel_norm = 0;    // |got - ref| / |ref| (Frobenius)
};

Errors compare(const std::vector<float>& got, const std::vector<float>& ref) {
  Errors e;
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = static_cast<double>(got[i]) - ref[i];
    e.max_abs = std::max(e.max_abs, std::fabs(d));
    e.ref_scale = std::max(e.ref_scale, std::fabs(static_cast<double>(ref[i])));
    num += d * d;
    den += static_cast<double>(ref[i]) * ref[i];
  }
  e.rel_norm = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  return e;
}

// Bounds, relative to max(1, max |reference|):
//  f32: another summation order (32-element partial sums, GPU fused multiply-adds): float
//       rounding of sums of at most a few hundred terms.
constexpr double kF32Bound = 1e-5;
//  f16: the same f32 product (rounded differently) then one f16 rounding of each output row
//       with the row's power-of-two scale: where the two f32 results straddle an f16 rounding
//       boundary they differ by one f16 step of the row's top binade, 2^-10 of the row max.
constexpr double kF16Bound = 1.0 / 1024 + 1e-5;
//  int8: the same integers; the f32 scale arithmetic (max/127, its reciprocal) of a GPU
//       may round differently, which can move a quant by one where v/d lands within an ulp
//       of .5: one activation step (max/127 of a block) times a weight, per flip.
constexpr double kInt8Bound = 2e-3;
//  Q4_K is held as F16 (dequantized once at load): each weight carries one f16 rounding
//  (relative 2^-11), so products carry up to 2^-11 of sum |x||w| more. Its int8 mode then
//  requantizes those f16 weights (1/254 of each 32-value block's largest weight), where the
//  cpu engine's int8 definition takes Q4_K's stored quants (kernels_int8.h): measured up to
//  1.7e-2 of the reference scale apart in the input gradient.
constexpr double kConvertedBound = 2e-3;
constexpr double kConvertedInt8Bound = 3e-2;

void check_case(nl::FrozenEngine& e, const OneShapeModel& m, const Case& c, int64_t T, Precision p,
                bool input_grad) {
  const int64_t in_len = input_grad ? c.rows : c.cols, out_len = input_grad ? c.cols : c.rows;
  const auto in = random_vec(static_cast<size_t>(T * in_len), static_cast<uint32_t>(1000 + T + in_len));
  std::vector<float> got(static_cast<size_t>(T * out_len), -7.0f), ref(got.size()), f32(got.size());
  const nl::WeightHandle h = e.output_handle();
  if (input_grad) {
    e.input_grad(h, in.data(), T, got.data(), p);
    nl::engine::reference_input_grad_precision(m.W(), in.data(), T, ref.data(), p);
    nl::reference_input_grad(m.W(), in.data(), T, f32.data());
  } else {
    e.forward(h, in.data(), T, got.data(), p);
    nl::engine::reference_forward_precision(m.W(), in.data(), T, ref.data(), p);
    nl::reference_forward(m.W(), in.data(), T, f32.data());
  }
  const bool converted = c.type == QType::Q4_K;
  double bound = p == Precision::F32 ? kF32Bound : p == Precision::F16 ? kF16Bound : kInt8Bound;
  if (converted) bound = p == Precision::Int8 ? kConvertedInt8Bound : bound + kConvertedBound;
  const Errors err = compare(got, ref);
  const std::string what = std::string(nl::qtype_name(c.type)) + " " + std::to_string(c.rows) + "x" +
                           std::to_string(c.cols) + " T=" + std::to_string(T) + " " + nl::precision_name(p) +
                           (input_grad ? " input_grad" : " forward");
  EXPECT_LE(err.max_abs, bound * err.ref_scale) << what << ": max |vulkan - reference| = " << err.max_abs
                                                << " (reference scale " << err.ref_scale << ")";
  // The mode is applied, not replaced by f32: f16 and int8 results differ from the f32 product.
  if (p != Precision::F32 && T * out_len >= 16) {
    const Errors vs_f32 = compare(got, f32);
    EXPECT_GT(vs_f32.rel_norm, 1e-5) << what << ": identical to the f32 product";
  }
}

class VulkanProductsByType : public ::testing::TestWithParam<Case> {};

TEST_P(VulkanProductsByType, EveryProductAndModeMatchesTheReference) {
  const Case c = GetParam();
  OneShapeModel m(c.type, c.rows, c.cols, static_cast<uint32_t>(c.rows * 31 + c.cols));
  NL_VULKAN_ENGINE_OR_SKIP(e, m.model);
  for (Precision p : {Precision::F32, Precision::F16, Precision::Int8})
    for (int64_t T : kTokens)
      for (bool input_grad : {false, true}) check_case(*e, m, c, T, p, input_grad);
}

INSTANTIATE_TEST_SUITE_P(Types, VulkanProductsByType, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(nl::qtype_name(info.param.type)) + "_" +
                                  std::to_string(info.param.rows) + "x" + std::to_string(info.param.cols);
                         });

// Several products in flight at once (more than the slot ring holds), waited for only at the
// end and out of order: each result is its own product's.
TEST(VulkanProducts, AsynchronousSubmissionKeepsEachResult) {
  OneShapeModel m(QType::Q4_0, 24, 64, 5);
  NL_VULKAN_ENGINE_OR_SKIP(e, m.model);
  const nl::WeightHandle h = e->output_handle();
  const int kProducts = 15;
  std::vector<std::vector<float>> in, out;
  std::vector<nl::EngineTicket> tickets;
  for (int i = 0; i < kProducts; ++i) {
    const bool grad = i % 3 == 2;
    const int64_t T = 1 + i * 5;
    in.push_back(random_vec(static_cast<size_t>(T * (grad ? 24 : 64)), static_cast<uint32_t>(i)));
    out.emplace_back(static_cast<size_t>(T * (grad ? 64 : 24)), 0.0f);
    tickets.push_back(grad ? e->submit_input_grad(h, in.back().data(), T, out.back().data())
                           : e->submit_forward(h, in.back().data(), T, out.back().data()));
  }
  for (size_t i = 1; i < tickets.size(); ++i) EXPECT_GT(tickets[i], tickets[i - 1]);
  e->wait(tickets[7]);
  e->wait(tickets[3]);  // already done: returns at once
  e->wait(tickets.back());
  for (int i = 0; i < kProducts; ++i) {
    const bool grad = i % 3 == 2;
    const int64_t T = 1 + i * 5;
    std::vector<float> ref(out[static_cast<size_t>(i)].size());
    if (grad)
      nl::reference_input_grad(m.W(), in[static_cast<size_t>(i)].data(), T, ref.data());
    else
      nl::reference_forward(m.W(), in[static_cast<size_t>(i)].data(), T, ref.data());
    const Errors err = compare(out[static_cast<size_t>(i)], ref);
    EXPECT_LE(err.max_abs, kF32Bound * err.ref_scale) << "product " << i;
  }
  const nl::EngineDeviceTime dt = e->device_time();
  EXPECT_EQ(dt.products, kProducts);
  if (dt.measured) {
    EXPECT_GT(dt.forward_s, 0.0);
    EXPECT_GT(dt.input_grad_s, 0.0);
  }
  std::printf("[vulkan] %s: %lld products, device time forward %.3f ms, input grad %.3f ms%s\n", e->isa().c_str(),
              static_cast<long long>(dt.products), dt.forward_s * 1e3, dt.input_grad_s * 1e3,
              dt.measured ? "" : " (no timestamps on this queue)");
}

// reserve_forward / reserve_input_grad grow every slot's buffers ahead of a step (waiting
// for products in flight first); products within and beyond the reserved size stay right.
TEST(VulkanProducts, ReservedBuffersServeProducts) {
  OneShapeModel m(QType::Q4_0, 40, 64, 6);
  NL_VULKAN_ENGINE_OR_SKIP(e, m.model);
  const nl::WeightHandle h = e->output_handle();
  const auto x = random_vec(40 * 64, 21);
  std::vector<float> y(40 * 40), ref(y.size());
  const nl::EngineTicket t = e->submit_forward(h, x.data(), 3, y.data());  // in flight during reserve
  e->reserve_forward(h, 20, Precision::F16);
  e->reserve_input_grad(h, 20, Precision::Int8);
  e->wait(t);
  nl::reference_forward(m.W(), x.data(), 3, ref.data());
  y.resize(3 * 40);
  ref.resize(3 * 40);
  const Errors first = compare(y, ref);
  EXPECT_LE(first.max_abs, kF32Bound * first.ref_scale);
  y.resize(40 * 40);
  for (int64_t T : {int64_t{20}, int64_t{40}}) {  // the reserved size, then more
    e->forward(h, x.data(), T, y.data(), Precision::F16);
    std::vector<float> r(static_cast<size_t>(T * 40));
    nl::engine::reference_forward_precision(m.W(), x.data(), T, r.data(), Precision::F16);
    const Errors err = compare(std::vector<float>(y.begin(), y.begin() + T * 40), r);
    EXPECT_LE(err.max_abs, kF16Bound * err.ref_scale) << "T=" << T;
  }
}

// A zero-token product is a no-op that still gets a ticket; the engine's resident bytes are
// the device layout's (the quantized bytes plus at most the padding of one row group).
TEST(VulkanProducts, ZeroTokensAndResidentBytes) {
  OneShapeModel m(QType::Q8_0, 16, 64, 9);
  NL_VULKAN_ENGINE_OR_SKIP(e, m.model);
  std::vector<float> out(16, 3.0f);
  const nl::EngineTicket t = e->submit_forward(e->output_handle(), nullptr, 0, out.data());
  e->wait(t);
  EXPECT_EQ(out[0], 3.0f);
  EXPECT_EQ(e->backend(), "vulkan");
  EXPECT_EQ(e->rows(e->handle(0, nl::Proj::Down)), 16);
  EXPECT_EQ(e->cols(e->handle(0, nl::Proj::Down)), 64);
  // 8 matrices of 16 x 64 Q8_0: 16 rows x 2 blocks x 34 bytes each; tiles add nothing here.
  EXPECT_EQ(e->resident_weight_bytes(), size_t{8} * 16 * 2 * 34);
  EXPECT_THROW(e->submit_forward(99, nullptr, 0, out.data()), nl::Error);
}

// The bytes uploaded to the device, per weight type, are the model's quantized bytes plus
// only the layout's padding: Q4_0 / Q8_0 tiles pad the last 8-row group with zero rows, F16
// holds two halves per 32-bit word (an odd element count pads one half), F32 is as it is;
// a type converted at load (Q4_K) is held as F16, two bytes a weight. No f32 copy of an f16
// or quantized matrix exists on the device.
TEST(VulkanProducts, ResidentBytesPerTypeAreTheQuantizedBytes) {
  struct Expect {
    Case shape;
    size_t bytes;  // one matrix on the device
  };
  const Expect expects[] = {
      {{QType::F32, 37, 172}, size_t{37} * 172 * 4},
      {{QType::F16, 29, 45}, size_t{29} * 45 * 2 + 2},           // 1305 halves: one pad half
      {{QType::F16, 16, 64}, size_t{16} * 64 * 2},
      {{QType::Q8_0, 21, 96}, size_t{24} * 3 * 34},              // rows 21..23: zero padding
      {{QType::Q8_0, 16, 64}, size_t{16} * 2 * 34},
      {{QType::Q4_0, 13, 160}, size_t{16} * 5 * 18},             // rows 13..15: zero padding
      {{QType::Q4_0, 40, 64}, size_t{40} * 2 * 18},
      {{QType::Q4_K, 19, 256}, size_t{19} * 256 * 2},            // converted: f16 rows
  };
  for (const Expect& x : expects) {
    const Case& c = x.shape;
    OneShapeModel m(c.type, c.rows, c.cols, 11);
    NL_VULKAN_ENGINE_OR_SKIP(e, m.model);
    const std::string what = std::string(nl::qtype_name(c.type)) + " " + std::to_string(c.rows) + "x" +
                             std::to_string(c.cols);
    const size_t file_bytes = nl::qtype_row_bytes(c.type, c.cols) * static_cast<size_t>(c.rows);
    // 8 matrices: 7 projections and the head.
    EXPECT_EQ(e->resident_weight_bytes(), 8 * x.bytes) << what << " (file: " << file_bytes << " bytes a matrix)";
    if (c.type != QType::Q4_K) {
      // Padding is at most one 8-row group of tiles, or one half.
      EXPECT_GE(x.bytes, file_bytes) << what;
      EXPECT_LE(x.bytes, file_bytes + std::max<size_t>(2, 7 * nl::qtype_row_bytes(c.type, c.cols))) << what;
    }
  }
}

TEST(VulkanProducts, ChoiceOfBackend) {
  OneShapeModel m(QType::F32, 8, 32, 3);
  nl::EngineOptions o;
  o.backend = "auto";
  auto e = nl::make_engine(m.model, o);
  // auto never picks a software Vulkan device: cpu unless a GPU is present.
  if (e->backend() == "vulkan") {
    EXPECT_EQ(e->isa().find("(cpu)"), std::string::npos) << e->isa();
  } else {
    EXPECT_EQ(e->backend(), "cpu");
  }
  o.backend = "metal";
  try {
    nl::make_engine(m.model, o);
    ADD_FAILURE() << "an unknown backend was accepted";
  } catch (const nl::Error& err) {
    EXPECT_NE(std::string(err.what()).find("auto, cpu, vulkan"), std::string::npos) << err.what();
  }
#ifndef NL_HAVE_VULKAN
  o.backend = "vulkan";
  try {
    nl::make_engine(m.model, o);
    ADD_FAILURE() << "a build without Vulkan made a vulkan engine";
  } catch (const nl::Error& err) {
    EXPECT_NE(std::string(err.what()).find("this build has no Vulkan backend"), std::string::npos) << err.what();
  }
#endif
}

// NL_VULKAN_DEVICE must name a device; a bad index is a clear error listing the devices.
TEST(VulkanProducts, DeviceOverrideIsChecked) {
  OneShapeModel m(QType::F32, 8, 32, 4);
  {
    NL_VULKAN_ENGINE_OR_SKIP(probe, m.model);
  }
  ScopedEnv env("NL_VULKAN_DEVICE", "99");
  nl::EngineOptions o;
  o.backend = "vulkan";
  try {
    nl::make_engine(m.model, o);
    ADD_FAILURE() << "NL_VULKAN_DEVICE=99 was accepted";
  } catch (const nl::Error& err) {
    EXPECT_NE(std::string(err.what()).find("NL_VULKAN_DEVICE"), std::string::npos) << err.what();
    EXPECT_NE(std::string(err.what()).find("devices: 0:"), std::string::npos) << err.what();
  }
  ScopedEnv env0("NL_VULKAN_DEVICE", "0");
  EXPECT_NO_THROW(nl::make_engine(m.model, o));
}

}  // namespace
