// The sampling options `generate` and `chat` share, named and defaulted as llama.cpp's
// (common/common.h: temp 0.8, top-k 40, top-p 0.95, min-p 0.05, repeat-penalty 1.0,
// repeat-last-n 64), with the defaults shown in --help.
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "nightlora/infer/sampler.h"

namespace nlcli {

struct SamplingArgs {
  nl::SamplerOptions opt;  // llama.cpp's defaults
  bool seed_given = false;
  std::vector<std::string> stop;

  // The sampler options, with a random seed when none was given.
  nl::SamplerOptions resolved() const {
    nl::SamplerOptions o = opt;
    if (!seed_given) o.seed = std::random_device{}();
    return o;
  }
};

inline void add_sampling_options(CLI::App& sub, const std::shared_ptr<SamplingArgs>& a) {
  nl::SamplerOptions& o = a->opt;
  sub.add_option("--temp", o.temperature, "temperature; 0 = greedy")->check(CLI::Range(0.0f, 100.0f))->capture_default_str();
  sub.add_option("--top-k", o.top_k, "sample among the k most likely tokens (0 = all)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  sub.add_option("--top-p", o.top_p, "nucleus sampling threshold in (0, 1] (1 = off)")
      ->check(CLI::Range(0.0f, 1.0f))
      ->capture_default_str();
  sub.add_option("--min-p", o.min_p, "drop tokens less likely than this times the most likely one (0 = off)")
      ->check(CLI::Range(0.0f, 1.0f))
      ->capture_default_str();
  sub.add_option("--repeat-penalty", o.repeat_penalty,
                 "divide (positive) or multiply (negative) the logits of recent tokens by this (1 = off)")
      ->check(CLI::Range(0.0f, 100.0f))
      ->capture_default_str();
  sub.add_option("--repeat-last-n", o.repeat_last_n,
                 "recent tokens (prompt included) the repetition penalty looks at (0 = off, -1 = the whole context)")
      ->check(CLI::Range(-1, 1 << 30))
      ->capture_default_str();
  sub.add_option("--stop", a->stop, "end the text at this string, not printed (repeatable)");
  sub.add_option_function<uint64_t>(
      "-s,--seed", [a](const uint64_t& s) { a->opt.seed = s, a->seed_given = true; },
      "random seed (same seed and options, same text; default: random)");
}

}  // namespace nlcli
