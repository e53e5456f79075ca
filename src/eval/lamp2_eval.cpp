#include "nightlora/eval/lamp2_eval.h"

#include <nlohmann/json.hpp>

#include "nightlora/eval/tag_scoring.h"
#include "nightlora/infer/decoder.h"
#include "nightlora/modelio/model.h"
#include "nightlora/tokenizer/tokenizer.h"
#include "nightlora/util/error.h"

namespace nl {

Lamp2Mode parse_lamp2_mode(const std::string& s) {
  if (s == "score") return Lamp2Mode::Score;
  if (s == "generate") return Lamp2Mode::Generate;
  fail("--mode", "unknown mode '" + s + "'",
       "use 'score' (the tag with the highest log-probability) or 'generate' (greedy text parsed to a tag)");
}

const char* lamp2_mode_name(Lamp2Mode m) { return m == Lamp2Mode::Score ? "score" : "generate"; }

Lamp2EvalResult evaluate_lamp2(const Model& model, const LoraAdapter* adapter, const Lamp2Questions& questions,
                               const Lamp2Outputs& outputs, const Lamp2EvalOptions& opt) {
  if (!model.tokenizer) fail(model.source_path, "the model has no tokenizer", "LaMP-2 prompts are text");
  if (opt.k_retrieved < 0) fail("--retrieve", "the number of retrieved items must be >= 0");
  if (!opt.user.empty()) lamp2_user_profile(questions, opt.user);  // throws when the user is absent
  const std::vector<int> golds = lamp2_golds(questions, outputs);

  DecoderOptions dopt;
  dopt.threads = opt.threads;
  // f32 (the default here: an evaluation is a measurement) keeps the exact path with an f32
  // cache; the cheaper modes take the f16 cache.
  dopt.precision = opt.precision;
  dopt.kv_type = opt.precision == Precision::F32 ? KvType::F32 : KvType::F16;
  Decoder decoder(model, dopt);
  decoder.set_adapter(adapter);
  const Tokenizer& tok = *model.tokenizer;
  // Score mode keeps the decoder's cache between questions: prompts without retrieval share
  // LaMP's instruction, which then runs once (tag_scoring.h).
  CompletionScorer scorer(decoder, tok);

  Lamp2EvalResult r;
  r.mode = opt.mode;
  r.k_retrieved = opt.k_retrieved;
  std::vector<int> preds, gts;
  std::vector<std::string> users;
  for (size_t i = 0; i < questions.questions.size(); ++i) {
    const Lamp2Question& q = questions.questions[i];
    if (!opt.user.empty() && q.user_id != opt.user) continue;
    const std::string prompt = lamp2_question_prompt(q, opt.k_retrieved);
    Lamp2ItemResult item;
    item.question_id = q.id;
    item.user_id = q.user_id;
    item.gold = golds[i];
    if (opt.mode == Lamp2Mode::Score) {
      const CompletionScores s = scorer.score_lamp2_tags(prompt);
      item.predicted = s.best;
      item.output = lamp2_tags()[static_cast<size_t>(s.best)];
      item.tag_logprob = s.logprob;
    } else {
      const GeneratedTag g = generate_lamp2_tag(decoder, tok, prompt, opt.max_new_tokens);
      item.predicted = g.tag;
      item.output = g.text;
    }
    preds.push_back(item.predicted);
    gts.push_back(item.gold);
    users.push_back(item.user_id);
    r.items.push_back(std::move(item));
  }
  r.metrics = grouped_metrics(preds, gts, users, kLamp2NumTags);
  return r;
}

namespace {

nlohmann::ordered_json metrics_json(const ClassificationMetrics& m) {
  return {{"n", m.n}, {"correct", m.n_correct}, {"unparsed", m.n_unparsed}, {"accuracy", m.accuracy}, {"macro_f1", m.macro_f1}};
}

std::string dump(const nlohmann::ordered_json& j, int indent) {
  // Generated text may hold invalid UTF-8 (a byte token cut short): replace, never throw.
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

std::string lamp2_eval_json(const Lamp2EvalResult& r, bool with_items) {
  nlohmann::ordered_json j;
  j["mode"] = lamp2_mode_name(r.mode);
  j["retrieve"] = r.k_retrieved;
  j["overall"] = metrics_json(r.metrics.overall);
  j["mean_user_accuracy"] = r.metrics.mean_group_accuracy;
  j["mean_user_macro_f1"] = r.metrics.mean_group_macro_f1;
  nlohmann::ordered_json users = nlohmann::ordered_json::array();
  for (size_t k = 0; k < r.metrics.groups.size(); ++k) {
    nlohmann::ordered_json u = metrics_json(r.metrics.per_group[k]);
    u["user"] = r.metrics.groups[k];
    users.push_back(u);
  }
  j["users"] = users;
  if (with_items) {
    nlohmann::ordered_json items = nlohmann::ordered_json::array();
    for (const Lamp2ItemResult& it : r.items) {
      nlohmann::ordered_json o = {{"id", it.question_id},
                                  {"user", it.user_id},
                                  {"gold", lamp2_tags()[static_cast<size_t>(it.gold)]},
                                  {"predicted", it.predicted >= 0 ? nlohmann::ordered_json(lamp2_tags()[static_cast<size_t>(it.predicted)])
                                                                  : nlohmann::ordered_json(nullptr)},
                                  {"correct", it.predicted == it.gold},
                                  {"output", it.output}};
      if (!it.tag_logprob.empty()) o["tag_logprob"] = it.tag_logprob;
      items.push_back(o);
    }
    j["items"] = items;
  }
  return dump(j, 2);
}

std::string lamp2_predictions_json(const Lamp2EvalResult& r, const std::string& task) {
  nlohmann::ordered_json golds = nlohmann::ordered_json::array();
  for (const Lamp2ItemResult& it : r.items) golds.push_back({{"id", it.question_id}, {"output", it.output}});
  return dump({{"task", task}, {"golds", golds}}, 2);
}

PairedComparison compare_lamp2(const Lamp2EvalResult& a, const Lamp2EvalResult& b, PairUnit unit, int resamples,
                               uint64_t seed, double confidence) {
  if (a.items.size() != b.items.size())
    fail("paired comparison", "the evaluations cover " + std::to_string(a.items.size()) + " and " +
                                  std::to_string(b.items.size()) + " questions", "evaluate both on the same questions");
  for (size_t i = 0; i < a.items.size(); ++i)
    if (a.items[i].question_id != b.items[i].question_id)
      fail("paired comparison", "question " + std::to_string(i) + " is \"" + a.items[i].question_id + "\" in one and \"" +
                                    b.items[i].question_id + "\" in the other", "evaluate both on the same questions");
  std::vector<double> va, vb;
  if (unit == PairUnit::Item) {
    for (size_t i = 0; i < a.items.size(); ++i) {
      va.push_back(a.items[i].predicted == a.items[i].gold ? 1.0 : 0.0);
      vb.push_back(b.items[i].predicted == b.items[i].gold ? 1.0 : 0.0);
    }
  } else {
    // Same questions in the same order, so the users (in order of first appearance) match.
    for (size_t k = 0; k < a.metrics.per_group.size(); ++k) {
      va.push_back(a.metrics.per_group[k].accuracy);
      vb.push_back(b.metrics.per_group[k].accuracy);
    }
  }
  return paired_bootstrap(va, vb, resamples, seed, confidence);
}

}  // namespace nl
