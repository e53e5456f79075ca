// Quantize -> dequantize error of every type on random and special data, against bounds
// derived from each format:
//  - a block scale stored as f16 has relative error <= 2^-11 (kHalfRel);
//  - round-to-nearest with step d errs by <= d/2 per element;
//  - symmetric legacy types (Q4_0, Q5_0) map the value of largest magnitude to the most
//    negative level, so values near the opposite extreme are clamped one level short
//    and may err by a whole step;
//  - K-quants choose their sub-block scales by a least-squares search and then store them
//    with 6 or 8 bits, so the per-element bound is one step of the sub-block's natural
//    grid (range / levels) and the RMS error must not exceed half a step (plain rounding
//    gives step/sqrt(12) ~ 0.29 step on smooth data).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "nightlora/quant/qtype.h"
#include "test_util.h"

using nl::QType;

namespace {

constexpr double kHalfRel = 1.0 / 2048;

// Largest error of storing v as f16: half a unit in the last place, which below 2^-14
// (subnormal halves, e.g. the scale of a block of values ~1e-3) is a fixed 2^-25.
double half_rounding(double v) { return std::max(std::fabs(v) * kHalfRel, std::ldexp(1.0, -25)); }

std::vector<float> roundtrip(QType t, const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> q(nl::qtype_row_bytes(t, n));
  nl::quantize_row(t, x.data(), q.data(), n);
  std::vector<float> y(x.size());
  nl::dequantize_row(t, q.data(), y.data(), n);
  return y;
}

// Gaussian data whose scale varies per `scale_block` elements over 3 orders of magnitude,
// with some 32-element blocks of uniform data, of outliers, or offset from zero.
std::vector<float> weight_like_data(size_t n, uint32_t seed, size_t scale_block = 32) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::uniform_real_distribution<float> log_scale(-3.0f, 0.0f);
  std::vector<float> x(n);
  float s = 1;
  for (size_t b = 0; b < n / 32; ++b) {
    if (b % (scale_block / 32) == 0) s = std::pow(10.0f, log_scale(rng));
    const int kind = static_cast<int>(b % 7);
    for (size_t j = 0; j < 32; ++j) {
      float v = kind == 5 ? uni(rng) : gauss(rng);
      if (kind == 6 && j == 3) v *= 8;  // an outlier
      if (kind == 4) v += 2.0f;         // all positive, offset from zero
      x[32 * b + j] = s * v;
    }
  }
  return x;
}

struct Stats {
  double max_ratio = 0;  // max over elements of |err| / allowed
};

// ---- legacy types ------------------------------------------------------------------------

// Checks one 32-element block of a legacy type against its format bound.
void check_legacy_block(QType t, const float* x, const float* y, Stats& st, const std::string& what) {
  float amax = 0, signed_max = 0, lo = x[0], hi = x[0];
  for (int j = 0; j < 32; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      signed_max = x[j];
    }
    lo = std::min(lo, x[j]);
    hi = std::max(hi, x[j]);
  }
  for (int j = 0; j < 32; ++j) {
    double allowed = 0;
    switch (t) {
      case QType::Q8_0: {
        const double d = amax / 127.0;
        allowed = d * 0.5 + 127 * half_rounding(d) + 1e-6 * amax;
        break;
      }
      case QType::Q4_0:
      case QType::Q5_0: {
        const int half_levels = t == QType::Q4_0 ? 8 : 16;
        const double d = amax / half_levels;
        // Opposite in sign to the extreme value and beyond the last half step: clamped.
        const bool clamped = x[j] * signed_max < 0 && std::fabs(x[j]) > (half_levels - 0.6) * d;
        allowed = d * (clamped ? 1.0 : 0.5) + half_levels * half_rounding(d) + 1e-6 * amax;
        break;
      }
      case QType::Q4_1:
      case QType::Q5_1: {
        const int levels = t == QType::Q4_1 ? 15 : 31;
        const double d = (static_cast<double>(hi) - lo) / levels;
        allowed = d * 0.5 + levels * half_rounding(d) + half_rounding(lo) + 1e-6 * (std::fabs(lo) + std::fabs(hi));
        break;
      }
      default:
        FAIL() << "not a legacy type";
    }
    const double err = std::fabs(static_cast<double>(y[j]) - x[j]);
    ASSERT_LE(err, allowed) << what << " element " << j << ": x=" << x[j] << " y=" << y[j];
    if (allowed > 0) st.max_ratio = std::max(st.max_ratio, err / allowed);
  }
}

// ---- K-quants ----------------------------------------------------------------------------

struct KStats {
  double sum_err2 = 0;   // squared error, over all elements
  double sum_step2 = 0;  // squared natural step, over all elements
  double worst_step_ratio = 0;  // max over elements of |err| / step of its sub-block
};

// Per-element bound, in steps of the sub-block's natural grid:
//  - Q4_K/Q5_K fit scale and offset by weighted least squares, which may leave an extreme
//    element a little over half a step from its level: one step.
//  - Q6_K is symmetric: the value of largest magnitude maps to level -32, so a value
//    near the opposite extreme is clamped at +31 (one step short), and the scale search
//    (+-3%) can move the top level by ~1 step more: two steps.
// On top of that (`shift` below) the sub-block scales and mins are stored as integer
// multiples of the super-block's d and dmin (d ~ largest scale / 63 for Q4_K/Q5_K, / 128
// for Q6_K), so each sub-block's grid is off by up to d/2 per level and dmin/2: a sub-block
// much smaller than the largest one in its super-block loses precision. That is the format.
double kquant_steps_allowed(QType t) { return t == QType::Q6_K ? 2.0 : 1.0; }

// Checks one row against the K-quant bounds. Sub-blocks: Q4_K/Q5_K have 32 elements with
// levels 0..nmax above an offset (min <= 0), Q6_K 16 symmetric elements, levels -32..31.
void check_kquant(QType t, const std::vector<float>& x, const std::vector<float>& y, KStats& ks, const std::string& what) {
  const int sub = t == QType::Q6_K ? 16 : 32;
  const int nmax = t == QType::Q4_K ? 15 : t == QType::Q5_K ? 31 : 32;
  for (size_t sb = 0; sb < x.size() / 256; ++sb) {
    // The super-block scales are stored as f16; for small values they are subnormal and
    // their rounding (half_rounding) is what limits precision. Estimate them from the data
    // (10% margin) and allow their rounding at the largest level and sub-block scale.
    double amax = 0, max_step = 0, max_offset = 0;  // over the super-block's sub-blocks
    std::vector<double> step(256 / sub);
    for (int s = 0; s < 256 / sub; ++s) {
      const float* xs = &x[sb * 256 + s * sub];
      double lo = 0, hi = xs[0], a = 0;
      for (int j = 0; j < sub; ++j) {
        lo = std::min(lo, static_cast<double>(xs[j]));
        hi = std::max(hi, static_cast<double>(xs[j]));
        a = std::max(a, std::fabs(static_cast<double>(xs[j])));
      }
      step[s] = t == QType::Q6_K ? a / 32 : (hi - lo) / nmax;
      amax = std::max(amax, a);
      max_step = std::max(max_step, step[s]);
      max_offset = std::max(max_offset, -lo);
    }
    const double d = 1.1 * max_step / (t == QType::Q6_K ? 128 : 63);
    const double dmin = 1.1 * max_offset / 63;
    const double shift = t == QType::Q6_K ? nmax * d / 2 : nmax * d / 2 + dmin / 2;
    const double slack = t == QType::Q6_K ? 32.0 * 128 * half_rounding(d) + 1e-7 * amax
                                          : nmax * 63.0 * half_rounding(d) + 63.0 * half_rounding(dmin) + 1e-7 * amax;
    for (int s = 0; s < 256 / sub; ++s) {
      const size_t base = sb * 256 + s * sub;
      double err2 = 0;
      for (int j = 0; j < sub; ++j) {
        const double err = std::fabs(static_cast<double>(y[base + j]) - x[base + j]);
        ASSERT_LE(err, kquant_steps_allowed(t) * step[s] + shift + slack)
            << what << " element " << base + j << ": x=" << x[base + j] << " y=" << y[base + j] << " step=" << step[s];
        if (step[s] > 0) ks.worst_step_ratio = std::max(ks.worst_step_ratio, err / step[s]);
        err2 += err * err;
      }
      // On average an element is within half a step: the search only accepts fits that
      // beat plain rounding on the (weighted) squared error.
      const double rms = std::sqrt(err2 / sub);
      ASSERT_LE(rms, 0.5 * step[s] + shift + slack) << what << " sub-block at " << base << ": RMS error " << rms << " step " << step[s];
      ks.sum_err2 += err2;
      ks.sum_step2 += step[s] * step[s] * sub;
    }
  }
}

const QType kLegacy[] = {QType::Q4_0, QType::Q4_1, QType::Q5_0, QType::Q5_1, QType::Q8_0};
const QType kKQuants[] = {QType::Q4_K, QType::Q5_K, QType::Q6_K};

}  // namespace

TEST(Roundtrip, LegacyTypesStayWithinTheirFormatBound) {
  const std::vector<float> x = weight_like_data(32 * 2048, 1234);
  for (QType t : kLegacy) {
    const std::vector<float> y = roundtrip(t, x);
    Stats st;
    for (size_t b = 0; b < x.size() / 32; ++b)
      check_legacy_block(t, &x[32 * b], &y[32 * b], st, std::string(nl::qtype_name(t)) + " block " + std::to_string(b));
    // The bound is tight, not vacuous: some element comes close to it.
    EXPECT_GT(st.max_ratio, 0.8) << nl::qtype_name(t);
  }
}

TEST(Roundtrip, KQuantsStayWithinOneStepAndHalfAStepRms) {
  const std::vector<float> x = weight_like_data(256 * 512, 99, 256);
  for (QType t : kKQuants) {
    const std::vector<float> y = roundtrip(t, x);
    KStats ks;
    check_kquant(t, x, y, ks, nl::qtype_name(t));
    std::printf("%s: worst element error %.3f steps\n", nl::qtype_name(t), ks.worst_step_ratio);
    // Over the whole row the search should do about as well as rounding on a uniform grid
    // (RMS = step / sqrt(12) = 0.289 step); 0.35 leaves room for storing scales in 6 bits.
    const double overall = std::sqrt(ks.sum_err2 / ks.sum_step2);
    EXPECT_LT(overall, 0.35) << nl::qtype_name(t);
    EXPECT_GT(overall, 0.1) << nl::qtype_name(t) << ": suspiciously small error";
  }
}

TEST(Roundtrip, MoreBitsMeanLessError) {
  // Gaussian weights of one scale: the relative RMS error falls with the bits per weight.
  std::mt19937 rng(7);
  std::normal_distribution<float> gauss(0.0f, 0.02f);
  std::vector<float> x(256 * 64);
  for (float& v : x) v = gauss(rng);
  double rms_x = 0;
  for (float v : x) rms_x += static_cast<double>(v) * v;
  rms_x = std::sqrt(rms_x / x.size());
  auto rel = [&](QType t) {
    const std::vector<float> y = roundtrip(t, x);
    double e = 0;
    for (size_t i = 0; i < x.size(); ++i) e += (static_cast<double>(y[i]) - x[i]) * (static_cast<double>(y[i]) - x[i]);
    return std::sqrt(e / x.size()) / rms_x;
  };
  const double q4_0 = rel(QType::Q4_0), q4_1 = rel(QType::Q4_1), q4_k = rel(QType::Q4_K);
  const double q5_0 = rel(QType::Q5_0), q5_k = rel(QType::Q5_K), q6_k = rel(QType::Q6_K), q8_0 = rel(QType::Q8_0);
  const double f16 = rel(QType::F16), bf16 = rel(QType::BF16);
  // Q4_K (4.5 bits) beats Q4_0 (4.5 bits): the point of its asymmetric sub-block fit.
  EXPECT_LT(q4_k, q4_0);
  EXPECT_LT(q4_k, q4_1 * 1.05);
  EXPECT_LT(q5_k, q4_k);
  EXPECT_LT(q5_0, q4_0);
  EXPECT_LT(q6_k, q5_k);
  EXPECT_LT(q8_0, q6_k);
  EXPECT_LT(f16, q8_0);
  EXPECT_LT(bf16, q8_0);
  // Orders of magnitude from the step sizes (range of 32 Gaussians ~ 4 sigma):
  // 4 bits ~ 4/15/sqrt(12) ~ 0.08, 6 bits ~ 0.02, 8 bits ~ 0.004.
  EXPECT_LT(q4_k, 0.12);
  EXPECT_LT(q6_k, 0.03);
  EXPECT_LT(q8_0, 0.01);
  EXPECT_EQ(rel(QType::F32), 0.0);
}

TEST(Roundtrip, ZeroBlocksStayExactlyZero) {
  const std::vector<float> x(512, 0.0f);
  for (QType t : {QType::Q4_0, QType::Q4_1, QType::Q5_0, QType::Q5_1, QType::Q8_0, QType::Q4_K, QType::Q5_K, QType::Q6_K}) {
    const std::vector<float> y = roundtrip(t, x);
    for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], 0.0f) << nl::qtype_name(t) << " element " << i;
  }
}

TEST(Roundtrip, SpecialBlocksStayWithinBounds) {
  // Constant, single spike, one huge sub-block among tiny ones, alternating signs.
  std::vector<std::vector<float>> cases;
  cases.emplace_back(256, 3.7f);
  cases.emplace_back(256, -0.001f);
  {
    std::vector<float> v(256, 0.0f);
    v[77] = -5.0f;
    cases.push_back(v);
  }
  {
    std::vector<float> v(256);
    for (int i = 0; i < 256; ++i) v[i] = (i / 32 == 2 ? 100.0f : 0.01f) * std::sin(0.37f * i);
    cases.push_back(v);
  }
  {
    std::vector<float> v(256);
    for (int i = 0; i < 256; ++i) v[i] = (i % 2 ? 1.0f : -1.0f) * (1 + i % 5);
    cases.push_back(v);
  }
  for (size_t c = 0; c < cases.size(); ++c) {
    const auto& x = cases[c];
    for (QType t : kLegacy) {
      const std::vector<float> y = roundtrip(t, x);
      Stats st;
      for (size_t b = 0; b < x.size() / 32; ++b)
        check_legacy_block(t, &x[32 * b], &y[32 * b], st, "case " + std::to_string(c) + " " + nl::qtype_name(t));
    }
    // K-quants store sub-block scales relative to the block's largest one (6 bits for
    // Q4_K/Q5_K, 8 for Q6_K), so a sub-block far smaller than the largest cannot keep its
    // own fine grid; there the bound is a step of the block's coarsest representable
    // grid. Checked on the cases without that spread.
    if (c == 3) {
      for (QType t : kKQuants) {
        const std::vector<float> y = roundtrip(t, x);
        double amax = 0, max_err = 0;
        for (size_t i = 0; i < x.size(); ++i) {
          amax = std::max(amax, std::fabs(static_cast<double>(x[i])));
          max_err = std::max(max_err, std::fabs(static_cast<double>(y[i]) - x[i]));
        }
        // One level of the largest sub-block's grid, over twice its range (asymmetric).
        EXPECT_LE(max_err, 2 * amax / (t == QType::Q4_K ? 15 : t == QType::Q5_K ? 31 : 32)) << nl::qtype_name(t);
      }
      continue;
    }
    for (QType t : kKQuants) {
      KStats ks;
      check_kquant(t, x, roundtrip(t, x), ks, "case " + std::to_string(c) + " " + nl::qtype_name(t));
    }
  }
}

TEST(Roundtrip, QuantizationIsDeterministic) {
  const std::vector<float> x = weight_like_data(512, 5);
  for (QType t : {QType::Q4_0, QType::Q5_1, QType::Q8_0, QType::Q4_K, QType::Q5_K, QType::Q6_K}) {
    std::vector<uint8_t> a(nl::qtype_row_bytes(t, 512)), b(a.size());
    nl::quantize_row(t, x.data(), a.data(), 512);
    nl::quantize_row(t, x.data(), b.data(), 512);
    EXPECT_EQ(a, b) << nl::qtype_name(t);
  }
}

TEST(Roundtrip, NonFiniteInputDoesNotCrash) {
  // Garbage in, garbage out, but no undefined behaviour (checked under the sanitizers).
  std::vector<float> x(256, 1.0f);
  x[3] = std::nanf("");
  x[100] = INFINITY;
  x[200] = -INFINITY;
  for (QType t : {QType::Q4_0, QType::Q4_1, QType::Q5_0, QType::Q5_1, QType::Q8_0, QType::Q4_K, QType::Q5_K, QType::Q6_K})
    (void)roundtrip(t, x);
}
