// LaMP-2 (personalized movie tagging) commands:
//   nightlora make-lamp2  --users N --items-per-user M --questions-per-user Q --seed S --out DIR [--split user|time]
//       a synthetic data set in the official format, with a README of each user's hidden preferences;
//   nightlora lamp2-data  --questions Q.json --user ID [--retrieve k] --out train.jsonl
//       one user's OPPU-style training examples (prompt/completion JSONL for `nightlora train --data`);
//   nightlora lamp2-eval  --model M [--adapter A[:S] ...] --questions Q.json --outputs O.json [--user ID]
//                         [--retrieve k] [--mode score|generate] [--json] [--predictions P.json]
//       accuracy and macro-F1 (LaMP's definitions), per user and overall;
//   nightlora lamp2-compare --a A.json --b B.json [--unit user|item] [--resamples R] [--seed S]
//       paired comparison of two `lamp2-eval --json` results on the same questions.
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "command.h"
#include "nightlora/eval/lamp2.h"
#include "nightlora/eval/lamp2_eval.h"
#include "nightlora/eval/lamp2_synth.h"
#include "nightlora/eval/metrics.h"
#include "nightlora/host/adapter_spec.h"
#include "nightlora/host/lora.h"
#include "nightlora/job/atomic_file.h"
#include "nightlora/modelio/model.h"
#include "nightlora/util/error.h"
#include "nightlora/util/json_read.h"

namespace {

// ---- make-lamp2 ----

struct MakeArgs {
  nl::Lamp2SynthOptions opt;
  std::string split = "user";
  std::string out;
};

int run_make(MakeArgs& a) {
  a.opt.split = nl::parse_lamp2_split(a.split);
  if (a.opt.split == nl::Lamp2Split::Auto) nl::fail("--split", "give 'user' or 'time' for a generated data set");
  const nl::Lamp2Synthetic s = nl::make_lamp2_synthetic(a.opt);
  nl::write_lamp2_synthetic(s, a.out);
  std::printf("wrote %s/questions.json (%d users x %d questions, %d profile items each), %s/outputs.json, %s/README.md\n",
              a.out.c_str(), a.opt.users, a.opt.questions_per_user, a.opt.items_per_user, a.out.c_str(), a.out.c_str());
  return 0;
}

nlcli::Register reg_make(
    "make-lamp2", "Write a synthetic LaMP-2 data set (official format) whose users have hidden tag preferences",
    [](CLI::App& sub) -> nlcli::Run {
      auto a = std::make_shared<MakeArgs>();
      sub.add_option("--users", a->opt.users, "number of users")->required()->check(CLI::Range(1, 100000));
      sub.add_option("--items-per-user", a->opt.items_per_user, "profile items per user (training data)")
          ->required()->check(CLI::Range(1, 100000));
      sub.add_option("--questions-per-user", a->opt.questions_per_user, "held-out questions per user")
          ->required()->check(CLI::Range(1, 100000));
      sub.add_option("--seed", a->opt.seed, "random seed (same seed, same files)");
      sub.add_option("--split", a->split, "user (profiles without dates) or time (dated profiles, later questions)");
      sub.add_option("--tags-per-user", a->opt.tags_per_user, "how many of the 15 tags each user uses")
          ->check(CLI::Range(1, 15));
      sub.add_option("--noise", a->opt.noise, "share of items whose tag is random among the user's tags")
          ->check(CLI::Range(0.0, 1.0));
      sub.add_option("-o,--out", a->out, "output folder")->required();
      return [a]() { return run_make(*a); };
    });

// ---- lamp2-data ----

struct DataArgs {
  std::string questions, user, out, split = "auto";
  int retrieve = 0;
};

int run_data(const DataArgs& a) {
  const nl::Lamp2Questions q = nl::load_lamp2_questions(a.questions, nl::parse_lamp2_split(a.split));
  const nl::Lamp2UserExamples ex = nl::build_user_examples(nl::lamp2_user_profile(q, a.user), a.retrieve);
  nl::write_prompt_completion_jsonl(ex.examples, a.out);
  std::printf("wrote %s: %zu examples for user %s (%s split, %d retrieved earlier items per prompt)\n", a.out.c_str(),
              ex.examples.size(), a.user.c_str(), nl::lamp2_split_name(q.split), a.retrieve);
  if (ex.n_unknown_tags > 0)
    std::fprintf(stderr, "nightlora: warning: %lld profile items have a tag that is not one of the 15 LaMP-2 tags\n",
                 static_cast<long long>(ex.n_unknown_tags));
  return 0;
}

nlcli::Register reg_data(
    "lamp2-data", "Write one LaMP-2 user's profile as prompt/completion training JSONL (OPPU style, BM25 retrieval)",
    [](CLI::App& sub) -> nlcli::Run {
      auto a = std::make_shared<DataArgs>();
      sub.add_option("--questions", a->questions, "LaMP-2 questions JSON")->required();
      sub.add_option("--user", a->user, "user id (the questions' user_id, or a question id)")->required();
      sub.add_option("--retrieve", a->retrieve, "earlier profile items shown in each prompt (BM25, most similar first)")
          ->check(CLI::Range(0, 1000));
      sub.add_option("--split", a->split, "auto, user or time (time: every profile item needs a date)");
      sub.add_option("-o,--out", a->out, "output JSONL")->required();
      return [a]() { return run_data(*a); };
    });

// ---- lamp2-eval ----

struct Lamp2EvalArgs {
  std::string model, questions, outputs, split = "auto", mode = "score", predictions, precision = "f32";
  std::vector<std::string> adapters;
  nl::Lamp2EvalOptions opt;
  bool json = false;
};

int run_lamp2_eval(Lamp2EvalArgs& a) {
  a.opt.mode = nl::parse_lamp2_mode(a.mode);
  a.opt.precision = nl::parse_precision(a.precision);
  const nl::Lamp2Questions q = nl::load_lamp2_questions(a.questions, nl::parse_lamp2_split(a.split));
  const nl::Lamp2Outputs o = nl::load_lamp2_outputs(a.outputs);
  std::unique_ptr<nl::Model> model = nl::Model::load(a.model);
  // Several adapters apply as one, their ranks stacked (adapter_spec.h).
  nl::LoraAdapter adapter;
  std::string adapter_names;
  if (!a.adapters.empty()) {
    std::vector<nl::AdapterSpec> specs;
    for (const std::string& s : a.adapters) specs.push_back(nl::parse_adapter_spec(s)), adapter_names += " + " + s;
    adapter = nl::stack_adapters(nl::load_scaled_adapters(specs, *model));
  }
  const nl::Lamp2EvalResult r = nl::evaluate_lamp2(*model, a.adapters.empty() ? nullptr : &adapter, q, o, a.opt);
  if (!a.predictions.empty()) nl::write_file_atomic(a.predictions, nl::lamp2_predictions_json(r, o.task) + "\n");
  if (a.json) {
    std::printf("%s\n", nl::lamp2_eval_json(r, /*with_items=*/true).c_str());
    return 0;
  }
  const nl::GroupedMetrics& m = r.metrics;
  std::printf("LaMP-2 %s, retrieve %d, %s%s: %lld questions, %zu users\n", nl::lamp2_mode_name(r.mode), r.k_retrieved,
              a.model.c_str(), adapter_names.c_str(),
              static_cast<long long>(m.overall.n), m.groups.size());
  std::printf("%-16s %6s %9s %9s %9s\n", "user", "n", "correct", "accuracy", "macro-F1");
  for (size_t k = 0; k < m.groups.size(); ++k)
    std::printf("%-16s %6lld %9lld %9.4f %9.4f\n", m.groups[k].c_str(), static_cast<long long>(m.per_group[k].n),
                static_cast<long long>(m.per_group[k].n_correct), m.per_group[k].accuracy, m.per_group[k].macro_f1);
  std::printf("%-16s %6lld %9lld %9.4f %9.4f\n", "overall", static_cast<long long>(m.overall.n),
              static_cast<long long>(m.overall.n_correct), m.overall.accuracy, m.overall.macro_f1);
  std::printf("%-16s %6s %9s %9.4f %9.4f\n", "mean over users", "", "", m.mean_group_accuracy, m.mean_group_macro_f1);
  if (r.mode == nl::Lamp2Mode::Generate)
    std::printf("unparseable outputs: %lld (counted as wrong)\n", static_cast<long long>(m.overall.n_unparsed));
  return 0;
}

nlcli::Register reg_lamp2_eval(
    "lamp2-eval", "Evaluate a model (and LoRA adapters) on LaMP-2: accuracy and macro-F1 per user and overall",
    [](CLI::App& sub) -> nlcli::Run {
      auto a = std::make_shared<Lamp2EvalArgs>();
      sub.add_option("-m,--model", a->model, "GGUF file or Hugging Face folder")->required();
      sub.add_option("--adapter,--lora", a->adapters,
                     "LoRA adapter to apply, PATH[:SCALE] (PEFT folder or llama.cpp LoRA GGUF; repeatable, the adapters "
                     "add up)");
      sub.add_option("--questions", a->questions, "LaMP-2 questions JSON")->required();
      sub.add_option("--outputs", a->outputs, "LaMP-2 outputs (golds) JSON")->required();
      sub.add_option("--user", a->opt.user, "evaluate only this user's questions");
      sub.add_option("--retrieve", a->opt.k_retrieved, "profile items retrieved by BM25 into each prompt")
          ->check(CLI::Range(0, 1000));
      sub.add_option("--mode", a->mode, "score (highest tag log-probability) or generate (greedy text parsed to a tag)");
      sub.add_option("--max-new-tokens", a->opt.max_new_tokens, "generate mode: token limit")->check(CLI::Range(1, 4096));
      sub.add_option("--split", a->split, "auto, user or time");
      sub.add_option("-t,--threads", a->opt.threads, "threads (0 = all cores)")->check(CLI::NonNegativeNumber);
      sub.add_option("--precision", a->precision, "the decoder's numeric mode: f32 (exact) or int8 (faster)")
          ->check(CLI::IsMember({"f32", "int8"}))
          ->capture_default_str();
      sub.add_flag("--json", a->json, "print metrics and every question's prediction as JSON");
      sub.add_option("--predictions", a->predictions, "also write the predictions in LaMP's output format to this file");
      return [a]() { return run_lamp2_eval(*a); };
    });

// ---- lamp2-compare ----

struct CompareArgs {
  std::string a, b, unit = "user";
  int resamples = 10000;
  uint64_t seed = 0;
  double confidence = 0.95;
};

// Reads the items of a `lamp2-eval --json` file back into a result (what compare needs).
nl::Lamp2EvalResult read_eval_json(const std::string& path) {
  const nlohmann::json j = nl::parse_json(nl::read_file(path), path, "give the output of `nightlora lamp2-eval --json`");
  if (!j.is_object() || !j.contains("items") || !j["items"].is_array())
    nl::fail(path, "no \"items\" list", "give the output of `nightlora lamp2-eval --json`");
  nl::Lamp2EvalResult r;
  std::vector<int> preds, golds;
  std::vector<std::string> users;
  for (size_t i = 0; i < j["items"].size(); ++i) {
    const nlohmann::json& it = j["items"][i];
    const std::string where = "items[" + std::to_string(i) + "]";
    if (!it.is_object() || !it.contains("id") || !it["id"].is_string() || !it.contains("user") || !it["user"].is_string() ||
        !it.contains("gold") || !it["gold"].is_string() || !it.contains("predicted"))
      nl::fail(path, where + ": needs \"id\", \"user\", \"gold\" and \"predicted\"", "give the output of `nightlora lamp2-eval --json`");
    nl::Lamp2ItemResult item;
    item.question_id = it["id"].get<std::string>();
    item.user_id = it["user"].get<std::string>();
    item.gold = nl::lamp2_tag_index(it["gold"].get<std::string>());
    if (item.gold < 0) nl::fail(path, where + ".gold: not a LaMP-2 tag");
    item.predicted = it["predicted"].is_string() ? nl::lamp2_tag_index(it["predicted"].get<std::string>()) : -1;
    preds.push_back(item.predicted);
    golds.push_back(item.gold);
    users.push_back(item.user_id);
    r.items.push_back(std::move(item));
  }
  r.metrics = nl::grouped_metrics(preds, golds, users, nl::kLamp2NumTags);
  return r;
}

int run_compare(const CompareArgs& a) {
  nl::PairUnit unit = nl::PairUnit::User;
  if (a.unit == "item")
    unit = nl::PairUnit::Item;
  else if (a.unit != "user")
    nl::fail("--unit", "unknown unit '" + a.unit + "'", "use 'user' (per-user accuracy) or 'item' (per-question correctness)");
  const nl::Lamp2EvalResult ra = read_eval_json(a.a), rb = read_eval_json(a.b);
  const nl::PairedComparison c = nl::compare_lamp2(ra, rb, unit, a.resamples, a.seed, a.confidence);
  std::printf("paired comparison over %lld %ss (B - A, accuracy)\n", static_cast<long long>(c.n), a.unit.c_str());
  std::printf("A %s: %.4f\nB %s: %.4f\n", a.a.c_str(), c.mean_a, a.b.c_str(), c.mean_b);
  const std::string warning = nl::paired_units_warning(c, a.unit);
  std::printf("mean difference %+.4f, %.0f%% bootstrap CI [%+.4f, %+.4f] (%d resamples, seed %llu)%s\n", c.mean_diff,
              c.confidence * 100, c.ci_low, c.ci_high, c.resamples, static_cast<unsigned long long>(c.seed),
              warning.empty() ? "" : (" -- " + warning).c_str());
  if (!warning.empty())
    std::fprintf(stderr, "lamp2-compare: warning: the interval is %s; compare over more %ss\n", warning.c_str(), a.unit.c_str());
  std::printf("B better on %lld, A better on %lld, tied on %lld\n", static_cast<long long>(c.n_b_better),
              static_cast<long long>(c.n_a_better), static_cast<long long>(c.n_tied));
  return 0;
}

nlcli::Register reg_compare(
    "lamp2-compare", "Paired comparison (mean difference, bootstrap CI) of two lamp2-eval --json results",
    [](CLI::App& sub) -> nlcli::Run {
      auto a = std::make_shared<CompareArgs>();
      sub.add_option("--a", a->a, "baseline: a `lamp2-eval --json` output")->required();
      sub.add_option("--b", a->b, "condition: a `lamp2-eval --json` output on the same questions")->required();
      sub.add_option("--unit", a->unit, "user (per-user accuracy) or item (per-question correctness)");
      sub.add_option("--resamples", a->resamples, "bootstrap resamples")->check(CLI::Range(1, 10000000));
      sub.add_option("--seed", a->seed, "bootstrap seed");
      sub.add_option("--confidence", a->confidence, "confidence level")->check(CLI::Range(0.5, 0.9999));
      return [a]() { return run_compare(*a); };
    });

}  // namespace
