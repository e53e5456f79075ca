// `nightlora convert HF_DIR out.gguf [--type f16]`: writes a Hugging Face model folder (or
// any model nightlora loads) as a llama.cpp-compatible GGUF file.
#include <iostream>
#include <memory>
#include <string>

#include "command.h"
#include "nightlora/modelio/convert.h"
#include "nightlora/modelio/model.h"
#include "nightlora/quant/qtype.h"

namespace {

struct ConvertArgs {
  std::string input;
  std::string output;
  std::string type = "f16";
};

nlcli::Register reg_convert(
    "convert", "Convert a Hugging Face model folder to a llama.cpp-compatible GGUF file",
    [](CLI::App& sub) -> nlcli::Run {
      auto a = std::make_shared<ConvertArgs>();
      sub.add_option("input", a->input, "Hugging Face folder (config.json, model.safetensors, tokenizer.json) or GGUF file")
          ->required();
      sub.add_option("output", a->output, "GGUF file to write (written atomically; replaced if it exists)")->required();
      sub.add_option("-t,--type", a->type,
                     "type of the weight matrices: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_K, q5_K, q6_K, or llama.cpp's mix q4_K_M / q5_K_M "
                     "(norms and biases stay f32; matrices whose rows do not fit the block size take llama.cpp's fallback: q4_K -> q5_0, q5_K -> q5_1, q6_K -> q8_0, else f16)")
          ->capture_default_str();
      return [a]() {
        const nl::QuantTarget target = nl::parse_quant_target(a->type);
        auto model = nl::Model::load(a->input);
        const nl::GgufModelWriteReport r = nl::convert_model_to_gguf(*model, a->output, target);
        std::cout << "converted " << a->input << " (" << model->source_format << ", " << nl::arch_name(model->config.arch)
                  << ") -> " << a->output << "\n";
        for (const auto& [t, n] : r.tensors_by_type) std::cout << "  " << n << " tensors " << t << "\n";
        std::cout << "  " << r.tensor_bytes << " bytes of tensor data\n";
        if (!r.fallbacks.empty()) {
          std::cerr << "note: " << r.fallbacks.size() << " tensors written as another type (as llama.cpp's quantizer does) "
                    << "because their rows are not whole blocks of the type asked for:";
          for (const auto& f : r.fallbacks) std::cerr << " " << f.tensor << " (" << nl::qtype_name(f.type) << ")";
          std::cerr << "\n";
        }
        if (r.vocab_padding > 0)
          std::cerr << "note: padded the vocabulary with " << r.vocab_padding << " placeholder tokens to the embedding's "
                    << model->config.vocab << " rows\n";
        return 0;
      };
    });

}  // namespace
