// `nightlora synth-model --preset NAME --type TYPE out.gguf`: a random-weight model with the
// exact shapes of a real model (or a tiny test model), for benchmarks, memory and tests.
#include <iostream>
#include <memory>
#include <string>

#include "command.h"
#include "nightlora/modelio/synth.h"
#include "nightlora/quant/qtype.h"

namespace {

struct SynthArgs {
  std::string output;
  std::string preset;
  std::string type = "f16";
  uint64_t seed = 0;
  int64_t layers = 0;
  std::string tokenizer;
  bool list = false;
};

std::string preset_names() {
  std::string s;
  for (const auto& p : nl::synth_presets()) s += (s.empty() ? "" : ", ") + p.name;
  return s;
}

nlcli::Register reg_synth(
    "synth-model", "Write a random-weight GGUF model with the shapes of a real model (or a tiny test model)",
    [](CLI::App& sub) -> nlcli::Run {
      auto a = std::make_shared<SynthArgs>();
      sub.add_option("output", a->output, "GGUF file to write");
      sub.add_option("-p,--preset", a->preset, "model shapes: " + preset_names());
      sub.add_option("-t,--type", a->type, "type of the weight matrices (f32, f16, bf16, q8_0, q4_0, q4_K, ...)")->capture_default_str();
      sub.add_option("--seed", a->seed, "seed of the random weights")->capture_default_str();
      sub.add_option("--layers", a->layers, "override the number of decoder blocks")->check(CLI::Range(int64_t{1}, int64_t{4096}));
      sub.add_option("--tokenizer", a->tokenizer,
                     "folder with tokenizer.json (or the file), or 'generated'; default: the real tokenizer of the preset's "
                     "family from tools/js/node_modules when present, else a generated one");
      sub.add_flag("--list", a->list, "list the presets and exit");
      return [a]() {
        if (a->list) {
          for (const auto& p : nl::synth_presets()) {
            const auto& c = p.config;
            std::cout << p.name << ": " << p.description << " (" << nl::arch_name(c.arch) << ", d_model " << c.d_model
                      << ", " << c.n_layer << " layers, " << c.n_head << "/" << c.n_kv_head << " heads, head_dim " << c.head_dim
                      << ", ffn " << c.d_ff << ", vocab " << c.vocab << ")\n";
          }
          return 0;
        }
        if (a->preset.empty() || a->output.empty()) {
          std::cerr << "nightlora synth-model: --preset and an output file are required (presets: " << preset_names() << ")\n";
          return 2;
        }
        nl::SynthOptions o;
        o.preset = a->preset;
        o.type = nl::parse_quant_target(a->type);
        o.seed = a->seed;
        o.layers = a->layers;
        o.tokenizer = a->tokenizer;
        nl::SynthResult r = nl::synth_model(a->output, o, [](const std::string& s) { std::cerr << s << "\n"; });
        const auto& c = r.config;
        std::cout << "wrote " << a->output << ": preset " << a->preset << " (" << nl::arch_name(c.arch) << ", " << c.n_layer
                  << " layers, d_model " << c.d_model << ", vocab " << c.vocab << "), seed " << a->seed << "\n";
        for (const auto& [t, n] : r.report.tensors_by_type) std::cout << "  " << n << " tensors " << t << "\n";
        std::cout << "  " << r.report.tensor_bytes << " bytes of tensor data\n";
        std::cout << "  tokenizer: " << r.tokenizer_source << "\n";
        return 0;
      };
    });

}  // namespace
