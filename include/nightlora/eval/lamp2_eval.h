// Evaluating a model (with an optional LoRA adapter) on LaMP-2 questions: every question's
// prompt (lamp2_question_prompt, with k retrieved profile items) is answered by tag scoring
// or by greedy generation (tag_scoring.h), and accuracy / macro-F1 are computed per user and
// over all questions (metrics.h). Paired comparisons between two evaluations of the same
// questions use per-user accuracy or per-item correctness as units.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "nightlora/engine/frozen_engine.h"
#include "nightlora/eval/lamp2.h"
#include "nightlora/eval/metrics.h"

namespace nl {

class Model;
struct LoraAdapter;

enum class Lamp2Mode { Score, Generate };
Lamp2Mode parse_lamp2_mode(const std::string& s);  // "score" | "generate"; throws nl::Error
const char* lamp2_mode_name(Lamp2Mode m);

struct Lamp2EvalOptions {
  int k_retrieved = 0;
  Lamp2Mode mode = Lamp2Mode::Score;
  std::string user;          // evaluate only this user's questions ("" = all)
  int max_new_tokens = 16;   // Generate mode
  int threads = 0;           // decoder threads (0 = all)
  // The decoder's numeric mode: F32 (the default, what the nightly gate's metric and the
  // recorded experiments use: the same scores as before the decoder moved to the engine) or
  // Int8 (the fast mode). See the marked place in src/eval/lamp2_eval.cpp.
  Precision precision = Precision::F32;
};

struct Lamp2ItemResult {
  std::string question_id;
  std::string user_id;
  int gold = -1;
  int predicted = -1;               // label index, -1 = unparseable (Generate mode)
  std::string output;               // the predicted tag (Score) or the generated text (Generate)
  std::vector<double> tag_logprob;  // Score mode: the 15 tags' summed log-probs
};

struct Lamp2EvalResult {
  Lamp2Mode mode = Lamp2Mode::Score;
  int k_retrieved = 0;
  std::vector<Lamp2ItemResult> items;  // in question order
  GroupedMetrics metrics;              // groups = users
};

// Throws nl::Error when the user is not in the questions, a question has no gold, or the
// adapter does not fit the model.
Lamp2EvalResult evaluate_lamp2(const Model& model, const LoraAdapter* adapter, const Lamp2Questions& questions,
                               const Lamp2Outputs& outputs, const Lamp2EvalOptions& opt);

// The result as JSON text: options, overall and per-user metrics, and (with items) every
// question's gold, prediction and output.
std::string lamp2_eval_json(const Lamp2EvalResult& r, bool with_items);

// The predictions in LaMP's own output format {"task", "golds": [{"id", "output"}]}, so the
// official evaluator can score them too.
std::string lamp2_predictions_json(const Lamp2EvalResult& r, const std::string& task = "LaMP_2");

// Units for paired_bootstrap: per-user accuracy (users in order of first appearance) or
// per-item correctness (1/0, question order). Throws nl::Error when `a` and `b` were not
// evaluated on the same questions.
enum class PairUnit { User, Item };
PairedComparison compare_lamp2(const Lamp2EvalResult& a, const Lamp2EvalResult& b, PairUnit unit,
                               int resamples = 10000, uint64_t seed = 0, double confidence = 0.95);

}  // namespace nl
