// Four- and eight-float vectors for the host ops (attention, SwiGLU, the loss, the tile
// products), written with GCC's vector extensions: SSE2 on any x86-64, NEON on arm64, no
// per-ISA builds or dispatch. The host ops are about a fifth of a step; written as plain
// loops they stayed scalar (GCC does not vectorize float reductions without -ffast-math,
// and std::exp is a library call), so they use these instead. The streaming loops use
// eight floats: on Zen 3 their x86-64-v3 build ran 15-18% faster on 256-bit registers.
#pragma once
// Eight-float vectors go by value only between inlined functions (see f8 below).
#pragma GCC diagnostic ignored "-Wpsabi"
#include <cstdint>
#include <cstring>

// NL_HOST_KERNEL: on x86-64, a host loop built twice, for the baseline and for x86-64-v3
// (AVX2, FMA: three-operand instructions and fused multiply-adds, still on four-float
// vectors), the loader picking one for the CPU (GCC target_clones). SSE's two-operand form
// made GCC load each key row of the attention tiles twice; measured on Zen 1, one thread,
// qwen2.5-0.5b shapes, attention forward runs 14% faster and backward 5%. `flatten`
// inlines everything the loop calls into each clone (a helper left out of line would be
// built for the baseline only). Results are deterministic per machine, not across the two
// builds.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define NL_HOST_KERNEL __attribute__((target_clones("arch=x86-64-v3", "default"), flatten))
#else
#define NL_HOST_KERNEL
#endif

namespace nl::vec4 {

using f4 = float __attribute__((vector_size(16)));
using i4 = int32_t __attribute__((vector_size(16)));

// Unaligned loads and stores as typed accesses: a vector of floats aliases floats only
// (GCC gives vector types their element's alias set), so the compiler may keep pointers
// and other non-float values in registers across them (a memcpy may alias anything, and
// in the tile loops it made GCC reload every row pointer after each store).
// (A typedef, as the compilers' own headers write their unaligned vector types: clang
// ignores aligned(4) in a `using` alias and kept 16- and 32-byte alignment, so its builds
// made aligned loads of unaligned rows; UBSan in build-fuzz/'s sanitized server found it.)
typedef float f4u __attribute__((vector_size(16), aligned(4)));
inline f4 load(const float* p) { return *reinterpret_cast<const f4u*>(p); }
inline void store(float* p, f4 v) { *reinterpret_cast<f4u*>(p) = v; }
// The first min(n, 4) floats at p, the other lanes zero; and the first min(n, 4) lanes of
// v stored to p (for the last, partial vector of a row).
inline f4 load_n(const float* p, int64_t n) {
  if (n >= 4) return load(p);
  f4 v = {0, 0, 0, 0};
  std::memcpy(&v, p, static_cast<size_t>(n) * sizeof(float));
  return v;
}
inline void store_n(float* p, f4 v, int64_t n) {
  if (n >= 4) return store(p, v);
  std::memcpy(p, &v, static_cast<size_t>(n) * sizeof(float));
}
inline f4 splat(float x) { return f4{x, x, x, x}; }
inline float sum(f4 v) { return (v[0] + v[1]) + (v[2] + v[3]); }

// e^x lane by lane, for four- or eight-float vectors: Cephes' expf (x = n·ln2 + r,
// |r| <= ln2/2, a degree-6 polynomial in r, times 2^n built in the exponent bits). Within
// 2 ulp of the exact value from ln(smallest normal) = -87.34 to 88.37; 0 below, +inf above
// (so 88.37 to ln(FLT_MAX) = 88.72 reads as +inf too), NaN stays NaN. Scalars combine with
// the vectors directly (GCC broadcasts them).
template <class V>
inline V exp(V x) {
  using I = decltype(x < x);  // the integer vector of V's width
  const float lo = -87.3365447f, hi = 88.3762626f;
  const I underflow = x < lo, overflow = x > hi;
  x = x < lo ? lo : x;  // comparisons with NaN are false: NaN passes through
  x = x > hi ? hi : x;
  const float magic = 12582912.0f;  // 1.5·2^23: adding it rounds to an integer
  const V n = (x * 1.44269504088896341f + magic) - magic;
  V r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  V p = r * 1.9875691500e-4f + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  const I two_n = (__builtin_convertvector(n, I) + 127) << 23;
  const V y = p * (V)two_n;  // a vector cast reinterprets the bits
  const V zero{}, inf = zero + __builtin_inff();
  return overflow ? inf : underflow ? zero : y;
}

// Eight floats: one AVX register in the x86-64-v3 build (NL_HOST_KERNEL), two SSE or NEON
// registers elsewhere, with the same arithmetic in every lane either way. (Written as two
// four-float vectors, the x86-64-v3 build stayed on 128-bit registers.) Scalars multiply
// vectors directly: a vector built from 8 copies (f8{x, ...}) compiled to 8 inserts. GCC
// warns that passing one by value changes the ABI without AVX: every function taking or
// returning one is inlined into the kernels (NL_HOST_KERNEL's flatten), so no call passes one.
using f8 = float __attribute__((vector_size(32)));
typedef float f8u __attribute__((vector_size(32), aligned(4)));
inline f8 load8(const float* p) { return *reinterpret_cast<const f8u*>(p); }
inline void store8(float* p, f8 v) { *reinterpret_cast<f8u*>(p) = v; }
// The first min(n, 8) floats at p, the other lanes `fill`; and the first min(n, 8) lanes of
// v stored to p (for the last, partial vector of a row; through a padded copy).
[[gnu::always_inline]] inline f8 load8_n(const float* p, int64_t n, float fill = 0.0f) {
  if (n >= 8) return load8(p);
  float buf[8];
  for (float& b : buf) b = fill;
  std::memcpy(buf, p, static_cast<size_t>(n) * sizeof(float));
  return load8(buf);
}
[[gnu::always_inline]] inline void store8_n(float* p, f8 v, int64_t n) {
  if (n >= 8) return store8(p, v);
  std::memcpy(p, &v, static_cast<size_t>(n) * sizeof(float));
}
// The largest of p[0, n) (n > 0), eight floats at a time.
inline float max_of(const float* p, int64_t n) {
  f8 m = load8_n(p, n, p[0]);
  int64_t i = 8;
  for (; i + 8 <= n; i += 8) {
    const f8 x = load8(p + i);
    m = x > m ? x : m;
  }
  float r = m[0];
  for (int l = 1; l < 8; ++l) r = m[l] > r ? m[l] : r;
  for (; i < n; ++i) r = p[i] > r ? p[i] : r;
  return r;
}
// Lanes 0..3 plus lanes 4..7.
inline f4 halves_sum(f8 v) {
  return __builtin_shufflevector(v, v, 0, 1, 2, 3) + __builtin_shufflevector(v, v, 4, 5, 6, 7);
}

}  // namespace nl::vec4
