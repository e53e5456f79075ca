// nl_bench_vulkan_products: the frozen products of one model on the vulkan engine beside the
// cpu engine, per projection, token count and precision mode. For each it prints the wall
// time per product seen by the host (submit to wait, transfers included) as GFLOP/s, and for
// vulkan also the device time (timestamp queries around the product's command buffer).
//   nl_bench_vulkan_products --model M.gguf [--projs q,down,output] [--tokens 64,256]
//                            [--precision f32,f16,int8] [--reps 5] [--threads 0]
//                            [--engines cpu,vulkan] [--jsonl FILE]
// On lavapipe (Mesa's software Vulkan device) the "GPU" is the same CPU cores: its figures
// say nothing about a real GPU.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "nightlora/engine/frozen_engine.h"
#include "nightlora/modelio/model.h"
#include "nightlora/quant/qtype.h"
#include "nightlora/util/error.h"

namespace bench_vulkan_products {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

nl::WeightHandle handle_for(const nl::FrozenEngine& e, const std::string& proj) {
  if (proj == "output") return e.output_handle();
  for (int p = 0; p < nl::kNumProj; ++p)
    if (proj == nl::proj_name(static_cast<nl::Proj>(p))) return e.handle(0, static_cast<nl::Proj>(p));
  nl::fail("--projs " + proj, "unknown projection", "use q,k,v,o,gate,up,down or output");
}

// The model's tensor behind a projection name (for its type).
const nl::TensorView& weight_for(const nl::Model& m, const std::string& proj) {
  if (proj == "output") return m.weights.output.present() ? m.weights.output : m.weights.tok_embd;
  for (int p = 0; p < nl::kNumProj; ++p)
    if (proj == nl::proj_name(static_cast<nl::Proj>(p))) return m.weights.layers[0].proj(static_cast<nl::Proj>(p));
  nl::fail("--projs " + proj, "unknown projection", "use q,k,v,o,gate,up,down or output");
}

struct Timing {
  double wall_s = 0;    // median host time per product (submit .. wait)
  double device_s = 0;  // median device time per product (0: not measured)
};

Timing time_product(nl::FrozenEngine& e, nl::WeightHandle h, bool input_grad, int64_t T, nl::Precision p, int reps) {
  const int64_t in_len = input_grad ? e.rows(h) : e.cols(h), out_len = input_grad ? e.cols(h) : e.rows(h);
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> in(static_cast<size_t>(T * in_len)), out(static_cast<size_t>(T * out_len));
  for (float& v : in) v = nd(rng);
  std::vector<double> wall, device;
  for (int r = 0; r <= reps; ++r) {  // the first is a warm-up (buffers grow, pipelines warm)
    const nl::EngineDeviceTime before = e.device_time();
    const auto t0 = std::chrono::steady_clock::now();
    e.wait(input_grad ? e.submit_input_grad(h, in.data(), T, out.data(), p) : e.submit_forward(h, in.data(), T, out.data(), p));
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const nl::EngineDeviceTime after = e.device_time();
    if (r == 0) continue;
    wall.push_back(s);
    if (after.measured)
      device.push_back(input_grad ? after.input_grad_s - before.input_grad_s : after.forward_s - before.forward_s);
  }
  auto median = [](std::vector<double> v) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  return {median(wall), median(device)};
}

}  // namespace bench_vulkan_products

int bench_vulkan_products_main(int argc, char** argv) {
  using namespace bench_vulkan_products;
  CLI::App app{"Frozen products on the vulkan engine beside the cpu engine."};
  std::string model_path, projs = "q,down,output", tokens = "64,256", precisions = "f32,f16,int8", engines = "cpu,vulkan",
                          jsonl;
  int reps = 5, threads = 0;
  app.add_option("--model", model_path, "GGUF file or Hugging Face folder")->required();
  app.add_option("--projs", projs, "projections of layer 0 (q,k,v,o,gate,up,down) and/or output");
  app.add_option("--tokens", tokens, "token counts (comma-separated)");
  app.add_option("--precision", precisions, "precision modes: f32,f16,int8");
  app.add_option("--engines", engines, "engines to compare: cpu,vulkan");
  app.add_option("--reps", reps, "timed repetitions (median), after one warm-up")->check(CLI::PositiveNumber);
  app.add_option("--threads", threads, "cpu engine threads (0: all cores)");
  app.add_option("--jsonl", jsonl, "also write one JSON object per row to this file");
  CLI11_PARSE(app, argc, argv);
  try {
    const auto model = nl::Model::load(model_path);
    std::vector<std::unique_ptr<nl::FrozenEngine>> es;
    for (const std::string& name : split(engines)) {
      nl::EngineOptions o;
      o.backend = name;
      o.threads = threads;
      const auto t0 = std::chrono::steady_clock::now();
      es.push_back(nl::make_engine(*model, o));
      std::printf("engine %s: %s, %d threads, loaded in %.2f s, %.1f MiB resident weights\n", name.c_str(),
                  es.back()->isa().c_str(), es.back()->threads(),
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                  static_cast<double>(es.back()->resident_weight_bytes()) / (1 << 20));
    }
    std::ofstream js;
    if (!jsonl.empty()) js.open(jsonl);
    std::printf("\n| proj | out x in | type | T | precision | engine | fwd ms | fwd GFLOP/s | dX ms | dX GFLOP/s | "
                "device fwd ms | device dX ms |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (const std::string& proj : split(projs))
      for (const std::string& tok : split(tokens))
        for (const std::string& prec : split(precisions))
          for (auto& e : es) {
            const int64_t T = std::stoll(tok);
            const nl::Precision p = nl::parse_precision(prec);
            const nl::WeightHandle h = handle_for(*e, proj);
            const double flop = 2.0 * static_cast<double>(e->rows(h)) * static_cast<double>(e->cols(h)) * T;
            const Timing f = time_product(*e, h, false, T, p, reps), g = time_product(*e, h, true, T, p, reps);
            const nl::TensorView& w = weight_for(*model, proj);
            auto dev = [](double s) { return s > 0 ? std::to_string(s * 1e3).substr(0, 7) : std::string("-"); };
            std::printf("| %s | %lld x %lld | %s | %lld | %s | %s | %.3f | %.1f | %.3f | %.1f | %s | %s |\n", proj.c_str(),
                        static_cast<long long>(e->rows(h)), static_cast<long long>(e->cols(h)), nl::qtype_name(w.type),
                        static_cast<long long>(T), prec.c_str(), e->backend().c_str(), f.wall_s * 1e3,
                        flop / f.wall_s * 1e-9, g.wall_s * 1e3, flop / g.wall_s * 1e-9, dev(f.device_s).c_str(),
                        dev(g.device_s).c_str());
            if (js)
              js << "{\"proj\":\"" << proj << "\",\"out\":" << e->rows(h) << ",\"in\":" << e->cols(h) << ",\"type\":\""
                 << nl::qtype_name(w.type) << "\",\"T\":" << T << ",\"precision\":\"" << prec << "\",\"engine\":\""
                 << e->backend() << "\",\"fwd_s\":" << f.wall_s << ",\"dx_s\":" << g.wall_s
                 << ",\"device_fwd_s\":" << f.device_s << ",\"device_dx_s\":" << g.device_s << "}\n";
          }
  } catch (const nl::Error& err) {
    std::fprintf(stderr, "error: %s\n", err.what());
    return 1;
  }
  return 0;
}
