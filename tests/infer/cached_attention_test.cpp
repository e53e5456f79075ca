// The decoder's attention over the KV cache (src/infer/cached_attention.h), every kernel set
// this machine runs (portable, AVX2 + F16C):
//  - the f16 row conversions equal nl::f32_to_fp16 / nl::fp16_to_f32 bit for bit (ties,
//    subnormals, overflow to infinity, NaN);
//  - attention equals a double-precision definition (causal, grouped-query, over n_past
//    cached positions plus the new ones) to f32 rounding, with f32 and f16 caches, for query
//    blocks of 1 to 8 tokens, heads of 8 to 64 values (those of 16 or fewer take their own
//    path); and a query's result does not depend on the block it is in;
//  - a tree of new rows (CachedAttention::parent) gives each row the bits of its
//    root-to-row path run alone. (That the small-head
//    path gives the general path's bits is checked end to end: bench/infer_eval.sh's
//    "same outputs" against the build before it.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "../../src/infer/cached_attention.h"
#include "nightlora/util/half.h"
#include "test_util.h"

namespace {

using nl::infer::AttentionKernels;

std::vector<const AttentionKernels*> sets() {
  std::vector<const AttentionKernels*> s = {&nl::infer::attention_kernels_portable()};
  if (nl::infer::attention_kernels_avx2()) s.push_back(nl::infer::attention_kernels_avx2());
  return s;
}

TEST(CachedAttention, HalfConversionsAreTheReferenceOnes) {
  std::vector<float> x = {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 65520.0f, 1e6f, -1e6f, 6.0e-8f, 3.0e-8f, 2.9e-8f,
                          1e-5f, -7.3e-6f, 0.1f, 1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048,
                          std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN()};
  const std::vector<float> r = nltest::random_vec(1000, 3, 100.0f);
  x.insert(x.end(), r.begin(), r.end());
  for (float& v : nltest::random_vec(200, 4, 1e-4f)) x.push_back(v);  // subnormal halves
  for (const AttentionKernels* k : sets()) {
    std::vector<uint16_t> h(x.size());
    k->to_halves(x.data(), static_cast<int64_t>(x.size()), h.data());
    for (size_t i = 0; i < x.size(); ++i) {
      const uint16_t want = nl::f32_to_fp16(x[i]);
      if (std::isnan(x[i])) EXPECT_TRUE((h[i] & 0x7c00) == 0x7c00 && (h[i] & 0x3ff) != 0) << k->isa << " NaN";
      else EXPECT_EQ(h[i], want) << k->isa << " value " << x[i];
    }
    std::vector<uint16_t> all(65536);
    for (uint32_t i = 0; i < 65536; ++i) all[i] = static_cast<uint16_t>(i);
    std::vector<float> back(all.size());
    k->from_halves(all.data(), static_cast<int64_t>(all.size()), back.data());
    for (uint32_t i = 0; i < 65536; ++i) {
      const float want = nl::fp16_to_f32(static_cast<uint16_t>(i));
      if (std::isnan(want)) EXPECT_TRUE(std::isnan(back[i])) << k->isa << " bits " << i;
      else EXPECT_EQ(nl::bits_from_f32(back[i]), nl::bits_from_f32(want)) << k->isa << " bits " << i;
    }
  }
}

// The definition in double: softmax(q·k / sqrt(hd)) over keys [0, n_past + t], times v.
std::vector<double> reference(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                              int64_t T, int64_t n_past, int64_t n_head, int64_t n_kv, int64_t hd) {
  const int64_t qd = n_head * hd, kvd = n_kv * hd, group = n_head / n_kv;
  std::vector<double> out(static_cast<size_t>(T * qd), 0.0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < n_head; ++h) {
      const int64_t kvh = h / group, n = n_past + t + 1;
      std::vector<double> s(static_cast<size_t>(n));
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < n; ++j) {
        double d = 0;
        for (int64_t e = 0; e < hd; ++e) d += static_cast<double>(q[t * qd + h * hd + e]) * k[j * kvd + kvh * hd + e];
        s[j] = d / std::sqrt(static_cast<double>(hd));
        mx = std::max(mx, s[j]);
      }
      for (double& x : s) sum += x = std::exp(x - mx);
      for (int64_t j = 0; j < n; ++j)
        for (int64_t e = 0; e < hd; ++e) out[t * qd + h * hd + e] += s[j] / sum * v[j * kvd + kvh * hd + e];
    }
  return out;
}

TEST(CachedAttention, MatchesTheDefinitionWithF32AndF16Caches) {
  struct Shape {
    int64_t T, n_past, n_head, n_kv, hd;
  };
  for (const Shape& s : {Shape{1, 0, 4, 2, 16}, Shape{1, 37, 14, 2, 64}, Shape{13, 5, 4, 4, 8}, Shape{20, 0, 8, 2, 32},
                         Shape{9, 3, 6, 3, 20},
                         // small heads (<= 16 values: their own path), as stories260K's and
                         // tinystories-656k's, behind a long cache, with 1 to 8 query heads per KV head
                         Shape{8, 203, 8, 4, 8}, Shape{11, 97, 8, 1, 8}, Shape{5, 130, 4, 4, 16}, Shape{3, 9, 6, 2, 16}}) {
    const int64_t n = s.n_past + s.T, qd = s.n_head * s.hd, kvd = s.n_kv * s.hd;
    const std::vector<float> q = nltest::random_vec(static_cast<size_t>(s.T * qd), 1, 2.0f);
    std::vector<float> k = nltest::random_vec(static_cast<size_t>(n * kvd), 2, 2.0f);
    std::vector<float> v = nltest::random_vec(static_cast<size_t>(n * kvd), 3);
    for (const nl::KvType type : {nl::KvType::F32, nl::KvType::F16}) {
      // The f16 cache holds rounded keys and values: the definition gets the same rounded ones.
      std::vector<uint16_t> k16(k.size()), v16(v.size());
      std::vector<float> kr = k, vr = v;
      if (type == nl::KvType::F16)
        for (size_t i = 0; i < k.size(); ++i) {
          k16[i] = nl::f32_to_fp16(k[i]), kr[i] = nl::fp16_to_f32(k16[i]);
          v16[i] = nl::f32_to_fp16(v[i]), vr[i] = nl::fp16_to_f32(v16[i]);
        }
      const std::vector<double> want = reference(q, kr, vr, s.T, s.n_past, s.n_head, s.n_kv, s.hd);
      for (const AttentionKernels* ks : sets()) {
        std::vector<float> out(static_cast<size_t>(s.T * qd), NAN), one(out.size(), NAN);
        const bool f16 = type == nl::KvType::F16;
        nl::infer::CachedAttention a{q.data(), s.T, s.n_past, s.n_head, s.n_kv, s.hd,
                                     1.0f / std::sqrt(static_cast<float>(s.hd)), type,
                                     f16 ? static_cast<const void*>(k16.data()) : k.data(),
                                     f16 ? static_cast<const void*>(v16.data()) : v.data(), out.data()};
        std::vector<float> scratch(static_cast<size_t>(nl::infer::cached_attention_scratch(s.n_head, s.n_kv, n, s.hd)));
        for (int64_t t0 = 0; t0 < s.T; t0 += nl::infer::kMaxQueryBlock)
          for (int64_t h = 0; h < s.n_kv; ++h)
            ks->task(a, t0, std::min(s.T, t0 + nl::infer::kMaxQueryBlock), h, scratch.data());
        double worst = 0;
        for (size_t i = 0; i < out.size(); ++i) worst = std::max(worst, std::fabs(out[i] - want[i]));
        EXPECT_LE(worst, 2e-5) << ks->isa << " " << nl::kv_type_name(type) << " T " << s.T << " n_past " << s.n_past;
        // One query at a time: the same bits.
        a.out = one.data();
        for (int64_t t = 0; t < s.T; ++t)
          for (int64_t h = 0; h < s.n_kv; ++h) ks->task(a, t, t + 1, h, scratch.data());
        EXPECT_EQ(one, out) << ks->isa << " " << nl::kv_type_name(type) << ": blocks of queries change the bits";
      }
    }
  }
}


// A tree of new rows (CachedAttention::parent, Decoder::forward_tree): each row's output is
// the bits of the causal kernel run on the cache followed by its ancestors' keys and values
// and its own, the row last: each root-to-row path run separately.
TEST(CachedAttention, TreeRowsGiveTheBitsOfEachPathRunAlone) {
  struct Shape {
    int64_t n_past, n_head, n_kv, hd;
  };
  // parent[i] < i; -1: a child of the cache. Depths up to 5, siblings, rows past a query block.
  const std::vector<int32_t> parent = {-1, 0, 1, 1, -1, 4, 5, 6, 6, -1, 9, 2, 11, 12, -1, 14, 15, 14, 3, 7};
  const int64_t T = static_cast<int64_t>(parent.size());
  for (const Shape& s : {Shape{0, 4, 2, 16}, Shape{37, 14, 2, 64}, Shape{13, 4, 4, 8}, Shape{203, 8, 8, 8},
                         Shape{97, 8, 1, 8}, Shape{130, 4, 4, 16}, Shape{9, 6, 3, 20}, Shape{64, 8, 2, 32}}) {
    const int64_t n = s.n_past + T, qd = s.n_head * s.hd, kvd = s.n_kv * s.hd;
    const std::vector<float> q = nltest::random_vec(static_cast<size_t>(T * qd), 11, 2.0f);
    const std::vector<float> k = nltest::random_vec(static_cast<size_t>(n * kvd), 12, 2.0f);
    const std::vector<float> v = nltest::random_vec(static_cast<size_t>(n * kvd), 13);
    for (const nl::KvType type : {nl::KvType::F32, nl::KvType::F16}) {
      const bool f16 = type == nl::KvType::F16;
      std::vector<uint16_t> k16(k.size()), v16(v.size());
      for (size_t i = 0; i < k.size(); ++i) k16[i] = nl::f32_to_fp16(k[i]), v16[i] = nl::f32_to_fp16(v[i]);
      for (const AttentionKernels* ks : sets()) {
        std::vector<float> out(static_cast<size_t>(T * qd), NAN);
        nl::infer::CachedAttention a{q.data(), T, s.n_past, s.n_head, s.n_kv, s.hd,
                                     1.0f / std::sqrt(static_cast<float>(s.hd)), type,
                                     f16 ? static_cast<const void*>(k16.data()) : k.data(),
                                     f16 ? static_cast<const void*>(v16.data()) : v.data(), out.data()};
        a.parent = parent.data();
        std::vector<float> scratch(static_cast<size_t>(nl::infer::cached_attention_scratch(s.n_head, s.n_kv, n, s.hd)));
        for (int64_t t0 = 0; t0 < T; t0 += nl::infer::kMaxQueryBlock)
          for (int64_t h = 0; h < s.n_kv; ++h)
            ks->task(a, t0, std::min(T, t0 + nl::infer::kMaxQueryBlock), h, scratch.data());
        for (int64_t t = 0; t < T; ++t) {
          std::vector<int64_t> path;  // tree rows from the root down to t
          for (int32_t r = static_cast<int32_t>(t); r >= 0; r = parent[static_cast<size_t>(r)]) path.insert(path.begin(), r);
          const int64_t len = s.n_past + static_cast<int64_t>(path.size());
          // The cache, then the path's keys and values, as one causal sequence.
          std::vector<float> kp(static_cast<size_t>(len * kvd)), vp(kp.size());
          std::vector<uint16_t> kp16(kp.size()), vp16(kp.size());
          const auto row = [&](int64_t j) { return j < s.n_past ? j : s.n_past + path[static_cast<size_t>(j - s.n_past)]; };
          for (int64_t j = 0; j < len; ++j)
            for (int64_t e = 0; e < kvd; ++e) {
              const size_t to = static_cast<size_t>(j * kvd + e), from = static_cast<size_t>(row(j) * kvd + e);
              kp[to] = k[from], vp[to] = v[from], kp16[to] = k16[from], vp16[to] = v16[from];
            }
          std::vector<float> alone(static_cast<size_t>(qd), NAN);
          nl::infer::CachedAttention b{q.data() + t * qd, 1, len - 1, s.n_head, s.n_kv, s.hd, a.scale, type,
                                       f16 ? static_cast<const void*>(kp16.data()) : kp.data(),
                                       f16 ? static_cast<const void*>(vp16.data()) : vp.data(), alone.data()};
          for (int64_t h = 0; h < s.n_kv; ++h) ks->task(b, 0, 1, h, scratch.data());
          EXPECT_EQ(alone, std::vector<float>(out.begin() + t * qd, out.begin() + (t + 1) * qd))
              << ks->isa << " " << nl::kv_type_name(type) << " n_past " << s.n_past << " hd " << s.hd << " row " << t;
        }
      }
    }
  }
}

}  // namespace
