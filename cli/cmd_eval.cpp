// `nightlora eval --model M [--adapter A[:SCALE] ...] --data test.jsonl [--json]`: the mean
// loss and perplexity of the model (with the adapters applied) on the supervised tokens of any
// data `train` reads, computed by the training step's own forward pass (in f32 it equals the
// training loss on the same examples), several examples per forward (heldout_loss.h).
// `--text FILE` instead: the perplexity of raw text read in windows of --seq-len tokens that
// start --stride tokens apart, each token scored once (eval/text_windows.h), as llama-perplexity
// and Hugging Face's strided evaluation do.
// --precision int8 runs the frozen products in int8: faster, the loss moves by a little.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "command.h"
#include "nightlora/data/dataset.h"
#include "nightlora/eval/heldout_loss.h"
#include "nightlora/eval/text_windows.h"
#include "nightlora/host/adapter_spec.h"
#include "nightlora/modelio/model.h"
#include "nightlora/tokenizer/tokenizer.h"
#include "nightlora/util/error.h"

namespace {

struct EvalArgs {
  std::string model, data, text, train_on = "completion", long_examples = "truncate", precision = "f32";
  std::vector<std::string> adapters;
  int64_t seq_len = 512;
  int64_t stride = 0;  // 0: half of seq_len
  int64_t batch_tokens = 512;
  int threads = 0;
  bool json = false;
};

int run_eval(const EvalArgs& a) {
  nl::DataOptions dopt;
  dopt.train_on = nl::parse_train_on(a.train_on);
  dopt.long_examples = nl::parse_long_examples(a.long_examples);
  dopt.max_tokens = a.seq_len;
  std::vector<nl::AdapterSpec> specs;
  for (const std::string& s : a.adapters) specs.push_back(nl::parse_adapter_spec(s));

  std::unique_ptr<nl::Model> model = nl::Model::load(a.model);
  if (!model->tokenizer) nl::fail(a.model, "the model has no tokenizer", "eval reads text, so the model needs one");
  nl::TextWindowOptions wopt;
  wopt.seq_len = a.seq_len;
  wopt.stride = a.stride > 0 ? a.stride : std::max<int64_t>(1, a.seq_len / 2);
  const bool text = !a.text.empty();
  const std::string source = text ? a.text : a.data;
  const std::vector<int32_t> text_tokens = text ? nl::load_text_tokens(a.text, *model->tokenizer) : std::vector<int32_t>{};
  const nl::Dataset data = text ? nl::text_windows(text_tokens, wopt, a.text)
                                : nl::load_jsonl_dataset(a.data, *model->tokenizer, dopt);
  if (data.n_skipped() > 0)
    std::fprintf(stderr, "nightlora: warning: %s: %lld left out: %s\n", source.c_str(),
                 static_cast<long long>(data.n_skipped()), data.describe_skipped().c_str());
  std::unique_ptr<nl::LoraAdapter> adapter;
  if (!specs.empty())
    adapter = std::make_unique<nl::LoraAdapter>(nl::stack_adapters(nl::load_scaled_adapters(specs, *model)));

  nl::HeldoutOptions hopt;
  hopt.threads = a.threads;
  hopt.precision = nl::parse_precision(a.precision);
  hopt.max_batch_tokens = a.batch_tokens;
  const nl::HeldoutLoss h = nl::heldout_loss(*model, adapter.get(), data, hopt);
  const double loss = h.mean();
  int64_t supervised = 0;
  for (const nl::ExampleLoss& e : h.examples) supervised += e.n_supervised;
  if (a.json) {
    nlohmann::json adapters = nlohmann::json::array();
    for (const nl::AdapterSpec& s : specs) adapters.push_back({{"path", s.path}, {"scale", s.scale}});
    nlohmann::json j = {{"model", a.model},      {"adapters", adapters},          {"precision", a.precision},
                        {"loss", loss},          {"perplexity", std::exp(loss)}};
    if (text) {
      // tokens: the text's tokens; windows: forwards of up to seq_len tokens; scored_tokens:
      // the tokens whose prediction counts (each once).
      j.update({{"text", a.text}, {"seq_len", wopt.seq_len}, {"stride", wopt.stride}, {"windows", data.examples.size()},
                {"tokens", text_tokens.size()}, {"scored_tokens", supervised}});
    } else {
      j.update({{"data", a.data}, {"examples", data.examples.size()}, {"skipped", data.n_skipped()},
                {"tokens", data.n_tokens()}, {"supervised_tokens", supervised}});
    }
    std::printf("%s\n", j.dump().c_str());
  } else if (text) {
    std::printf("%s: %zu tokens, %zu windows of up to %lld tokens, stride %lld, %lld tokens scored\nloss %.6f  perplexity %.4f\n",
                a.text.c_str(), text_tokens.size(), data.examples.size(), static_cast<long long>(wopt.seq_len),
                static_cast<long long>(wopt.stride), static_cast<long long>(supervised), loss, std::exp(loss));
  } else {
    std::printf("%s: %zu examples, %lld tokens, %lld supervised\nloss %.6f  perplexity %.4f\n", a.data.c_str(),
                data.examples.size(), static_cast<long long>(data.n_tokens()), static_cast<long long>(supervised), loss,
                std::exp(loss));
  }
  return h.finite() ? 0 : 3;  // a non-finite loss says the adapter (or model) is broken
}

nlcli::Register reg_eval(
    "eval", "Mean loss and perplexity on the supervised tokens of JSONL data, or of raw text (with optional adapters)",
    [](CLI::App& sub) -> nlcli::Run {
      auto a = std::make_shared<EvalArgs>();
      sub.add_option("-m,--model", a->model, "GGUF file or Hugging Face folder")->required();
      auto* data = sub.add_option("--data", a->data, "JSONL data in any format `train` reads");
      auto* text = sub.add_option("--text", a->text, "raw text file: perplexity in windows of --seq-len tokens, --stride apart");
      data->excludes(text);
      sub.add_option("--stride", a->stride,
                     "--text: tokens between window starts; each window scores only tokens no earlier one did (0 = "
                     "half of --seq-len)")
          ->check(CLI::NonNegativeNumber)
          ->capture_default_str();
      sub.add_option("--adapter,--lora", a->adapters,
                     "an adapter to apply, PATH[:SCALE] (repeatable; the adapters add up)");
      sub.add_option("--seq-len", a->seq_len, "maximum tokens per example (--text: per window)")->capture_default_str();
      sub.add_option("--long-examples", a->long_examples, "truncate, skip or error, as in train")
          ->capture_default_str();
      sub.add_option("--train-on", a->train_on, "completion or all, as in train")->capture_default_str();
      sub.add_option("-t,--threads", a->threads, "threads (0 = all cores)")->check(CLI::NonNegativeNumber);
      sub.add_option("--precision", a->precision,
                     "frozen products in f32 (the training step's validation arithmetic) or int8 (faster; the loss "
                     "moves by a little) or f16")
          ->check(CLI::IsMember({"f32", "f16", "int8"}))
          ->capture_default_str();
      sub.add_option("--batch-tokens", a->batch_tokens, "examples packed per forward, up to this many tokens")
          ->check(CLI::PositiveNumber)
          ->capture_default_str();
      sub.add_flag("--json", a->json, "one JSON object instead of text");
      return [a]() {
        if (a->data.empty() && a->text.empty()) nl::fail("eval", "nothing to evaluate", "give --data FILE.jsonl or --text FILE");
        return run_eval(*a);
      };
    });

}  // namespace
