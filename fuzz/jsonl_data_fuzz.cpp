// Fuzz target: training data (`train --data FILE`): JSONL in the three formats (text,
// prompt/completion, messages), or one JSON array, tokenized with the real tinystories-656k
// tokenizer (../shared). The first two bytes choose the options (train-on, the token cap,
// long examples, bad lines, the chat format for messages); the rest is the file.
// Every example the loader keeps must honour what dataset.h promises: tokens within the cap,
// one supervision flag per token, the first token never a target, at least one target.
#include <cstdint>
#include <memory>
#include <string>

#include "fuzz_util.h"
#include "nightlora/data/dataset.h"
#include "nightlora/tokenizer/tokenizer.h"

namespace {

const nl::Tokenizer& tokenizer() {
  static const std::unique_ptr<nl::Tokenizer> tok = nl::Tokenizer::from_hf_dir(
      nlfuzz::require_file(nlfuzz::shared_dir() / "models/tinystories-656k", "tinystories-656k").string());
  return *tok;
}

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "nlfuzz: FINDING: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)tokenizer();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  static constexpr nl::ChatFormat kFormats[] = {nl::ChatFormat::ChatML, nl::ChatFormat::Llama3, nl::ChatFormat::Qwen2,
                                                nl::ChatFormat::Qwen25, nl::ChatFormat::Qwen3, nl::ChatFormat::Llama31};
  nl::DataOptions opt;
  opt.train_on = (data[0] & 1) ? nl::TrainOn::All : nl::TrainOn::Completion;
  opt.long_examples = static_cast<nl::LongExamples>(((data[0] >> 1) & 3) % 3);
  opt.bad_lines = (data[0] & 8) ? nl::BadLines::Error : nl::BadLines::Skip;
  opt.chat_format = kFormats[(data[0] >> 4) % 6];
  opt.max_tokens = 2 + data[1] * 4;  // 2 .. 1022
  const std::string_view text(reinterpret_cast<const char*>(data + 2), size - 2);
  nlfuzz::run_guarded([&] {
    const nl::Dataset d = nl::parse_jsonl_dataset(text, "train.jsonl", tokenizer(), opt);
    if (d.examples.empty()) finding("a data set with no example was accepted");
    for (const nl::Example& e : d.examples) {
      if (static_cast<int64_t>(e.tokens.size()) > opt.max_tokens) finding("an example exceeds max_tokens");
      if (e.supervised.size() != e.tokens.size()) finding("supervised flags and tokens differ in number");
      if (e.supervised.empty() || e.supervised[0] != 0) finding("the first token is a target");
      if (e.n_supervised() < 1) finding("an example with nothing to train on was kept");
      for (int32_t id : e.tokens)
        if (id < 0 || id >= tokenizer().vocab_size()) finding("a token id outside the vocabulary");
    }
    (void)d.describe_skipped();
    (void)d.describe_ignored_keys();
  });
  return 0;
}
