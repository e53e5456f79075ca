// The lamp2 task: one LaMP-2 user's profile (questions.json), the latest items held out; the
// decision adds LaMP-2 accuracy (tag scoring) to the loss.
#include <filesystem>

#include <nlohmann/json.hpp>

#include "nightlora/eval/lamp2_eval.h"
#include "nightlora/eval/nightly_user_data.h"
#include "nightlora/job/atomic_file.h"
#include "nightlora/util/error.h"
#include "nightly_task.h"

namespace nl {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::string questions_path(const std::string& user_data) {
  std::error_code ec;
  if (fs::is_directory(user_data, ec)) {
    const fs::path p = fs::path(user_data) / "questions.json";
    if (!fs::exists(p, ec)) fail(user_data, "has no questions.json", "give the folder of a LaMP-2 questions file");
    return p.string();
  }
  if (!fs::exists(user_data, ec)) fail(user_data, "--user-data does not exist");
  return user_data;
}

std::string pick_user(const Lamp2Questions& q, const std::string& wanted) {
  const std::vector<std::string> users = lamp2_users(q);
  if (!wanted.empty()) {
    if (std::find(users.begin(), users.end(), wanted) == users.end())
      fail(q.source, "has no user " + wanted, "the file's first users: " + users.front());
    return wanted;
  }
  if (users.size() != 1)
    fail(q.source, "holds " + std::to_string(users.size()) + " users",
         "say whose adapter this is with --user (e.g. --user " + users.front() + ")");
  return users.front();
}

std::string example_line(const std::string& prompt, const std::string& completion) {
  const nlohmann::ordered_json line = {{"prompt", prompt}, {"completion", completion}};
  return line.dump(-1, ' ', false, json::error_handler_t::replace);
}

class Lamp2Task : public NightlyTask {
 public:
  std::string name() const override { return "lamp2"; }

  void load(const NightlyOptions& o, const Model& model) override {
    if (o.k_retrieved < 0) fail("--retrieve " + std::to_string(o.k_retrieved), "must not be negative");
    qpath_ = questions_path(o.user_data);
    const Lamp2Questions questions = load_lamp2_questions(qpath_);
    user_ = pick_user(questions, o.user);
    k_ = o.k_retrieved;
    split_ = nightly_split_user(questions, user_, o.holdout, o.k_retrieved);
    // Profile items `train` would reject (a description so long that the tag falls outside
    // --seq-len) are skipped and counted, not left to fail training every night.
    DataOptions dopt;
    dopt.max_tokens = o.seq_len;
    train_lines_.clear();
    for (size_t i = 0; i < split_.train.size(); ++i) {
      const Lamp2Example& e = split_.train[i];
      std::string line = example_line(e.prompt, e.completion);
      const std::string problem = training_line_problem(line, "profile item " + e.item_id, *model.tokenizer, dopt, &truncated_);
      if (!problem.empty()) {
        if (first_problem_.empty()) first_problem_ = problem;
        ++skipped_;
        continue;
      }
      train_lines_ += line + "\n";
    }
    if (train_lines_.empty())
      fail(qpath_, "none of user " + user_ + "'s training items fits --seq-len " + std::to_string(o.seq_len),
           "give a larger --seq-len; first problem: " + first_problem_);
  }

  json write(const fs::path& run, const NightlyLog& log) override {
    write_file_atomic((run / "train.jsonl").string(), train_lines_);
    write_file_atomic((run / "heldout_questions.json").string(), lamp2_questions_json(split_.heldout));
    write_file_atomic((run / "heldout_outputs.json").string(), lamp2_outputs_json(split_.heldout_golds));
    // The held-out items as prompt/completion lines for the loss: the question's prompt
    // (with its retrieved items) and the gold tag.
    std::string held;
    for (size_t i = 0; i < split_.heldout.questions.size(); ++i)
      held += example_line(lamp2_question_prompt(split_.heldout.questions[i], k_),
                           lamp2_completion(split_.heldout_golds.golds[i].second)) + "\n";
    write_file_atomic((run / "heldout.jsonl").string(), held);
    const int64_t n_train = static_cast<int64_t>(split_.train.size()) - skipped_;
    log("user " + user_ + ": " + std::to_string(n_train) + " training examples, " +
        std::to_string(split_.heldout.questions.size()) + " held-out items" +
        (skipped_ > 0 ? "; skipped " + std::to_string(skipped_) + " profile item(s): " + first_problem_ : std::string()));
    return {{"user", user_},
            {"questions", fs::absolute(qpath_).string()},
            {"k_retrieved", k_},
            {"train_items", n_train},
            {"heldout_items", split_.heldout.questions.size()},
            {"heldout_unknown_tags", split_.n_unknown_tags},
            {"skipped", {{"unusable", skipped_}, {"first", first_problem_}}},
            {"truncated", truncated_}};
  }

  std::optional<TaskMetric> metric(const Model& model, const LoraAdapter& candidate, const LoraAdapter* current,
                                   const fs::path& run, const json& run_info, json& detail) override {
    const Lamp2Questions hq = load_lamp2_questions((run / "heldout_questions.json").string());
    const Lamp2Outputs ho = load_lamp2_outputs((run / "heldout_outputs.json").string());
    Lamp2EvalOptions eo;
    eo.k_retrieved = run_info.at("data").value("k_retrieved", 0);
    eo.threads = run_info.value("threads", 0);
    const Lamp2EvalResult rc = evaluate_lamp2(model, &candidate, hq, ho, eo);
    const Lamp2EvalResult ru = evaluate_lamp2(model, current, hq, ho, eo);
    detail = {{"candidate", json::parse(lamp2_eval_json(rc, true))}, {"current", json::parse(lamp2_eval_json(ru, true))}};
    return TaskMetric{"accuracy", rc.metrics.overall.accuracy, ru.metrics.overall.accuracy};
  }

 private:
  std::string qpath_, user_;
  int k_ = 0;
  NightlyData split_;
  std::string train_lines_;
  int64_t skipped_ = 0, truncated_ = 0;
  std::string first_problem_;
};

}  // namespace

std::unique_ptr<NightlyTask> make_lamp2_task() { return std::make_unique<Lamp2Task>(); }

std::unique_ptr<NightlyTask> make_nightly_task(const NightlyOptions& o) {
  std::string task = o.task;
  if (task == "auto") {
    std::error_code ec;
    const fs::path p(o.user_data);
    const bool lamp = fs::is_directory(p, ec) ? fs::exists(p / "questions.json", ec) : p.extension() == ".json";
    task = lamp ? "lamp2" : "generic";
  }
  if (task == "generic") return make_generic_task();
  if (task == "lamp2") return make_lamp2_task();
  fail("--task " + o.task, "unknown task", "use generic (the app's JSONL), lamp2 (a LaMP-2 questions.json) or auto");
}

}  // namespace nl
