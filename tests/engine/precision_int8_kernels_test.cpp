// The int8 kernel sets (src/engine/kernels_int8.h) against the scalar set, piece by piece:
// the activation quantizer, the panel packers from Q4_0/Q8_0 tiles, and the forward and
// input-gradient dot products. Every set (scalar, AVX2, NEON sdot, NEON widening) must give
// the same integers and the same f32 chains: bit-identical results. Shapes include partial
// row groups, partial 32-row blocks and (for f32-panel packing) partial column blocks.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#if defined(__aarch64__)
#include <sys/auxv.h>
#endif

#include "../../src/engine/kernels_int8.h"
#include "../../src/engine/tile_layout.h"
#include "nightlora/quant/qtype.h"
#include "test_util.h"

namespace {

using nl::QType;
using nl::engine::ForwardPanel;
using nl::engine::GradPanel;
using nl::engine::Int8Kernels;

std::vector<const Int8Kernels*> simd_sets() {
  std::vector<const Int8Kernels*> sets;
  // The x86-64 sets where the CPU runs them: the plain AVX2 one, the AVX-VNNI one and the
  // AVX-512 VNNI one.
  if (nl::engine::int8_kernels_avx2_plain()) sets.push_back(nl::engine::int8_kernels_avx2_plain());
  if (nl::engine::int8_kernels_avx2_vnni()) sets.push_back(nl::engine::int8_kernels_avx2_vnni());
  else if (nl::engine::int8_kernels_avx2_plain())
    std::printf("[int8] this CPU has no AVX-VNNI: the avx2-vnni set runs emulated only\n");
  if (nl::engine::int8_kernels_avx512_vnni()) sets.push_back(nl::engine::int8_kernels_avx512_vnni());
  else if (nl::engine::int8_kernels_avx2_plain())
    std::printf("[int8] this CPU has no AVX-512 VNNI: the avx512-vnni set runs emulated only\n");
  // The VNNI set's code with vpdpbusd emulated: tested on every AVX2 machine.
  if (nl::engine::int8_kernels_avx2_vnni_emulated()) sets.push_back(nl::engine::int8_kernels_avx2_vnni_emulated());
  // The NEON sets: the widening one on every arm64 CPU, the sdot one where the CPU has it.
  if (nl::engine::int8_kernels_neon_widening()) sets.push_back(nl::engine::int8_kernels_neon_widening());
  if (nl::engine::int8_kernels_neon_dotprod()) sets.push_back(nl::engine::int8_kernels_neon_dotprod());
  else if (nl::engine::int8_kernels_neon_widening())
    std::printf("[int8] this CPU has no dot-product extension: the neon-dotprod set is not run\n");
  if (sets.empty()) std::printf("[int8] no SIMD int8 kernels on this machine: only the scalar set is tested\n");
  return sets;
}

using nltest::random_vec;

struct Tiled {
  std::vector<uint8_t> bytes;
  nl::TensorView view;
  nl::engine::TiledMatrix tiles;
  Tiled(QType type, int64_t rows, int64_t cols, uint32_t seed) {
    const size_t rb = nl::qtype_row_bytes(type, cols);
    bytes.resize(rb * static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
      // Rows of different magnitudes, so the folded scales of the input gradient vary.
      const std::vector<float> row = random_vec(static_cast<size_t>(cols), seed + static_cast<uint32_t>(r),
                                                std::ldexp(1.0f, static_cast<int>(r % 7) - 3));
      nl::quantize_row(type, row.data(), bytes.data() + rb * static_cast<size_t>(r), cols);
    }
    view.name = "w";
    view.type = type;
    view.ne = {cols, rows};
    view.data = bytes.data();
    view.nbytes = bytes.size();
    tiles = nl::engine::make_tiles(view);
  }
};

// On arm64 the engine takes the sdot set exactly when the kernel reports the dot-product
// extension (HWCAP_ASIMDDP, bit 20 of AT_HWCAP), else the ARMv8.0 widening set: the arm64
// tests run under qemu both ways (-cpu max and -cpu cortex-a53).
TEST(Int8Kernels, NeonSetFollowsTheCpu) {
#if defined(__aarch64__)
  const bool dotprod = (getauxval(AT_HWCAP) & (1ul << 20)) != 0;
  ASSERT_NE(nl::engine::int8_kernels_neon(), nullptr);
  EXPECT_EQ(nl::engine::int8_kernels_neon()->isa, std::string(dotprod ? "neon-dotprod" : "neon"));
  EXPECT_EQ(nl::engine::int8_kernels_neon_dotprod() != nullptr, dotprod);
  EXPECT_EQ(&nl::engine::int8_kernels_for("neon"), nl::engine::int8_kernels_neon());
#else
  EXPECT_EQ(nl::engine::int8_kernels_neon(), nullptr);
  EXPECT_EQ(nl::engine::int8_kernels_neon_widening(), nullptr);
  EXPECT_EQ(nl::engine::int8_kernels_neon_dotprod(), nullptr);
#endif
}

TEST(Int8Kernels, QuantizerMatchesTheScalarDefinition) {
  // 32 * 5 + 7 values: whole blocks and a zero-padded tail; one block all zeros, one with
  // exact halves (round half to even), one with a single huge value.
  std::vector<float> x = random_vec(32 * 5 + 7, 1);
  for (int j = 0; j < 32; ++j) x[32 + j] = 0.0f;
  // Block 2: maximum 127/8, so the scale is exactly 1/8 and the others land on halves.
  for (int j = 1; j < 32; ++j) x[static_cast<size_t>(64 + j)] = static_cast<float>(2 * j - 31) / 16.0f;
  x[64] = 127.0f / 8.0f;
  x[100] = 1e30f;
  const int64_t n = static_cast<int64_t>(x.size()), nb = 6;
  std::vector<int8_t> q0(static_cast<size_t>(nb * 32)), q1(q0.size());
  std::vector<float> d0(nb), d1(nb);
  std::vector<int32_t> s0(nb), s1(nb);
  nl::engine::int8_kernels_scalar().quantize_row(x.data(), n, q0.data(), d0.data(), s0.data());
  // The definition, spelled out for one block.
  float amax = 0;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[static_cast<size_t>(j)]));
  for (int j = 0; j < 32; ++j)
    EXPECT_EQ(q0[static_cast<size_t>(j)], static_cast<int8_t>(std::nearbyint(x[static_cast<size_t>(j)] * (1.0f / (amax / 127.0f)))));
  EXPECT_EQ(d0[1], 0.0f);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(q0[static_cast<size_t>(32 + j)], 0);
  for (int j = n - 160; j < 32; ++j) EXPECT_EQ(q0[static_cast<size_t>(160 + j)], 0) << "padding";
  for (int64_t b = 0; b < nb; ++b) {
    int32_t s = 0;
    for (int j = 0; j < 32; ++j) s += q0[static_cast<size_t>(b * 32 + j)];
    EXPECT_EQ(s, s0[static_cast<size_t>(b)]);
  }
  for (const Int8Kernels* k : simd_sets()) {
    std::fill(q1.begin(), q1.end(), 0x55);
    k->quantize_row(x.data(), n, q1.data(), d1.data(), s1.data());
    EXPECT_EQ(q1, q0) << k->isa;
    EXPECT_EQ(d1, d0) << k->isa;
    EXPECT_EQ(s1, s0) << k->isa;
  }
}

// The input gradient's fixed-point requantization of y * rho (y16 = round(256 y), rho16 =
// round(16384 rho), two rounding multiplies) is round(y * rho) but within 1/64 of a tie,
// and never more than half a step and that margin off; the extremes stay in int8.
TEST(Int8Kernels, InputGradRequantizationIsTheRoundedProduct) {
  using nl::engine::grad_rho16;
  using nl::engine::grad_y16;
  using nl::engine::requantize_grad_value;
  EXPECT_EQ(requantize_grad_value(grad_y16(127.0f, 1.0f), grad_rho16(1.0f)), 127);
  EXPECT_EQ(requantize_grad_value(grad_y16(-127.0f, 1.0f), grad_rho16(1.0f)), -127);
  EXPECT_EQ(requantize_grad_value(grad_y16(127.0f, 1.0f), grad_rho16(-1.0f)), -127);
  EXPECT_EQ(requantize_grad_value(grad_y16(0.0f, 1.0f), grad_rho16(-0.75f)), 0);
  EXPECT_EQ(requantize_grad_value(grad_y16(100.0f, 1.0f), grad_rho16(0.0f)), 0);
  EXPECT_EQ(grad_y16(NAN, 1.0f), -32768);  // as the SIMD conversions give it
  std::mt19937 rng(12);
  std::uniform_real_distribution<float> ys(-127.0f, 127.0f), rhos(-1.0f, 1.0f);
  int64_t off_round = 0;
  const int n = 1000000;
  for (int i = 0; i < n; ++i) {
    const float y = ys(rng), rho = rhos(rng);
    const double exact = static_cast<double>(y) * static_cast<double>(rho);
    const int q = requantize_grad_value(grad_y16(y, 1.0f), grad_rho16(rho));
    ASSERT_LE(std::fabs(q - exact), 0.5 + 1.0 / 64) << y << " x " << rho;
    const double to_tie = std::fabs(std::fabs(exact - std::floor(exact)) - 0.5);
    if (q != static_cast<int>(std::nearbyint(exact))) {
      ++off_round;
      ASSERT_LT(to_tie, 1.0 / 64) << y << " x " << rho << " rounds to " << q << " away from a tie";
    }
  }
  EXPECT_LT(off_round, n / 50) << "more than 2% of the quants differ from round(y rho)";
}

struct Int8Shape {
  QType type;
  int64_t rows, cols;
};

class Int8Panels : public ::testing::TestWithParam<Int8Shape> {};

TEST_P(Int8Panels, PackersAndProductsMatchTheScalarSet) {
  const Int8Shape s = GetParam();
  const Tiled w(s.type, s.rows, s.cols, 5);
  const Int8Kernels& ref = nl::engine::int8_kernels_scalar();
  // 71 tokens: blocks of 4 and a remainder, and more than the AVX2 input grad's chunks of 32
  const int64_t nb = s.cols / 32, T = 71;

  // Forward: quantized activations, every row group.
  const std::vector<float> X = random_vec(static_cast<size_t>(T * s.cols), 9);
  std::vector<int8_t> q(static_cast<size_t>(T * nb * 32));
  std::vector<float> d(static_cast<size_t>(T * nb));
  std::vector<int32_t> sum(d.size());
  for (int64_t t = 0; t < T; ++t)
    ref.quantize_row(X.data() + t * s.cols, s.cols, q.data() + t * nb * 32, d.data() + t * nb, sum.data() + t * nb);
  std::vector<float> z(d.size());
  nl::engine::forward_offset_factors(d.data(), sum.data(), T * nb, z.data());
  // Backward: dY and the task's column range (whole matrix and an inner slice).
  std::vector<float> dY = random_vec(static_cast<size_t>(T * s.rows), 10);
  // Token 2's dY is zero: its requantized blocks have scale 0 (the quantizer's special case).
  std::fill(dY.begin() + 2 * s.rows, dY.begin() + 3 * s.rows, 0.0f);
  // dY's scales and int16 values per (token, 64-row block), as the engine prepares them for
  // every task (here token t's row blocks one after the other: block rb at t * ldy + rb * 64).
  constexpr int64_t RB = nl::engine::kGradRowBlock;
  const int64_t nR = (s.rows + RB - 1) / RB, ldy = nR * RB;
  std::vector<float> ey(static_cast<size_t>(T * nR));
  std::vector<int16_t> y16(static_cast<size_t>(T * ldy));
  for (int64_t t = 0; t < T; ++t) ref.grad_rows(dY.data() + t * s.rows, s.rows, ey.data() + t * nR, y16.data() + t * ldy, RB);

  for (const Int8Kernels* k : simd_sets()) {
    SCOPED_TRACE(k->isa);
    std::vector<float> ey1(ey.size(), -1.0f);
    std::vector<int16_t> y1(y16.size(), -1);
    for (int64_t t = 0; t < T; ++t) k->grad_rows(dY.data() + t * s.rows, s.rows, ey1.data() + t * nR, y1.data() + t * ldy, RB);
    EXPECT_EQ(ey1, ey) << "dY scales";
    EXPECT_EQ(y1, y16) << "dY as int16";
    for (int64_t g = 0; g < w.tiles.n_groups(); ++g) {
      ForwardPanel p0, p1;
      ref.pack_forward_tiles(w.tiles, g, p0);
      k->pack_forward_tiles(w.tiles, g, p1);
      ASSERT_EQ(p0.blocks, p1.blocks);
      ASSERT_EQ(p0.kind, p1.kind);
      ASSERT_TRUE(std::equal(p0.q.begin(), p0.q.begin() + nb * 256, p1.q.begin())) << "forward panel, group " << g;
      ASSERT_TRUE(std::equal(p0.d.begin(), p0.d.begin() + nb * 8, p1.d.begin())) << "forward scales, group " << g;
      if (nl::engine::is_signed(p0.kind)) {
        ASSERT_TRUE(std::equal(p0.wsum.begin(), p0.wsum.begin() + nb * 8, p1.wsum.begin())) << "weight sums, group " << g;
      }
      if (p0.kind == nl::engine::Int8Kind::Signed6) {
        ASSERT_TRUE(std::equal(p0.sub_scales.begin(), p0.sub_scales.begin() + nb * 16, p1.sub_scales.begin()))
            << "sub-block scales, group " << g;
      }
      ASSERT_EQ(p0.has_offsets, nl::engine::int8_has_offsets(s.type));
      ASSERT_EQ(p1.has_offsets, p0.has_offsets);
      if (p0.has_offsets) {
        ASSERT_TRUE(std::equal(p0.offset.begin(), p0.offset.begin() + nb * 8, p1.offset.begin())) << "offsets, group " << g;
      }
      const int64_t nr = w.tiles.group_rows(g);
      std::vector<float> y0(static_cast<size_t>(T * 8), -1.0f), y1(y0.size(), -1.0f);
      ref.forward(q.data(), d.data(), sum.data(), nb * 32, T, p0, nr, y0.data(), 8);
      k->forward(q.data(), d.data(), sum.data(), nb * 32, T, p0, nr, y1.data(), 8);
      EXPECT_EQ(y1, y0) << "forward, group " << g;
      if (p0.has_offsets) {  // the offsets' chain onto those outputs (rows past nr untouched)
        const ForwardPanel* const pp[1] = {&p0};
        ref.add_forward_offsets(z.data(), nb, T, pp, 1, nr, y0.data(), 8);
        k->add_forward_offsets(z.data(), nb, T, pp, 1, nr, y1.data(), 8);
        EXPECT_EQ(y1, y0) << "forward offsets, group " << g;
        for (int64_t t = 0; t < T; ++t)
          for (int64_t i = nr; i < 8; ++i) ASSERT_EQ(y1[static_cast<size_t>(t * 8 + i)], -1.0f);
      }
    }
    // Two row groups at once (the last pair may end in a partial group).
    for (int64_t g = 0; g + 1 < w.tiles.n_groups(); ++g) {
      ForwardPanel p0, p1;
      ref.pack_forward_tiles(w.tiles, g, p0);
      ref.pack_forward_tiles(w.tiles, g + 1, p1);
      const int64_t nr1 = w.tiles.group_rows(g + 1);
      std::vector<float> y0(static_cast<size_t>(T * 16), -1.0f), y1(y0.size(), -1.0f);
      ref.forward(q.data(), d.data(), sum.data(), nb * 32, T, p0, 8, y0.data(), 16);
      ref.forward(q.data(), d.data(), sum.data(), nb * 32, T, p1, nr1, y0.data() + 8, 16);
      k->forward_pair(q.data(), d.data(), sum.data(), nb * 32, T, p0, p1, nr1, y1.data(), 16);
      EXPECT_EQ(y1, y0) << "forward pair, groups " << g << " and " << g + 1;
    }
    // Four row groups at once, where the set has them (the last four may end in a partial
    // group).
    for (int64_t g = 0; k->forward_quad && g + 3 < w.tiles.n_groups(); ++g) {
      ForwardPanel p[4];
      for (int i = 0; i < 4; ++i) ref.pack_forward_tiles(w.tiles, g + i, p[i]);
      const ForwardPanel* const pp[4] = {&p[0], &p[1], &p[2], &p[3]};
      const int64_t nr3 = w.tiles.group_rows(g + 3);
      std::vector<float> y0(static_cast<size_t>(T * 32), -1.0f), y1(y0.size(), -1.0f);
      for (int i = 0; i < 4; ++i)
        ref.forward(q.data(), d.data(), sum.data(), nb * 32, T, p[i], i == 3 ? nr3 : 8, y0.data() + 8 * i, 32);
      k->forward_quad(q.data(), d.data(), sum.data(), nb * 32, T, pp, nr3, y1.data(), 32);
      EXPECT_EQ(y1, y0) << "forward quad, groups " << g << " to " << g + 3;
    }
    // Q4_K/Q5_K's offsets for 2 to 4 row groups at once (the last may be partial), as the
    // scalar set adds them one group at a time.
    for (int64_t np = 2; nl::engine::int8_has_offsets(s.type) && np <= 4; ++np)
      for (int64_t g = 0; g + np - 1 < w.tiles.n_groups(); ++g) {
        ForwardPanel p[4];
        for (int64_t i = 0; i < np; ++i) ref.pack_forward_tiles(w.tiles, g + i, p[i]);
        const ForwardPanel* const pp[4] = {&p[0], &p[1], &p[2], &p[3]};
        const int64_t nr_last = w.tiles.group_rows(g + np - 1);
        std::vector<float> y0(static_cast<size_t>(T * 32), 0.5f), y1 = y0;
        for (int64_t i = 0; i < np; ++i)
          ref.add_forward_offsets(z.data(), nb, T, pp + i, 1, i == np - 1 ? nr_last : 8, y0.data() + 8 * i, 32);
        k->add_forward_offsets(z.data(), nb, T, pp, np, nr_last, y1.data(), 32);
        EXPECT_EQ(y1, y0) << "offsets of " << np << " groups from " << g;
      }
    const int64_t b_lo = nb > 2 ? 1 : 0, b_hi = nb;
    for (int64_t rb = 0; rb * RB < s.rows; ++rb) {
      GradPanel p0, p1;
      ref.pack_grad_tiles(w.tiles, rb, b_lo, b_hi, p0);
      k->pack_grad_tiles(w.tiles, rb, b_lo, b_hi, p1);
      const int64_t m = b_hi - b_lo, ms = m * p0.parts;  // column blocks, scale blocks
      ASSERT_EQ(p0.parts, nl::engine::int8_grad_parts(s.type));
      ASSERT_EQ(p1.parts, p0.parts);
      ASSERT_TRUE(std::equal(p0.q.begin(), p0.q.begin() + m * nl::engine::kGradPanelBlockBytes, p1.q.begin()))
          << "grad panel, row block " << rb;
      ASSERT_TRUE(std::equal(p0.rho.begin(), p0.rho.begin() + ms * RB, p1.rho.begin())) << "grad ratios, block " << rb;
      ASSERT_TRUE(std::equal(p0.rho16.begin(), p0.rho16.begin() + ms * RB, p1.rho16.begin())) << "grad rho16 " << rb;
      ASSERT_TRUE(std::equal(p0.m.begin(), p0.m.begin() + ms, p1.m.begin())) << "grad scale bounds, block " << rb;
      const int64_t n = m * 32;
      const int16_t* g = y16.data() + rb * RB;
      const float* eb = ey.data() + rb;
      // Columns [b_lo*32, b_hi*32) of dX, with a non-zero start (accumulating in place).
      const std::vector<float> start = random_vec(static_cast<size_t>(T * n), 11);
      std::vector<float> d0 = start, d1 = start;
      ref.input_grad(g, ldy, eb, nR, T, p0, n, {d0.data(), n, d0.data(), n});
      k->input_grad(g, ldy, eb, nR, T, p0, n, {d1.data(), n, d1.data(), n});
      EXPECT_EQ(d1, d0) << "input grad, row block " << rb;
      // The same sums out of place, into rows 3n apart, leaving the start and the gaps alone.
      std::vector<float> o1(static_cast<size_t>(T * 3 * n), -7.0f);
      k->input_grad(g, ldy, eb, nR, T, p0, n, {start.data(), n, o1.data(), 3 * n});
      for (int64_t t = 0; t < T; ++t) {
        ASSERT_TRUE(std::equal(d0.begin() + t * n, d0.begin() + (t + 1) * n, o1.begin() + t * 3 * n))
            << "input grad out of place, row block " << rb << ", token " << t;
        ASSERT_TRUE(std::all_of(o1.begin() + t * 3 * n + n, o1.begin() + (t + 1) * 3 * n,
                                [](float v) { return v == -7.0f; }))
            << "input grad out of place wrote past its columns, token " << t;
      }
      // Without a start: the same bits as onto zeros.
      std::vector<float> z0(static_cast<size_t>(T * n), 0.0f), z1(static_cast<size_t>(T * n), 5.0f);
      ref.input_grad(g, ldy, eb, nR, T, p0, n, {z0.data(), n, z0.data(), n});
      k->input_grad(g, ldy, eb, nR, T, p0, n, {nullptr, 0, z1.data(), n});
      EXPECT_EQ(z1, z0) << "input grad without a start, row block " << rb;
      // A ragged column count (f32/f16 weights whose rows are not whole 32-blocks).
      std::vector<float> e0(static_cast<size_t>(T * n), 0.0f), e1 = e0;
      ref.input_grad(g, ldy, eb, nR, T, p0, n - 5, {e0.data(), n, e0.data(), n});
      k->input_grad(g, ldy, eb, nR, T, p0, n - 5, {nullptr, 0, e1.data(), n});
      EXPECT_EQ(e1, e0) << "input grad (ragged), row block " << rb;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, Int8Panels,
                         ::testing::Values(Int8Shape{QType::Q4_0, 64, 128}, Int8Shape{QType::Q8_0, 64, 128},
                                           // row blocks of 64: two whole ones, or one and a part
                                           Int8Shape{QType::Q4_0, 128, 64}, Int8Shape{QType::Q8_0, 100, 96},
                                           Int8Shape{QType::Q4_0, 45, 96}, Int8Shape{QType::Q8_0, 13, 64},
                                           Int8Shape{QType::Q4_0, 8, 32},
                                           // more column blocks than the AVX2 input grad's pass of 8
                                           Int8Shape{QType::Q4_0, 40, 352}, Int8Shape{QType::Q8_0, 33, 320},
                                           // Q4_K: whole and partial row groups, 1 and 2 super-blocks
                                           Int8Shape{QType::Q4_K, 64, 256}, Int8Shape{QType::Q4_K, 37, 512},
                                           // Q5_0 (Q8_0 tiles, Signed5 panels): whole and
                                           // partial row groups and blocks, more than a pass
                                           Int8Shape{QType::Q5_0, 64, 128}, Int8Shape{QType::Q5_0, 37, 352},
                                           // Q5_K (signed panels with offsets): the same
                                           Int8Shape{QType::Q5_K, 64, 256}, Int8Shape{QType::Q5_K, 37, 512},
                                           // Q6_K (Signed6 panels: per-16 integer scales, grad in
                                           // two parts per block): the same, and more column
                                           // blocks than a pass
                                           Int8Shape{QType::Q6_K, 64, 256}, Int8Shape{QType::Q6_K, 37, 512},
                                           Int8Shape{QType::Q6_K, 100, 768}),
                         [](const ::testing::TestParamInfo<Int8Shape>& i) {
                           return std::string(nl::qtype_info(i.param.type).name) + "_" +
                                  std::to_string(i.param.rows) + "x" + std::to_string(i.param.cols);
                         });

// Q4_K's input-gradient offsets (grad_offset_sums): each set's chains against the scalar
// set's, continued over two slabs of rows as the engine runs them, on 8 to 56 blocks (the
// AVX2 set's groups of 32 and single vectors).
TEST(Int8Kernels, GradOffsetSumsMatchTheScalarSet) {
  const Int8Kernels& ref = nl::engine::int8_kernels_scalar();
  const int64_t T = 5, rows = 200, split = 128;
  for (const int64_t nb : {8, 32, 56}) {
    const std::vector<float> C = random_vec(static_cast<size_t>(rows * nb), 21);
    const std::vector<float> dY = random_vec(static_cast<size_t>(T * rows), 22);
    const std::vector<float> start = random_vec(static_cast<size_t>(T * nb), 23);
    std::vector<float> g0 = start;
    ref.grad_offset_sums(dY.data(), rows, T, rows, C.data(), nb, nb, g0.data(), nb);
    for (const Int8Kernels* k : simd_sets()) {
      SCOPED_TRACE(k->isa);
      std::vector<float> g1 = start;
      k->grad_offset_sums(dY.data(), rows, T, split, C.data(), nb, nb, g1.data(), nb);
      k->grad_offset_sums(dY.data() + split, rows, T, rows - split, C.data() + split * nb, nb, nb, g1.data(), nb);
      EXPECT_EQ(g1, g0) << nb << " blocks";
    }
  }
}

// Activations at the quantizer's bounds for the integer-bound tests: T tokens x nb blocks of
// 32, token t's all -128 (even t) or 127, scale 0.5, with their sums.
struct BoundActivations {
  std::vector<int8_t> q;
  std::vector<float> d;
  std::vector<int32_t> sum;
  BoundActivations(int64_t T, int64_t nb)
      : q(static_cast<size_t>(T * nb * 32)), d(static_cast<size_t>(T * nb), 0.5f), sum(d.size()) {
    for (int64_t t = 0; t < T; ++t)
      for (int64_t b = 0; b < nb; ++b) {
        const int8_t v = t % 2 == 0 ? -128 : 127;
        std::fill_n(q.begin() + (t * nb + b) * 32, 32, v);
        sum[static_cast<size_t>(t * nb + b)] = 32 * v;
      }
  }
};

// The forward's integer sums at their bounds: every Q4_0 nibble 15 and every activation -128
// or 127, so each lane's 8 products of a block reach 8 x 15 x 128 (the NEON widening set
// sums them in int16) and the block's sum 32 x 15 x 128. Every set gives the scalar bits.
TEST(Int8Kernels, ForwardSumsAtTheIntegerBounds) {
  const Tiled w(QType::Q4_0, 16, 64, 7);
  nl::engine::TiledMatrix tiles = w.tiles;
  for (int64_t g = 0; g < tiles.n_groups(); ++g)
    for (int64_t b = 0; b < tiles.n_blocks(); ++b) {
      uint8_t* tile = const_cast<uint8_t*>(tiles.tile(g, b));
      std::memset(tile + 2 * tiles.group_rows(g), 0xFF, static_cast<size_t>(16 * tiles.group_rows(g)));
    }
  const int64_t T = 6, nb = 2, ldq = nb * 32;
  const BoundActivations x(T, nb);
  const std::vector<int8_t>& q = x.q;
  const std::vector<float>& d = x.d;
  const std::vector<int32_t>& sum = x.sum;
  const Int8Kernels& ref = nl::engine::int8_kernels_scalar();
  ForwardPanel p;
  ref.pack_forward_tiles(tiles, 0, p);
  std::vector<float> y0(static_cast<size_t>(T * 8), -1.0f);
  ref.forward(q.data(), d.data(), sum.data(), ldq, T, p, 8, y0.data(), 8);
  ASSERT_NE(y0[0], 0.0f);
  for (const Int8Kernels* k : simd_sets()) {
    SCOPED_TRACE(k->isa);
    std::vector<float> y1(y0.size(), -1.0f);
    k->forward(q.data(), d.data(), sum.data(), ldq, T, p, 8, y1.data(), 8);
    EXPECT_EQ(y1, y0);
    if (k->forward_quad) {  // the same panel as all four row groups
      const ForwardPanel* const pp[4] = {&p, &p, &p, &p};
      std::vector<float> y4(static_cast<size_t>(T * 32), -1.0f);
      k->forward_quad(q.data(), d.data(), sum.data(), ldq, T, pp, 8, y4.data(), 32);
      for (int64_t t = 0; t < T; ++t)
        for (int i = 0; i < 4; ++i)
          EXPECT_TRUE(std::equal(y0.begin() + t * 8, y0.begin() + t * 8 + 8, y4.begin() + t * 32 + 8 * i))
              << "quad, token " << t << ", group " << i;
    }
  }
}

// The input gradient's integer sums at their bounds: every Q4_0 value -8 (nibble 0) and
// every requantized dY 127 (equal dY, equal scales), so a column's sum over a 64-row block is
// 64 x 127 x -8 and, without VNNI, each 8 chunks' int16 pair sums reach 8 x 2 x 255 x -8
// (activations q + 128). Every set gives the scalar bits.
TEST(Int8Kernels, InputGradSumsAtTheIntegerBounds) {
  constexpr int64_t RB = nl::engine::kGradRowBlock;
  const Tiled w(QType::Q4_0, RB, 64, 8);
  nl::engine::TiledMatrix tiles = w.tiles;
  for (int64_t g = 0; g < tiles.n_groups(); ++g)
    for (int64_t b = 0; b < tiles.n_blocks(); ++b) {
      uint8_t* tile = const_cast<uint8_t*>(tiles.tile(g, b));
      const uint16_t one = 0x3C00;  // f16 1.0: every row's scale, so every ratio is 1
      for (int64_t i = 0; i < tiles.group_rows(g); ++i) std::memcpy(tile + 2 * i, &one, 2);
      std::memset(tile + 2 * tiles.group_rows(g), 0x00, static_cast<size_t>(16 * tiles.group_rows(g)));
    }
  const int64_t T = 5;
  const std::vector<float> dY(static_cast<size_t>(T * RB), 0.25f);
  const Int8Kernels& ref = nl::engine::int8_kernels_scalar();
  std::vector<float> ey(static_cast<size_t>(T));
  std::vector<int16_t> y16(static_cast<size_t>(T * RB));
  for (int64_t t = 0; t < T; ++t) ref.grad_rows(dY.data() + t * RB, RB, ey.data() + t, y16.data() + t * RB, RB);
  GradPanel p;
  ref.pack_grad_tiles(tiles, 0, 0, 2, p);
  std::vector<float> d0(static_cast<size_t>(T * 64), -1.0f);
  ref.input_grad(y16.data(), RB, ey.data(), 1, T, p, 64, {nullptr, 0, d0.data(), 64});
  EXPECT_NEAR(d0[0], 64.0f * 0.25f * -8.0f, 1e-3f) << "the bound's sum, scaled back";
  for (const Int8Kernels* k : simd_sets()) {
    SCOPED_TRACE(k->isa);
    std::vector<float> d1(d0.size(), -1.0f);
    k->input_grad(y16.data(), RB, ey.data(), 1, T, p, 64, {nullptr, 0, d1.data(), 64});
    EXPECT_EQ(d1, d0);
  }
}

// Signed5 panels of two row groups (rows 0-15 of `tiles`, one 64-row block, `cols` columns)
// against the bound activations in the forward and requantized dY of 127 (unsigned 255) in
// the input gradient: every set's packers give Signed5 panels and its products the scalar
// bits; the scalar input gradient's first output is 64 x 0.25 x `value` (each weight's value
// times its scale 1).
void expect_signed5_bounds(const nl::engine::TiledMatrix& tiles, int64_t cols, int value) {
  constexpr int64_t RB = nl::engine::kGradRowBlock;
  const int64_t T = 6, nb = cols / 32;
  const BoundActivations x(T, nb);
  const std::vector<float> dY(static_cast<size_t>(T * RB), 0.25f);
  std::vector<float> ey(static_cast<size_t>(T));
  std::vector<int16_t> y16(static_cast<size_t>(T * RB));
  const Int8Kernels& ref = nl::engine::int8_kernels_scalar();
  for (int64_t t = 0; t < T; ++t) ref.grad_rows(dY.data() + t * RB, RB, ey.data() + t, y16.data() + t * RB, RB);
  // Set k's forward of both row groups and input gradient of the row block.
  const auto products = [&](const Int8Kernels& k, std::vector<float>& y, std::vector<float>& dx) {
    ForwardPanel p0, p1;
    k.pack_forward_tiles(tiles, 0, p0);
    k.pack_forward_tiles(tiles, 1, p1);
    ASSERT_EQ(p0.kind, nl::engine::Int8Kind::Signed5);
    y.assign(static_cast<size_t>(T * 16), -1.0f);
    k.forward_pair(x.q.data(), x.d.data(), x.sum.data(), cols, T, p0, p1, 8, y.data(), 16);
    GradPanel gp;
    k.pack_grad_tiles(tiles, 0, 0, nb, gp);
    ASSERT_EQ(gp.kind, nl::engine::Int8Kind::Signed5);
    dx.assign(static_cast<size_t>(T * cols), -1.0f);
    k.input_grad(y16.data(), RB, ey.data(), 1, T, gp, cols, {nullptr, 0, dx.data(), cols});
  };
  std::vector<float> y0, d0;
  products(ref, y0, d0);
  EXPECT_NEAR(d0[0], 64.0f * 0.25f * static_cast<float>(value), 1e-3f) << "the bound's sum, scaled back";
  for (const Int8Kernels* k : simd_sets()) {
    SCOPED_TRACE(k->isa);
    std::vector<float> y1, d1;
    products(*k, y1, d1);
    EXPECT_EQ(y1, y0) << "forward";
    EXPECT_EQ(d1, d0) << "input gradient";
  }
}

// Q5_K's Signed5 panels at the bounds of the plain AVX2 kernels' int16 sums of 4 chunks:
// every q 31 (value 15, biased 31) against activations -128 or 127 in the forward (pairs of
// 2 x 31 x 128), every q 0 (value -16) against requantized dY of 127 (unsigned 255) in the
// input gradient (pairs of 2 x 255 x 16). Every scale 1, every min 0.
TEST(Int8Kernels, Q5KSumsAtTheIntegerBounds) {
  constexpr int64_t RB = nl::engine::kGradRowBlock, cols = 256;
  for (const uint8_t fill : {uint8_t{0xFF}, uint8_t{0x00}}) {
    SCOPED_TRACE(fill == 0xFF ? "q = 31" : "q = 0");
    const Tiled w(QType::Q5_K, RB, cols, 9);
    nl::engine::TiledMatrix tiles = w.tiles;
    for (int64_t g = 0; g < tiles.n_groups(); ++g)
      for (int64_t i = 0; i < tiles.group_rows(g); ++i) {
        uint8_t* block = const_cast<uint8_t*>(tiles.tile(g, 0)) + static_cast<size_t>(i) * tiles.block_bytes;
        const uint16_t one = 0x3C00, zero = 0;  // d = 1, dmin = 0
        std::memcpy(block, &one, 2);
        std::memcpy(block + 2, &zero, 2);
        const uint8_t scales[12] = {1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1};  // every scale 1, min 0
        std::memcpy(block + 4, scales, sizeof scales);
        std::memset(block + 16, fill, 32 + 128);  // qh and the nibbles
      }
    expect_signed5_bounds(tiles, cols, fill == 0xFF ? 15 : -16);
  }
}

// Q5_0's panels (its Q8_0 tiles, Signed5) at the same bounds: every quant 15 (q = 31) or -16
// (q = 0) with scale 1.
TEST(Int8Kernels, Q5_0SumsAtTheIntegerBounds) {
  constexpr int64_t RB = nl::engine::kGradRowBlock, cols = 256;
  for (const uint8_t fill : {uint8_t{0xFF}, uint8_t{0x00}}) {
    SCOPED_TRACE(fill == 0xFF ? "q = 31" : "q = 0");
    std::vector<uint8_t> bytes(static_cast<size_t>(RB * cols / 32 * 22));
    for (size_t o = 0; o < bytes.size(); o += 22) {
      const uint16_t one = 0x3C00;
      std::memcpy(&bytes[o], &one, 2);
      std::memset(&bytes[o + 2], fill, 20);  // qh and the nibbles
    }
    nl::TensorView view;
    view.name = "w";
    view.type = QType::Q5_0;
    view.ne = {cols, RB};
    view.data = bytes.data();
    view.nbytes = bytes.size();
    expect_signed5_bounds(nl::engine::make_tiles(view), cols, fill == 0xFF ? 15 : -16);
  }
}

// Q6_K's Signed6 panels at the bounds of their integer sums: every q 63 (value 31) or 0
// (value -32), the sub-blocks' scales 127 and -128 in turn, against activations -128 or 127
// (unsigned 0 or 255) in the forward and requantized dY of 127 (unsigned 255) in the input
// gradient: without VNNI the AVX2 kernels sum 2 chunks per int16 run in both (4 x 255 x 32).
// Then dY with NaN in every other row (requantized to -128: unsigned 0 on AVX2, the NEON
// widening set's negated int16 sums reach 8 x 128 x 32 there). Every set gives the scalar
// bits.
TEST(Int8Kernels, Q6KSumsAtTheIntegerBounds) {
  constexpr int64_t RB = nl::engine::kGradRowBlock, cols = 256;
  for (const uint8_t fill : {uint8_t{0xFF}, uint8_t{0x00}}) {
    SCOPED_TRACE(fill == 0xFF ? "q = 63" : "q = 0");
    const Tiled w(QType::Q6_K, RB, cols, 9);
    nl::engine::TiledMatrix tiles = w.tiles;
    for (int64_t g = 0; g < tiles.n_groups(); ++g)
      for (int64_t i = 0; i < tiles.group_rows(g); ++i) {
        uint8_t* block = const_cast<uint8_t*>(tiles.tile(g, 0)) + static_cast<size_t>(i) * tiles.block_bytes;
        std::memset(block, fill, 128 + 64);  // the low nibbles and the high bit pairs
        for (int sc = 0; sc < 16; ++sc) block[192 + sc] = sc % 2 == 0 ? 127 : 0x80;  // 127, -128
        const uint16_t one = 0x3C00;  // d = 1
        std::memcpy(block + 208, &one, 2);
      }
    const Int8Kernels& ref = nl::engine::int8_kernels_scalar();
    const int64_t T = 6, nb = cols / 32;
    const BoundActivations x(T, nb);
    ForwardPanel p0, p1;
    ref.pack_forward_tiles(tiles, 0, p0);
    ref.pack_forward_tiles(tiles, 1, p1);
    ASSERT_EQ(p0.kind, nl::engine::Int8Kind::Signed6);
    std::vector<float> y0(static_cast<size_t>(T * 16), -1.0f);
    ref.forward_pair(x.q.data(), x.d.data(), x.sum.data(), cols, T, p0, p1, 8, y0.data(), 16);
    const float v = fill == 0xFF ? 31.0f : -32.0f;
    EXPECT_EQ(y0[0], nb * 16 * (127.0f - 128.0f) * v * -128.0f * 0.5f) << "the bound's sum, scaled back";
    const std::vector<float> dY(static_cast<size_t>(T * RB), 0.25f);
    std::vector<float> ey(static_cast<size_t>(T));
    std::vector<int16_t> y16(static_cast<size_t>(T * RB));
    for (int64_t t = 0; t < T; ++t) ref.grad_rows(dY.data() + t * RB, RB, ey.data() + t, y16.data() + t * RB, RB);
    GradPanel gp;
    ref.pack_grad_tiles(tiles, 0, 0, nb, gp);
    ASSERT_EQ(gp.parts, 2);
    std::vector<float> d0(static_cast<size_t>(T * cols), -1.0f);
    ref.input_grad(y16.data(), RB, ey.data(), 1, T, gp, cols, {nullptr, 0, d0.data(), cols});
    EXPECT_NEAR(d0[0], 64.0f * 0.25f * 127.0f * v, 1e-2f) << "the bound's sum, scaled back (scale 127)";
    EXPECT_NEAR(d0[16], 64.0f * 0.25f * -128.0f * v, 1e-2f) << "the bound's sum, scaled back (scale -128)";
    for (const Int8Kernels* k : simd_sets()) {
      SCOPED_TRACE(k->isa);
      std::vector<float> y1(y0.size(), -1.0f);
      k->forward_pair(x.q.data(), x.d.data(), x.sum.data(), cols, T, p0, p1, 8, y1.data(), 16);
      EXPECT_EQ(y1, y0) << "forward";
      std::vector<float> d1(d0.size(), -1.0f);
      k->input_grad(y16.data(), RB, ey.data(), 1, T, gp, cols, {nullptr, 0, d1.data(), cols});
      EXPECT_EQ(d1, d0) << "input gradient";
    }
    std::vector<float> nan_dY = dY;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t r = 0; r < RB; r += 2) nan_dY[static_cast<size_t>(t * RB + r)] = NAN;
    for (int64_t t = 0; t < T; ++t) ref.grad_rows(nan_dY.data() + t * RB, RB, ey.data() + t, y16.data() + t * RB, RB);
    ASSERT_EQ(y16[0], -32768) << "a NaN's int16";
    std::vector<float> n0(d0.size(), -1.0f);
    ref.input_grad(y16.data(), RB, ey.data(), 1, T, gp, cols, {nullptr, 0, n0.data(), cols});
    ASSERT_NE(n0[0], 0.0f) << "the -128 quants reach the sums";
    for (const Int8Kernels* k : simd_sets()) {
      SCOPED_TRACE(k->isa);
      std::vector<float> n1(n0.size(), -1.0f);
      k->input_grad(y16.data(), RB, ey.data(), 1, T, gp, cols, {nullptr, 0, n1.data(), cols});
      EXPECT_EQ(n1, n0) << "input gradient, NaN in dY";
    }
  }
}

// Equal floats, or NaN both (a NaN's payload may differ between conversions).
bool same_floats(const float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!(a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i])))) return false;
  return true;
}

// A hostile or odd file's tile scales (infinities, a NaN, subnormals, -0, the largest f16)
// reach every set's tile packers the same way: the same bytes, scales, ratios and rho16.
TEST(Int8Kernels, TilePackersAgreeOnExtremeScales) {
  const uint16_t odd[] = {0x7C00, 0xFC00, 0x7E00, 0x0001, 0x8000, 0x7BFF, 0x03FF};
  for (const QType type : {QType::Q4_0, QType::Q8_0}) {
    SCOPED_TRACE(nl::qtype_info(type).name);
    const Tiled w(type, 90, 96, 6);
    nl::engine::TiledMatrix tiles = w.tiles;
    // Rows of full and partial groups, in both row blocks, in several column blocks.
    int k = 0;
    for (int64_t row : {0, 5, 9, 17, 31, 33, 44, 63, 70, 89})
      for (int64_t b : {0, 2}) {
        uint8_t* tile = const_cast<uint8_t*>(tiles.tile(row / 8, b));
        std::memcpy(tile + (row % 8) * 2, &odd[k++ % 7], 2);
      }
    const Int8Kernels& ref = nl::engine::int8_kernels_scalar();
    for (const Int8Kernels* set : simd_sets()) {
      SCOPED_TRACE(set->isa);
      for (int64_t g = 0; g < tiles.n_groups(); ++g) {
        ForwardPanel p0, p1;
        ref.pack_forward_tiles(tiles, g, p0);
        set->pack_forward_tiles(tiles, g, p1);
        ASSERT_TRUE(std::equal(p0.q.begin(), p0.q.begin() + 3 * 256, p1.q.begin())) << "forward panel, group " << g;
        ASSERT_TRUE(same_floats(p0.d.data(), p1.d.data(), 3 * 8)) << "forward scales, group " << g;
      }
      for (int64_t rb = 0; rb < 2; ++rb) {
        GradPanel p0, p1;
        ref.pack_grad_tiles(tiles, rb, 0, 3, p0);
        set->pack_grad_tiles(tiles, rb, 0, 3, p1);
        constexpr int64_t RB = nl::engine::kGradRowBlock;
        ASSERT_TRUE(std::equal(p0.q.begin(), p0.q.begin() + 3 * nl::engine::kGradPanelBlockBytes, p1.q.begin()))
            << "grad panel " << rb;
        ASSERT_TRUE(same_floats(p0.rho.data(), p1.rho.data(), 3 * RB)) << "grad ratios " << rb;
        ASSERT_TRUE(same_floats(p0.m.data(), p1.m.data(), 3)) << "grad scale bounds " << rb;
        ASSERT_TRUE(std::equal(p0.rho16.begin(), p0.rho16.begin() + 3 * RB, p1.rho16.begin())) << "rho16 " << rb;
      }
    }
  }
}

// A diverged step's dY (a NaN, infinities) gets the same scales and int16 values from
// every set: the NaN is dropped from the block maximum, as std::max drops it in the definition.
TEST(Int8Kernels, GradRowsAgreeOnNonFiniteValues) {
  constexpr int64_t RB = nl::engine::kGradRowBlock, n = 3 * RB;
  std::vector<float> g = random_vec(n, 13);
  for (int r = 1; r < RB; r += 2) g[static_cast<size_t>(r)] = NAN;  // block 0: NaNs among finite values
  g[RB + 8] = INFINITY;      // block 1: an infinity (scale inf, every value -32768 or 0)
  g[2 * RB] = -INFINITY;     // block 2: both
  g[2 * RB + 1] = NAN;
  const Int8Kernels& ref = nl::engine::int8_kernels_scalar();
  std::vector<float> ey0(3);
  std::vector<int16_t> y0(n);
  ref.grad_rows(g.data(), n, ey0.data(), y0.data(), RB);
  EXPECT_TRUE(std::isfinite(ey0[0])) << "the NaN is not the block's maximum";
  EXPECT_EQ(y0[3], -32768);
  for (const Int8Kernels* k : simd_sets()) {
    SCOPED_TRACE(k->isa);
    std::vector<float> ey1(3, -1.0f);
    std::vector<int16_t> y1(n, 7);
    k->grad_rows(g.data(), n, ey1.data(), y1.data(), RB);
    EXPECT_TRUE(same_floats(ey0.data(), ey1.data(), 3));
    EXPECT_EQ(y1, y0);
  }
}

// The Q8_0 copy of the weights without int8 tiles (kernels_int8.h): d is the smallest half
// >= max|w| / 127, so every quant is within [-127, 127] and each weight within half a step;
// a partial block's missing values are zeros; all zeros give d = 0; tiny blocks (d a
// subnormal half) and non-finite weights as documented.
TEST(Int8Kernels, Q8_0CopyOfOtherWeights) {
  std::vector<float> v = random_vec(32, 5);
  for (const float scale : {1.0f, 3e-3f, 1e-6f, 1e-9f, 7e4f}) {
    SCOPED_TRACE(scale);
    std::vector<float> w(v);
    for (float& x : w) x *= scale;
    nl::quant::BlockQ8_0 b;
    nl::engine::quantize_block_q8_0(w.data(), 32, &b);
    float amax = 0.0f;
    for (float x : w) amax = std::max(amax, std::fabs(x));
    const float d = nl::fp16_to_f32(b.d);
    ASSERT_GE(d, amax / 127.0f);
    ASSERT_LT(nl::fp16_to_f32(static_cast<uint16_t>(b.d - 1)), amax / 127.0f) << "the smallest such half";
    for (int j = 0; j < 32; ++j) {
      ASSERT_LE(std::abs(static_cast<int>(b.qs[j])), 127);
      EXPECT_EQ(b.qs[j], static_cast<int8_t>(std::nearbyint(w[static_cast<size_t>(j)] / d))) << j;
      EXPECT_LE(std::fabs(b.qs[j] * d - w[static_cast<size_t>(j)]), 0.50001f * d) << j;
    }
  }
  nl::quant::BlockQ8_0 b;
  nl::engine::quantize_block_q8_0(v.data(), 7, &b);  // a row's last 7 columns
  for (int j = 7; j < 32; ++j) EXPECT_EQ(b.qs[j], 0) << "padding " << j;
  const std::vector<float> zeros(32, 0.0f);
  nl::engine::quantize_block_q8_0(zeros.data(), 32, &b);
  EXPECT_EQ(b.d, 0);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(b.qs[j], 0);
  std::vector<float> w(v);
  w[3] = NAN;
  nl::engine::quantize_block_q8_0(w.data(), 32, &b);
  EXPECT_TRUE(std::isfinite(nl::fp16_to_f32(b.d)));
  EXPECT_EQ(b.qs[3], -128);
  w[3] = INFINITY;
  nl::engine::quantize_block_q8_0(w.data(), 32, &b);
  EXPECT_TRUE(std::isinf(nl::fp16_to_f32(b.d)));
}

}  // namespace
