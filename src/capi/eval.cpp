// nl_eval: `nightlora eval` (cli/cmd_eval.cpp) on the resident model: the same data options,
// the adapters stacked as the CLI stacks them, the held-out scorer of eval/heldout_loss.h on
// the model's own engine (borrowed, under a serving turn for the whole evaluation).
#include <cmath>
#include <cstring>
#include <optional>
#include <string>

#include "capi/objects.h"
#include "nightlora/data/dataset.h"
#include "nightlora/engine/engine_turns.h"
#include "nightlora/eval/heldout_loss.h"
#include "nightlora/modelio/model.h"

using namespace nl::capi;

namespace {
const size_t kEvalOptionsV1 = sizeof(nl_eval_options);
std::string text_or(const char* s, const char* dflt) { return s ? std::string(s) : std::string(dflt); }
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
}

NL_API nl_status nl_eval(nl_model* model, const char* data_path, const nl_eval_options* options, nl_eval_result* out) {
  return api_call([&] {
    const char* fn = "nl_eval";
    std::shared_ptr<nl_model> m = models().get(model, fn);
    require(data_path, fn, "data_path");
    require(out, fn, "out");
    std::memset(out, 0, sizeof(*out));
    const nl_eval_options o = options_or_defaults(options, nl_eval_options_init, kEvalOptionsV1, fn);
    std::vector<std::shared_ptr<nl_adapter>> held = held_adapters(o.adapters, o.n_adapters, model, fn);
    if (o.batch_tokens < 1) nl::fail(fn, "batch_tokens must be at least 1");
    const std::string precision = text_or(o.precision, "f32");
    if (precision != "f32" && precision != "f16" && precision != "int8")
      nl::fail(fn, "precision '" + precision + "' is not one of f32, f16, int8");

    nl::DataOptions dopt;
    dopt.train_on = nl::parse_train_on(text_or(o.train_on, "completion"));
    dopt.long_examples = nl::parse_long_examples(text_or(o.long_examples, "truncate"));
    dopt.max_tokens = o.seq_len;
    nl::ResidentModel& rm = *m->resident;
    const nl::Model& mm = rm.model();
    if (!mm.tokenizer) nl::fail(rm.path(), "the model has no tokenizer", "eval reads text, so the model needs one");
    const nl::Dataset data = nl::load_jsonl_dataset(data_path, *mm.tokenizer, dopt);
    if (data.examples.empty()) nl::fail(data.source, "no example to compute a held-out loss on");
    std::optional<nl::LoraAdapter> adapter;
    if (!held.empty()) adapter = stacked(held);  // as the CLI: stacked even when there is one

    nl::HeldoutOptions hopt;
    hopt.precision = nl::parse_precision(precision);
    hopt.max_batch_tokens = o.batch_tokens;
    nl::HeldoutLoss h;
    {
      nl::EngineTurns::Turn turn = rm.turns().serve();
      nl::HeldoutScorer scorer(mm, rm.engine(), hopt);
      h = scorer.score(adapter ? &*adapter : nullptr, data);
    }
    int64_t supervised = 0;
    for (const nl::ExampleLoss& e : h.examples) supervised += e.n_supervised;
    out->loss = h.mean();
    out->perplexity = std::exp(out->loss);
    out->examples = static_cast<int64_t>(data.examples.size());
    out->skipped = data.n_skipped();
    out->tokens = data.n_tokens();
    out->supervised_tokens = supervised;
  });
}

}  // extern "C"
