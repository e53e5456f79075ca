// `nightlora quantize in.gguf out.gguf --type q4_K`: converts a GGUF model's weight
// matrices to another tensor type and prints what happened to each tensor.
#include <iostream>
#include <memory>
#include <string>

#include "command.h"
#include "nightlora/modelio/quantize_model.h"
#include "nightlora/quant/qtype.h"

namespace {

struct QuantizeArgs {
  std::string input;
  std::string output;
  std::string type;
  bool quiet = false;
  int threads = 0;
};

nlcli::Register reg_quantize(
    "quantize", "Convert a GGUF model's weight matrices to another type (q4_0, q8_0, q4_K, q6_K, f16, ...)",
    [](CLI::App& sub) -> nlcli::Run {
      auto a = std::make_shared<QuantizeArgs>();
      sub.add_option("input", a->input, "GGUF model to read")->required();
      sub.add_option("output", a->output, "GGUF file to write (written atomically; replaced if it exists)")->required();
      sub.add_option("-t,--type", a->type,
                     "target: a type for every matrix (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_K, q5_K, q6_K) or "
                     "llama.cpp's mix q4_K_M / q5_K_M (q6_K head, attn_v and ffn_down q6_K in some layers)")
          ->required();
      sub.add_option("--threads", a->threads, "worker threads (0: one per hardware thread)")->check(CLI::NonNegativeNumber);
      sub.add_flag("-q,--quiet", a->quiet, "print only the totals, not one line per tensor");
      return [a]() {
        const nl::QuantTarget target = nl::parse_quant_target(a->type);  // throws a clear nl::Error for a bad name
        const nl::QuantizeSummary s = nl::quantize_gguf(a->input, a->output, target, a->threads);
        std::cout << "quantized " << a->input << " -> " << a->output << "\n"
                  << nl::format_quantize_summary(s, !a->quiet);
        return 0;
      };
    });

}  // namespace
