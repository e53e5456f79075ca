// nl_eval and nl_eval_text*: `nightlora eval` (cli/cmd_eval.cpp) on the resident model: the
// same data (a JSONL file read as training reads it, or raw text in strided windows,
// eval/text_windows.h), the adapters stacked as the CLI stacks them, the held-out scorer of
// eval/heldout_loss.h on the model's own engine (borrowed, under a serving turn for the whole
// evaluation).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <optional>
#include <string>

#include "capi/objects.h"
#include "nightlora/data/dataset.h"
#include "nightlora/engine/engine_turns.h"
#include "nightlora/eval/heldout_loss.h"
#include "nightlora/eval/text_windows.h"
#include "nightlora/modelio/model.h"

using namespace nl::capi;

namespace {

// The first version's nl_eval_options ended before `stride`.
const size_t kEvalOptionsV1 = offsetof(nl_eval_options, stride);
std::string text_or(const char* s, const char* dflt) { return s ? std::string(s) : std::string(dflt); }

// One evaluation's inputs, checked: the model and adapters held for the call, the options.
struct Evaluation {
  std::shared_ptr<nl_model> model;
  std::vector<std::shared_ptr<nl_adapter>> held;
  nl_eval_options options;
  const nl::Model& m() const { return model->resident->model(); }
};

Evaluation start_evaluation(nl_model* model, const nl_eval_options* options, nl_eval_result* out, const char* fn) {
  Evaluation e{models().get(model, fn), {}, {}};
  require(out, fn, "out");
  std::memset(out, 0, sizeof(*out));
  e.options = options_or_defaults(options, nl_eval_options_init, kEvalOptionsV1, fn);
  e.held = held_adapters(e.options.adapters, e.options.n_adapters, model, fn);
  if (e.options.batch_tokens < 1) nl::fail(fn, "batch_tokens must be at least 1");
  const std::string precision = text_or(e.options.precision, "f32");
  if (precision != "f32" && precision != "f16" && precision != "int8")
    nl::fail(fn, "precision '" + precision + "' is not one of f32, f16, int8");
  if (!e.m().tokenizer)
    nl::fail(e.model->resident->path(), "the model has no tokenizer", "eval reads text, so the model needs one");
  return e;
}

// Scores `data` as `nightlora eval` does and fills the loss, perplexity and supervised tokens.
void score(const Evaluation& e, const nl::Dataset& data, nl_eval_result* out) {
  nl::ResidentModel& rm = *e.model->resident;
  std::optional<nl::LoraAdapter> adapter;
  if (!e.held.empty()) adapter = stacked(e.held);  // as the CLI: stacked even when there is one
  nl::HeldoutOptions hopt;
  hopt.precision = nl::parse_precision(text_or(e.options.precision, "f32"));
  hopt.max_batch_tokens = e.options.batch_tokens;
  nl::HeldoutLoss h;
  {
    nl::EngineTurns::Turn turn = rm.turns().serve();
    nl::HeldoutScorer scorer(rm.model(), rm.engine(), hopt);
    h = scorer.score(adapter ? &*adapter : nullptr, data);
  }
  int64_t supervised = 0;
  for (const nl::ExampleLoss& x : h.examples) supervised += x.n_supervised;
  out->loss = h.mean();
  out->perplexity = std::exp(out->loss);
  out->supervised_tokens = supervised;
}

// `nightlora eval --text`: the windows over the text's tokens, scored.
void eval_text_tokens(const Evaluation& e, const std::vector<int32_t>& tokens, const std::string& source,
                      nl_eval_result* out, const char* fn) {
  if (e.options.stride < 0) nl::fail(fn, "stride must be 0 (half of seq_len) or more");
  nl::TextWindowOptions w;
  w.seq_len = e.options.seq_len;
  w.stride = e.options.stride > 0 ? e.options.stride : std::max<int64_t>(1, e.options.seq_len / 2);  // the CLI's default
  const nl::Dataset windows = nl::text_windows(tokens, w, source);
  score(e, windows, out);
  out->examples = static_cast<int64_t>(windows.examples.size());
  out->skipped = 0;
  out->tokens = static_cast<int64_t>(tokens.size());
}

}  // namespace

extern "C" {

NL_API void nl_eval_options_init(nl_eval_options* o) {
  if (!o) return;
  std::memset(o, 0, sizeof(*o));
  o->struct_size = sizeof(*o);
  // `nightlora eval`'s defaults.
  o->seq_len = 512;
  o->batch_tokens = 512;
  o->train_on = "completion";
  o->long_examples = "truncate";
  o->precision = "f32";
  o->stride = 0;
}

NL_API nl_status nl_eval(nl_model* model, const char* data_path, const nl_eval_options* options, nl_eval_result* out) {
  return api_call([&] {
    const char* fn = "nl_eval";
    require(data_path, fn, "data_path");
    const Evaluation e = start_evaluation(model, options, out, fn);
    nl::DataOptions dopt;
    dopt.train_on = nl::parse_train_on(text_or(e.options.train_on, "completion"));
    dopt.long_examples = nl::parse_long_examples(text_or(e.options.long_examples, "truncate"));
    dopt.max_tokens = e.options.seq_len;
    const nl::Dataset data = nl::load_jsonl_dataset(data_path, *e.m().tokenizer, dopt);
    if (data.examples.empty()) nl::fail(data.source, "no example to compute a held-out loss on");
    score(e, data, out);
    out->examples = static_cast<int64_t>(data.examples.size());
    out->skipped = data.n_skipped();
    out->tokens = data.n_tokens();
  });
}

NL_API nl_status nl_eval_text_file(nl_model* model, const char* text_path, const nl_eval_options* options,
                                   nl_eval_result* out) {
  return api_call([&] {
    const char* fn = "nl_eval_text_file";
    require(text_path, fn, "text_path");
    const Evaluation e = start_evaluation(model, options, out, fn);
    eval_text_tokens(e, nl::load_text_tokens(text_path, *e.m().tokenizer), text_path, out, fn);
  });
}

NL_API nl_status nl_eval_text(nl_model* model, const char* text, size_t text_len, const nl_eval_options* options,
                              nl_eval_result* out) {
  return api_call([&] {
    const char* fn = "nl_eval_text";
    if (text_len > 0) require(text, fn, "text");
    const Evaluation e = start_evaluation(model, options, out, fn);
    eval_text_tokens(e, nl::text_tokens(std::string(text ? text : "", text_len), *e.m().tokenizer), "nl_eval_text", out,
                     fn);
  });
}

}  // extern "C"
