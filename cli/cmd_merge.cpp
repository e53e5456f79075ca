// `nightlora merge --model M --adapter A[:SCALE] [--adapter B:0.5 ...] --out merged.gguf
// [--type TYPE]`: folds LoRA adapters into the base weights (see nightlora/host/merge.h).
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "command.h"
#include "nightlora/host/adapter_spec.h"
#include "nightlora/host/merge.h"
#include "nightlora/modelio/model.h"
#include "nightlora/quant/qtype.h"

namespace {

struct MergeArgs {
  std::string model;
  std::vector<std::string> adapters;
  std::string out;
  std::string type;
  std::string format = "gguf";
  int threads = 0;
  bool quiet = false;
};

nlcli::Register reg_merge(
    "merge", "Fold LoRA adapters into a model's weights; write a GGUF file (or a Hugging Face folder)",
    [](CLI::App& sub) -> nlcli::Run {
      auto a = std::make_shared<MergeArgs>();
      sub.add_option("-m,--model", a->model, "base model: GGUF file or Hugging Face folder")->required();
      sub.add_option("--adapter,--lora", a->adapters,
                     "LoRA adapter as PATH[:SCALE] (PEFT folder or llama.cpp LoRA GGUF; scale default 1.0); repeatable")
          ->required()
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
      sub.add_option("-o,--out", a->out,
                     "GGUF file to write (atomically; replaced if it exists), or the folder for --format hf")
          ->required();
      sub.add_option("--format", a->format,
                     "gguf, or hf: a Hugging Face folder (model.safetensors, config.json, tokenizer files; needs a "
                     "Hugging Face folder as the base)")
          ->check(CLI::IsMember({"gguf", "hf"}));
      sub.add_option("-t,--type", a->type,
                     "type of the weight matrices: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_K, q5_K, q6_K "
                     "(default: each keeps the base's type; f32, f16 or bf16 with --format hf)");
      sub.add_option("--threads", a->threads, "worker threads (0: one per hardware thread)")->check(CLI::NonNegativeNumber);
      sub.add_flag("-q,--quiet", a->quiet, "print only the totals, not one line per tensor");
      return [a]() {
        std::vector<nl::AdapterSpec> specs;
        for (const std::string& s : a->adapters) specs.push_back(nl::parse_adapter_spec(s));
        nl::MergeOptions opt;
        if (!a->type.empty()) opt.type = nl::parse_qtype(a->type);
        opt.threads = a->threads;
        std::unique_ptr<nl::Model> model = nl::Model::load(a->model);
        const std::vector<nl::ScaledAdapter> adapters = nl::load_scaled_adapters(specs, *model);
        const nl::MergeSummary s = a->format == "hf" ? nl::merge_to_hf(*model, adapters, a->out, opt)
                                                     : nl::merge_to_gguf(*model, adapters, a->out, opt);
        std::cout << "merged " << adapters.size() << " adapter(s) into " << a->model << " -> " << a->out << "\n"
                  << nl::format_merge_summary(s, !a->quiet);
        return 0;
      };
    });

}  // namespace
