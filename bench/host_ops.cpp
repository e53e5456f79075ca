// The host ops of one decoder block at a model's shapes (the work the step does outside
// the frozen products): attention forward and backward, the LoRA branch's four products on
// every projection, RMSNorm, SwiGLU, and the output head's loss over one chunk of rows. Prints each
// op's time (median of --reps), its GFLOP/s where it has a natural count, and the share of
// this machine's f32 FMA peak measured in the same run.
//   nl_bench_host_ops [--preset qwen2.5-0.5b] [--seq 256] [--rank 8] [--threads N] [--reps 7]
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "../src/host/ops.h"
#include "../src/host/tile_products.h"
#include "nightlora/host/lora.h"
#include "nightlora/modelio/synth.h"
#include "peak_kernels.h"

namespace bench_host_ops {

using Vec = std::vector<float>;

Vec random_vec(size_t n, uint32_t seed, float amp) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-amp, amp);
  Vec v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// Median wall time of fn over reps runs, after one untimed run.
double median_seconds(int reps, const std::function<void()>& fn) {
  fn();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto a = std::chrono::steady_clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// The median times of fn with the tile products' AVX-512 build (16-float slabs) and with
// their eight-float build, runs alternating (after one untimed run each): {wide, eight}.
// Where there is no AVX-512 build both are the eight-float time.
struct WidthTimes {
  double wide = 0, eight = 0;
};
WidthTimes median_seconds_by_width(int reps, const std::function<void()>& fn) {
  if (!nl::tile::wide_vectors_available()) {
    const double s = median_seconds(reps, fn);
    return {s, s};
  }
  std::vector<double> t[2];
  for (int i = -1; i < reps; ++i)
    for (int k = 0; k < 2; ++k) {
      const int narrow = (i + k) % 2 == 0 ? 1 : 0;  // alternate which goes first
      nl::tile::turn_wide_vectors_off(narrow == 1);
      const auto a = std::chrono::steady_clock::now();
      fn();
      if (i >= 0) t[narrow].push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
    }
  nl::tile::turn_wide_vectors_off(false);
  for (auto& v : t) std::sort(v.begin(), v.end());
  return {t[0][t[0].size() / 2], t[1][t[1].size() / 2]};
}

}  // namespace bench_host_ops

int bench_host_ops_main(int argc, char** argv) {
  using namespace bench_host_ops;
  CLI::App app{"Time the host ops of one decoder block (attention, LoRA branch, SwiGLU, loss) at a model's shapes"};
  std::string preset = "qwen2.5-0.5b";
  int64_t T = 256, rank = 8, loss_rows = 64;
  int threads = 0, reps = 7;
  app.add_option("--preset", preset, "model shapes (see nightlora synth-model --list)");
  app.add_option("--seq", T, "tokens (one sequence)")->check(CLI::Range(2, 65536));
  app.add_option("--rank", rank, "LoRA rank")->check(CLI::Range(int64_t{1}, nl::kMaxLoraRank));
  app.add_option("--loss-rows", loss_rows, "rows of one loss chunk")->check(CLI::PositiveNumber);
  app.add_option("-t,--threads", threads, "threads (0 = all cores)")->check(CLI::NonNegativeNumber);
  app.add_option("--reps", reps, "timed runs per op (the median is printed)")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  const nl::ModelConfig cfg = nl::find_synth_preset(preset).config;
  nl::ThreadPool pool(threads);
  const int n_threads = pool.size();
  const double peak = nlbench::measure_f32_fma_peak(n_threads, 0.5).per_second();
  std::printf("host ops of one %s block: seq %lld, rank %lld, %d threads; f32 FMA peak %.1f GFLOP/s\n", preset.c_str(),
              static_cast<long long>(T), static_cast<long long>(rank), n_threads, peak / 1e9);
  std::printf("%-34s %10s %10s %8s\n", "op", "ms", "GFLOP/s", "of peak");
  double total = 0;
  auto report = [&](const char* name, double s, double flops) {
    total += s;
    if (flops > 0)
      std::printf("%-34s %10.3f %10.1f %7.1f%%\n", name, s * 1e3, flops / s / 1e9, 100 * flops / s / peak);
    else
      std::printf("%-34s %10.3f %10s %8s\n", name, s * 1e3, "-", "-");
  };

  // Attention: causal, one sequence. Flops of the products only (the causal half of each
  // T x T x hd product): 2 in forward, 5 in backward.
  const int64_t hd = cfg.head_dim, qd = cfg.n_head * hd, kvd = cfg.n_kv_head * hd;
  const Vec q = random_vec(T * qd, 1, 1), k = random_vec(T * kvd, 2, 1), v = random_vec(T * kvd, 3, 1),
            dout = random_vec(T * qd, 4, 1);
  Vec out(T * qd), lse(T * cfg.n_head), dq(T * qd), dk(T * kvd), dv(T * kvd),
      scratch(nl::attn_scratch_floats(cfg.n_head, T, hd));
  const int64_t seq_start[2] = {0, T};
  nl::AttnShape as{T, cfg.n_head, cfg.n_kv_head, hd, seq_start, 1, scratch.data()};
  const double causal_product = 2.0 * cfg.n_head * hd * (T * (T + 1) / 2.0);
  // The attention and LoRA products with the tile products' AVX-512 build (the default where
  // the CPU has it) and, side by side, their eight-float build ("[8-float]" lines, not in
  // the total); the loss below too (its exponentials, same switch).
  const bool wide = nl::tile::wide_vectors_available();
  auto report_widths = [&](const char* name, WidthTimes s, double flops) {
    report(name, s.wide, flops);
    if (!wide) return;
    report((std::string("  ") + name + " [8-float]").c_str(), s.eight, flops);
    total -= s.eight;  // (the side-by-side line is not part of the block's total)
    std::printf("%-34s %10.3f   (8-float time / AVX-512 time)\n", "  ratio", s.eight / s.wide);
  };
  report_widths("attention forward", median_seconds_by_width(reps, [&] {
                  nl::attention_forward(as, q.data(), k.data(), v.data(), out.data(), lse.data(), pool);
                }), 2 * causal_product);
  report_widths("attention backward", median_seconds_by_width(reps, [&] {
                  nl::attention_backward(as, dout.data(), q.data(), k.data(), v.data(), out.data(), lse.data(),
                                         dq.data(), dk.data(), dv.data(), pool);
                }), 5 * causal_product);

  // The LoRA branch on the seven projections, summed: down (z = x·Aᵀ), up (y += z·Bᵀ),
  // parameter gradients (dB, dz, dA) and the input gradient (dx += dz·A).
  WidthTimes s_down, s_up, s_params, s_input;
  double sum_in = 0, sum_out = 0;
  const auto add = [](WidthTimes& a, WidthTimes b) { a.wide += b.wide, a.eight += b.eight; };
  for (int p = 0; p < nl::kNumProj; ++p) {
    auto [in, o] = nl::proj_shape(cfg, static_cast<nl::Proj>(p));
    const Vec A = random_vec(rank * in, 10 + p, 0.1f), B = random_vec(o * rank, 20 + p, 0.1f),
              x = random_vec(T * in, 30 + p, 1), dy = random_vec(T * o, 40 + p, 1);
    Vec z(T * rank), y(T * o), dz(T * rank), dA(rank * in), dB(o * rank), dx(T * in);
    const nl::LoraBranch L{A.data(), B.data(), rank, in, o, 2.0f, 0.0f, 0};
    add(s_down, median_seconds_by_width(reps, [&] { nl::lora_down(L, x.data(), T, z.data(), pool); }));
    add(s_up, median_seconds_by_width(reps, [&] { nl::lora_up_add(L, z.data(), T, y.data(), pool); }));
    add(s_params, median_seconds_by_width(reps, [&] {
          nl::lora_backward_params(L, x.data(), z.data(), dy.data(), T, dA.data(), dB.data(), nullptr, dz.data(),
                                   pool);
        }));
    add(s_input, median_seconds_by_width(reps, [&] { nl::lora_backward_input(L, dz.data(), T, dx.data(), pool); }));
    sum_in += static_cast<double>(in);
    sum_out += static_cast<double>(o);
  }
  const double per_width = 2.0 * static_cast<double>(T * rank);  // flops per input or output column
  report_widths("LoRA down, 7 projections", s_down, per_width * sum_in);
  report_widths("LoRA up, 7 projections", s_up, per_width * sum_out);
  report_widths("LoRA parameter grads, 7 projections", s_params, per_width * (2 * sum_out + sum_in));  // dB, dz; dA
  report_widths("LoRA input grad, 7 projections", s_input, per_width * sum_in);

  // RMSNorm over T rows of d_model (the block has two, plus the final one per loss chunk).
  const int64_t nd = T * cfg.d_model;
  const Vec xn_in = random_vec(nd, 45, 1), nw = random_vec(cfg.d_model, 46, 1), dyn = random_vec(nd, 47, 1);
  Vec yn(nd), rstd(T), dxn(nd);
  report("RMSNorm forward", median_seconds(reps, [&] {
           nl::rmsnorm_forward(xn_in.data(), nw.data(), T, cfg.d_model, 1e-6f, yn.data(), rstd.data(), pool);
         }), 0);
  report("RMSNorm backward", median_seconds(reps, [&] {
           nl::rmsnorm_backward(dyn.data(), xn_in.data(), nw.data(), rstd.data(), T, cfg.d_model, dxn.data(), pool);
         }), 0);

  // SwiGLU forward and backward over the MLP's T x d_ff.
  const int64_t nff = T * cfg.d_ff;
  const Vec g = random_vec(nff, 50, 4), u = random_vec(nff, 51, 1), dh = random_vec(nff, 52, 1);
  Vec h(nff), dg(nff), du(nff);
  report("SwiGLU forward", median_seconds(reps, [&] { nl::swiglu_forward(g.data(), u.data(), h.data(), nff, pool); }), 0);
  report("SwiGLU backward", median_seconds(reps, [&] {
           nl::swiglu_backward(dh.data(), g.data(), u.data(), dg.data(), du.data(), nff, pool);
         }), 0);

  // The loss over one chunk of rows of the vocabulary (the step runs T / loss-rows of them).
  const Vec logits0 = random_vec(loss_rows * cfg.vocab, 60, 8);
  Vec logits(logits0.size());
  std::vector<int32_t> labels(loss_rows);
  for (int64_t r = 0; r < loss_rows; ++r) labels[r] = static_cast<int32_t>((r * 7919) % cfg.vocab);
  std::vector<double> nll(loss_rows);
  const WidthTimes s_loss = median_seconds_by_width(reps, [&] {
    std::copy(logits0.begin(), logits0.end(), logits.begin());
    nl::cross_entropy_chunk(logits.data(), labels.data(), loss_rows, cfg.vocab, 1.0f, nll.data(), pool);
  });
  std::printf("%-34s %10.3f %10s %8s   (x %lld chunks per step of %lld tokens; includes copying the logits back)\n",
              "loss, one chunk", s_loss.wide * 1e3, "-", "-", static_cast<long long>((T + loss_rows - 1) / loss_rows),
              static_cast<long long>(T));
  if (wide)
    std::printf("%-34s %10.3f   (ratio %.3f)\n", "  loss, one chunk [8-float]", s_loss.eight * 1e3,
                s_loss.eight / s_loss.wide);
  std::printf("%-34s %10.3f   (one block, without the loss)\n", "total", total * 1e3);
  return 0;
}
