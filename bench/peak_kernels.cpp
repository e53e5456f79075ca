#include "peak_kernels.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#if defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif
#endif

namespace nlbench {
namespace {

// Iterations per timed batch: long enough to hide the clock reads, short enough to stop
// close to the requested duration.
constexpr int64_t kInnerIters = 1 << 16;

// An empty asm that "modifies" v: the compiler must assume a new value every iteration, so it
// cannot hoist the loop-invariant multiply out of the loop. It emits no instruction.
template <class V>
inline void opaque(V& v) {
  asm volatile("" : "+x"(v));
}

// Each kernel runs `iters` iterations and returns a value depending on every chain, so no
// chain is dead code; the caller folds it into a sink.
struct Kernel {
  const char* isa;
  double ops_per_iter;
  float (*run)(int64_t iters);
};

#if defined(__x86_64__)

// 12 chains of 8-lane FMAs: FMA latency 4-5 cycles x 2 FMA pipes needs >= 10 in flight.
__attribute__((target("avx2,fma"))) float f32_avx2(int64_t iters) {
  __m256 a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm256_set1_ps(0.001f * static_cast<float>(i));
  const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it) {
    // Unrolled so every chain lives in a register (no store/reload between steps).
#pragma GCC unroll 16
    for (int i = 0; i < 12; ++i) a[i] = _mm256_fmadd_ps(a[i], m, c);
  }
  __m256 s = a[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, a[i]);
  return _mm256_cvtss_f32(s);
}

// Without FMA: a multiply and an add per lane on 4-lane SSE registers (12 chains).
float f32_sse2(int64_t iters) {
  __m128 a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm_set1_ps(0.001f * static_cast<float>(i));
  const __m128 m = _mm_set1_ps(0.999999f), c = _mm_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it) {
    // Unrolled so every chain lives in a register (no store/reload between steps).
#pragma GCC unroll 16
    for (int i = 0; i < 12; ++i) a[i] = _mm_add_ps(_mm_mul_ps(a[i], m), c);
  }
  __m128 s = a[0];
  for (int i = 1; i < 12; ++i) s = _mm_add_ps(s, a[i]);
  return _mm_cvtss_f32(s);
}

// 8 chains of the AVX2 int8 dot step: u8 x s8 -> pairs summed to i16 (vpmaddubsw), pairs of
// i16 summed to i32 (vpmaddwd with ones), accumulated (vpaddd). 32 multiply-adds per step.
__attribute__((target("avx2,fma"))) float int8_avx2(int64_t iters) {
  __m256i acc[8];
  for (int i = 0; i < 8; ++i) acc[i] = _mm256_setzero_si256();
  // Chain i multiplies x[i % 4] by w[i / 4]: 8 different products (the compiler cannot
  // share one), 4 new inputs per step, and everything fits the 16 registers (no spills).
  __m256i x[4];
  for (int i = 0; i < 4; ++i) x[i] = _mm256_set1_epi8(static_cast<char>(1 + i));
  const __m256i w[2] = {_mm256_set1_epi8(3), _mm256_set1_epi8(5)}, ones = _mm256_set1_epi16(1);
  for (int64_t it = 0; it < iters; ++it) {
    for (int i = 0; i < 4; ++i) opaque(x[i]);
    // Unrolled so every chain lives in a register (no store/reload between steps).
#pragma GCC unroll 16
    for (int i = 0; i < 8; ++i)
      acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(_mm256_maddubs_epi16(x[i % 4], w[i / 4]), ones));
  }
  __m256i s = acc[0];
  for (int i = 1; i < 8; ++i) s = _mm256_add_epi32(s, acc[i]);
  return static_cast<float>(_mm256_extract_epi32(s, 0));
}

// The sequence of the engine's Q4_0 int8 kernel (src/engine/kernels_int8_avx2.cpp): 4-bit
// weights times int8 activations fit int16 for a whole 32-value block, so 8 vpmaddubsw are
// summed with vpaddw and widened by one vpmaddwd. On cores with one integer-multiply pipe
// (AMD Zen 1/2) this does twice the multiply-adds per cycle of the sequence above.
// 8 chains; per step 8 x 32 multiply-adds, 8 vpmaddubsw, 8 vpaddw, 1 vpmaddwd, 1 vpaddd.
__attribute__((target("avx2,fma"))) float int8_i16acc_avx2(int64_t iters) {
  __m256i acc[8];
  for (int i = 0; i < 8; ++i) acc[i] = _mm256_setzero_si256();
  __m256i x[4];  // as in int8_avx2: 8 different products per step, no spills
  for (int i = 0; i < 4; ++i) x[i] = _mm256_set1_epi8(static_cast<char>(1 + i));
  const __m256i w[2] = {_mm256_set1_epi8(3), _mm256_set1_epi8(5)}, ones = _mm256_set1_epi16(1);
  for (int64_t it = 0; it < iters; it += 8) {
    __m256i a16[8];
    for (int i = 0; i < 8; ++i) a16[i] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int step = 0; step < 8; ++step) {
      for (int i = 0; i < 4; ++i) opaque(x[i]);
#pragma GCC unroll 16
      for (int i = 0; i < 8; ++i) a16[i] = _mm256_add_epi16(a16[i], _mm256_maddubs_epi16(w[i / 4], x[i % 4]));
      // Without this GCC computed all 64 products of the 8 steps first and kept them on the
      // stack: 64 stores per 8 steps, and half the throughput (Zen 3: 115 instead of 250
      // GOP/s per core, below what the engine's own Q4_0 kernel reaches).
      for (int i = 0; i < 8; ++i) opaque(a16[i]);
    }
    for (int i = 0; i < 8; ++i) acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(a16[i], ones));
  }
  __m256i s = acc[0];
  for (int i = 1; i < 8; ++i) s = _mm256_add_epi32(s, acc[i]);
  return static_cast<float>(_mm256_extract_epi32(s, 0));
}

// 8 chains of the AVX-VNNI dot step (vpdpbusd: u8 x s8, groups of 4 summed into i32 and
// accumulated in one instruction), the sequence of the engine's avx2-vnni int8 set.
__attribute__((target("avx2,avxvnni"))) float int8_vnni(int64_t iters) {
  __m256i acc[8];
  for (int i = 0; i < 8; ++i) acc[i] = _mm256_setzero_si256();
  __m256i x[4];  // as in int8_avx2
  for (int i = 0; i < 4; ++i) x[i] = _mm256_set1_epi8(static_cast<char>(1 + i));
  const __m256i w[2] = {_mm256_set1_epi8(3), _mm256_set1_epi8(5)};
  for (int64_t it = 0; it < iters; ++it) {
    for (int i = 0; i < 4; ++i) opaque(x[i]);
#pragma GCC unroll 16
    for (int i = 0; i < 8; ++i) acc[i] = _mm256_dpbusd_avx_epi32(acc[i], x[i % 4], w[i / 4]);
  }
  __m256i s = acc[0];
  for (int i = 1; i < 8; ++i) s = _mm256_add_epi32(s, acc[i]);
  return static_cast<float>(_mm256_extract_epi32(s, 0));
}

// 8 chains of the AVX-512 VNNI dot step on 512-bit registers (EVEX vpdpbusd), the widest
// form the engine's avx512-vnni int8 set uses.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) float int8_avx512_vnni(int64_t iters) {
  __m512i acc[8];
  for (int i = 0; i < 8; ++i) acc[i] = _mm512_setzero_si512();
  __m512i x[4];
  for (int i = 0; i < 4; ++i) x[i] = _mm512_set1_epi8(static_cast<char>(1 + i));
  const __m512i w[2] = {_mm512_set1_epi8(3), _mm512_set1_epi8(5)};
  for (int64_t it = 0; it < iters; ++it) {
    for (int i = 0; i < 4; ++i) asm volatile("" : "+v"(x[i]));
#pragma GCC unroll 16
    for (int i = 0; i < 8; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], x[i % 4], w[i / 4]);
  }
  __m512i s = acc[0];
  for (int i = 1; i < 8; ++i) s = _mm512_add_epi32(s, acc[i]);
  alignas(64) int32_t lanes[16];  // (not _mm512_reduce_add_epi32: GCC 12 warns on its undefined vector)
  _mm512_store_si512(lanes, s);
  uint32_t total = 0;  // (wraps, as the lanes' sums do)
  for (int32_t v : lanes) total += static_cast<uint32_t>(v);
  return static_cast<float>(static_cast<int32_t>(total));
}

// Without AVX2: the SSE2 equivalent (sign-extend to i16, pmaddwd), 8 multiply-adds per step.
float int8_sse2(int64_t iters) {
  __m128i acc[8], x[8];
  for (int i = 0; i < 8; ++i) {
    acc[i] = _mm_setzero_si128();
    x[i] = _mm_set1_epi16(static_cast<short>(1 + i));
  }
  const __m128i w = _mm_set1_epi16(3);
  for (int64_t it = 0; it < iters; ++it) {
    // Unrolled so every chain lives in a register (no store/reload between steps).
#pragma GCC unroll 16
    for (int i = 0; i < 8; ++i) {
      opaque(x[i]);
      acc[i] = _mm_add_epi32(acc[i], _mm_madd_epi16(x[i], w));
    }
  }
  __m128i s = acc[0];
  for (int i = 1; i < 8; ++i) s = _mm_add_epi32(s, acc[i]);
  return static_cast<float>(_mm_cvtsi128_si32(s));
}

Kernel f32_kernel() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return {"avx2+fma (12 chains x 8 lanes)", 12.0 * 8 * 2, f32_avx2};
  return {"sse2 mul+add (12 chains x 4 lanes)", 12.0 * 4 * 2, f32_sse2};
}

Kernel int8_kernel() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2"))
    return {"avx2 vpmaddubsw+vpmaddwd (8 chains x 32 bytes)", 8.0 * 32 * 2, int8_avx2};
  return {"sse2 pmaddwd on i16 (8 chains x 8 lanes)", 8.0 * 8 * 2, int8_sse2};
}

Kernel int8_vnni_kernel() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("avxvnni"))
    return {"avx-vnni vpdpbusd (8 chains x 32 bytes)", 8.0 * 32 * 2, int8_vnni};
  return int8_kernel();
}

Kernel int8_avx512_vnni_kernel() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni"))
    return {"avx512-vnni vpdpbusd (8 chains x 64 bytes)", 8.0 * 64 * 2, int8_avx512_vnni};
  return int8_vnni_kernel();
}

Kernel int8_i16acc_kernel() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2"))
    return {"avx2 vpmaddubsw+vpaddw, vpmaddwd per 8 (8 chains x 32 bytes)", 8.0 * 32 * 2, int8_i16acc_avx2};
  return int8_kernel();
}

#elif defined(__aarch64__)

template <>
inline void opaque<int8x16_t>(int8x16_t& v) {
  asm volatile("" : "+w"(v));
}

float f32_neon(int64_t iters) {
  float32x4_t a[16];
  for (int i = 0; i < 16; ++i) a[i] = vdupq_n_f32(0.001f * static_cast<float>(i));
  const float32x4_t m = vdupq_n_f32(0.999999f), c = vdupq_n_f32(1e-7f);
  for (int64_t it = 0; it < iters; ++it) {
    // Unrolled so every chain lives in a register (no store/reload between steps).
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) a[i] = vfmaq_f32(c, a[i], m);
  }
  float32x4_t s = a[0];
  for (int i = 1; i < 16; ++i) s = vaddq_f32(s, a[i]);
  return vgetq_lane_f32(s, 0);
}

// sdot: 16 int8 products summed in groups of 4 into 4 i32 lanes per instruction.
__attribute__((target("arch=armv8.2-a+dotprod"))) float int8_sdot(int64_t iters) {
  int32x4_t acc[12];
  int8x16_t x[12];
  for (int i = 0; i < 12; ++i) {
    acc[i] = vdupq_n_s32(0);
    x[i] = vdupq_n_s8(static_cast<int8_t>(1 + i));
  }
  const int8x16_t w = vdupq_n_s8(3);
  for (int64_t it = 0; it < iters; ++it) {
    // Unrolled so every chain lives in a register (no store/reload between steps).
#pragma GCC unroll 16
    for (int i = 0; i < 12; ++i) {
      opaque(x[i]);
      acc[i] = vdotq_s32(acc[i], x[i], w);
    }
  }
  int32x4_t s = acc[0];
  for (int i = 1; i < 12; ++i) s = vaddq_s32(s, acc[i]);
  return static_cast<float>(vgetq_lane_s32(s, 0));
}

// Without the dot-product extension: widening multiply-accumulate (smlal), 8 per step.
float int8_smlal(int64_t iters) {
  int16x8_t acc[12];
  int8x16_t x[12];
  for (int i = 0; i < 12; ++i) {
    acc[i] = vdupq_n_s16(0);
    x[i] = vdupq_n_s8(static_cast<int8_t>(1 + i));
  }
  const int8x8_t w = vdup_n_s8(3);
  for (int64_t it = 0; it < iters; ++it) {
    // Unrolled so every chain lives in a register (no store/reload between steps).
#pragma GCC unroll 16
    for (int i = 0; i < 12; ++i) {
      opaque(x[i]);
      acc[i] = vmlal_s8(acc[i], vget_low_s8(x[i]), w);
    }
  }
  int16x8_t s = acc[0];
  for (int i = 1; i < 12; ++i) s = vaddq_s16(s, acc[i]);
  return static_cast<float>(vgetq_lane_s16(s, 0));
}

bool has_dotprod() {
#if defined(__linux__)
  return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
#else
  return false;
#endif
}

Kernel f32_kernel() { return {"neon fmla (16 chains x 4 lanes)", 16.0 * 4 * 2, f32_neon}; }
Kernel int8_kernel() {
  if (has_dotprod()) return {"neon sdot (12 chains x 16 bytes)", 12.0 * 16 * 2, int8_sdot};
  return {"neon smlal (12 chains x 8 lanes)", 12.0 * 8 * 2, int8_smlal};
}
Kernel int8_i16acc_kernel() { return int8_kernel(); }  // sdot needs no other sequence
Kernel int8_vnni_kernel() { return int8_kernel(); }
Kernel int8_avx512_vnni_kernel() { return int8_kernel(); }

#else

float f32_scalar(int64_t iters) {
  float a[8];
  for (int i = 0; i < 8; ++i) a[i] = 0.001f * static_cast<float>(i);
  for (int64_t it = 0; it < iters; ++it)
#pragma GCC unroll 16
    for (int i = 0; i < 8; ++i) a[i] = a[i] * 0.999999f + 1e-7f;
  float s = 0;
  for (float v : a) s += v;
  return s;
}
float int8_scalar(int64_t iters) {
  volatile int8_t x = 3;
  int32_t acc[8] = {};
  for (int64_t it = 0; it < iters; ++it)
#pragma GCC unroll 16
    for (int i = 0; i < 8; ++i) acc[i] += static_cast<int32_t>(x) * (i + 1);
  return static_cast<float>(acc[0] + acc[7]);
}
Kernel f32_kernel() { return {"scalar (8 chains)", 8.0 * 2, f32_scalar}; }
Kernel int8_kernel() { return {"scalar (8 chains)", 8.0 * 2, int8_scalar}; }
Kernel int8_i16acc_kernel() { return int8_kernel(); }
Kernel int8_vnni_kernel() { return int8_kernel(); }
Kernel int8_avx512_vnni_kernel() { return int8_kernel(); }

#endif

std::atomic<float> g_sink{0};

// Every thread runs batches of the kernel until the deadline; the figure is the total work
// over the wall time of the slowest thread.
PeakFigure measure(const Kernel& k, int threads, double seconds) {
  if (threads < 1) threads = 1;
  using clock = std::chrono::steady_clock;
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<int64_t> batches(static_cast<size_t>(threads), 0);
  std::vector<std::thread> pool;
  const auto body = [&](int t) {
    ready.fetch_add(1);
    while (!go.load()) std::this_thread::yield();
    const auto end = clock::now() + std::chrono::duration<double>(seconds);
    float acc = 0;
    int64_t n = 0;
    do {
      acc += k.run(kInnerIters);
      ++n;
    } while (clock::now() < end);
    batches[static_cast<size_t>(t)] = n;
    g_sink.store(acc);
  };
  for (int t = 0; t < threads; ++t) pool.emplace_back(body, t);
  while (ready.load() < threads) std::this_thread::yield();
  const auto t0 = clock::now();
  go.store(true);
  for (auto& th : pool) th.join();
  const double wall = std::chrono::duration<double>(clock::now() - t0).count();
  PeakFigure f;
  f.isa = k.isa;
  f.threads = threads;
  f.seconds = wall;
  for (int64_t n : batches) f.ops += static_cast<double>(n) * kInnerIters * k.ops_per_iter;
  return f;
}

}  // namespace

PeakFigure measure_f32_fma_peak(int threads, double seconds) { return measure(f32_kernel(), threads, seconds); }
PeakFigure measure_int8_dot_peak(int threads, double seconds) { return measure(int8_kernel(), threads, seconds); }
PeakFigure measure_int8_dot_i16acc_peak(int threads, double seconds) {
  return measure(int8_i16acc_kernel(), threads, seconds);
}
bool has_int8_vnni() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("avxvnni");
#else
  return false;
#endif
}
PeakFigure measure_int8_dot_vnni_peak(int threads, double seconds) {
  return measure(int8_vnni_kernel(), threads, seconds);
}
PeakFigure measure_int8_dot_avx512_vnni_peak(int threads, double seconds) {
  return measure(int8_avx512_vnni_kernel(), threads, seconds);
}

}  // namespace nlbench
