// The C API (include/nightlora.h) against the CLI it wraps: the same messages for the same
// mistakes, the same greedy text as `nightlora generate`, the same adapter bytes as
// `nightlora train`, the same loss as `nightlora eval`; handles that are not handles, options
// the CLI would refuse; a job paused, resumed, cancelled and continued; generation while a job
// trains. Written against the header only, as an app would.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "capi_test_util.h"
#include "nightlora.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using nltest::run_cli;
using nltest::shq;
using capitest::cli_error;
using capitest::Model;
using capitest::stories_data;

std::string generate(nl_model* m, const std::string& prompt, int n, nl_adapter* adapter = nullptr) {
  nl_generate_options o;
  nl_generate_options_init(&o);
  o.max_tokens = n;
  o.temperature = 0;
  o.seed = 0;
  if (adapter) {
    o.adapters = &adapter;
    o.n_adapters = 1;
  }
  nl_generation g;
  EXPECT_EQ(nl_generate(m, prompt.c_str(), &o, &g), NL_OK) << nl_last_error();
  std::string text = g.text ? g.text : "";
  nl_generation_free(&g);
  return text;
}

// The training options of these tests, as JSON for the C API and as flags for the CLI.
struct TrainArgs {
  std::string data, out;
  int iters = 6;
  json extra = json::object();
  std::string as_json() const {
    json j = {{"data", data}, {"out", out}, {"iters", iters}, {"batch", 4}, {"lr", 5e-3},
              {"seq-len", 128}, {"threads", 2}, {"plan-cache", "off"}};
    j.update(extra);
    return j.dump();
  }
  std::string as_flags(const fs::path& model) const {
    std::string f = "train --model " + shq(model.string()) + " --data " + shq(data) + " --out " + shq(out) +
                    " --iters " + std::to_string(iters) + " --batch 4 --lr 5e-3 --seq-len 128 --threads 2 --plan-cache off";
    for (auto it = extra.begin(); it != extra.end(); ++it)
      f += " --" + it.key() + " " + (it->is_string() ? shq(it->get<std::string>()) : it->dump());
    return f;
  }
};

TEST(CApi, VersionAndStatusNames) {
  EXPECT_EQ(nl_api_version(), NL_API_VERSION);
  EXPECT_STRNE(nl_version(), "");
  EXPECT_STREQ(nl_status_name(NL_OK), "ok");
  EXPECT_STREQ(nl_status_name(NL_ERR_BAD_INPUT), "bad input");
  EXPECT_STREQ(nl_status_name(static_cast<nl_status>(99)), "unknown status");
}

TEST(CApi, BadModelPathGivesTheCliMessage) {
  nltest::TempDir td;
  const std::string missing = (td / "no-such-model.gguf").string();
  nl_model* m = reinterpret_cast<nl_model*>(0x1);
  EXPECT_EQ(nl_model_load(missing.c_str(), nullptr, &m), NL_ERR_BAD_INPUT);
  EXPECT_EQ(m, nullptr);
  const std::string api = nl_last_error();
  const auto cli = run_cli("generate --model " + shq(missing) + " -n 1");
  EXPECT_EQ(cli.rc, 1);
  EXPECT_EQ(api, cli_error(cli));
  EXPECT_NE(api.find("no-such-model.gguf"), std::string::npos) << api;

  // A file that is not a model.
  nltest::write_text(td / "junk.gguf", "not a gguf file at all");
  EXPECT_EQ(nl_model_load((td / "junk.gguf").c_str(), nullptr, &m), NL_ERR_BAD_INPUT);
  const auto cli_junk = run_cli("generate --model " + shq((td / "junk.gguf").string()) + " -n 1");
  EXPECT_EQ(std::string(nl_last_error()), cli_error(cli_junk));

  // The error is per thread, and a successful call clears it.
  std::string other;
  std::thread([&] { other = nl_last_error(); }).join();
  EXPECT_EQ(other, "");
  EXPECT_EQ(nl_model_free(nullptr), NL_OK);
  EXPECT_STREQ(nl_last_error(), "");
}

TEST(CApi, NullsAndHandlesThatAreNotHandles) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", path);
  nl_model* out = nullptr;
  EXPECT_EQ(nl_model_load(nullptr, nullptr, &out), NL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(nl_last_error()).find("path is NULL"), std::string::npos) << nl_last_error();
  EXPECT_EQ(nl_model_load(path.c_str(), nullptr, nullptr), NL_ERR_INVALID_ARGUMENT);

  Model model(path);
  nl_generation g;
  // A pointer that was never a handle, a handle of another kind, a freed handle.
  int not_a_handle = 0;
  EXPECT_EQ(nl_generate(reinterpret_cast<nl_model*>(&not_a_handle), "Once", nullptr, &g), NL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(nl_last_error()).find("not a live model handle"), std::string::npos) << nl_last_error();
  nl_model* second = nullptr;
  ASSERT_EQ(nl_model_load(path.c_str(), nullptr, &second), NL_OK);
  ASSERT_EQ(nl_model_free(second), NL_OK);
  EXPECT_EQ(nl_generate(second, "Once", nullptr, &g), NL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(nl_model_free(second), NL_ERR_INVALID_ARGUMENT);
  nl_job* not_a_job = reinterpret_cast<nl_job*>(model.m);
  EXPECT_EQ(nl_job_cancel(not_a_job), NL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(nl_adapter_set_scale(reinterpret_cast<nl_adapter*>(model.m), 0.5f), NL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(nl_generate(model.m, "Once", nullptr, nullptr), NL_ERR_INVALID_ARGUMENT);

  // An options struct from a caller that did not fill it.
  nl_generate_options o;
  nl_generate_options_init(&o);
  o.struct_size = 3;
  EXPECT_EQ(nl_generate(model.m, "Once", &o, &g), NL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(nl_last_error()).find("struct_size"), std::string::npos);
  // Values the CLI refuses are bad input.
  nl_generate_options_init(&o);
  o.precision = "int4";
  EXPECT_EQ(nl_generate(model.m, "Once", &o, &g), NL_ERR_BAD_INPUT);
  nl_generate_options_init(&o);
  o.top_p = 2;
  EXPECT_EQ(nl_generate(model.m, "Once", &o, &g), NL_ERR_BAD_INPUT);
  // An adapter that is not there: the CLI's message.
  nltest::TempDir td;
  nl_adapter* a = nullptr;
  const std::string missing = (td / "missing-adapter").string();
  EXPECT_EQ(nl_adapter_load(model.m, missing.c_str(), 1.0f, &a), NL_ERR_BAD_INPUT);
  const auto cli = run_cli("generate --model " + shq(path.string()) + " -n 1 --adapter " + shq(missing));
  EXPECT_EQ(std::string(nl_last_error()), cli_error(cli));
  // Chat on a model without a chat template: the CLI's message.
  nl_chat_message msg = {"user", "Hi"};
  EXPECT_EQ(nl_chat(model.m, &msg, 1, nullptr, &g), NL_ERR_BAD_INPUT);
  const auto cli_chat = run_cli("generate --model " + shq(path.string()) + " -n 1 --chat --prompt Hi");
  EXPECT_EQ(cli_chat.rc, 1);
  EXPECT_EQ(std::string(nl_last_error()), cli_error(cli_chat));
}

TEST(CApi, TrainingOptionsAreCheckedAsTheCliChecksThem) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", path);
  Model model(path);
  nltest::TempDir td;
  nl_job* job = nullptr;
  auto start = [&](const std::string& j) { return nl_train_start(model.m, j.c_str(), nullptr, &job); };
  EXPECT_EQ(start("{\"data\": \"x.jsonl\", \"out\": "), NL_ERR_BAD_INPUT);
  EXPECT_NE(std::string(nl_last_error()).find("not valid JSON"), std::string::npos) << nl_last_error();
  EXPECT_EQ(start("[1, 2]"), NL_ERR_BAD_INPUT);
  EXPECT_EQ(start("{\"data\": \"x.jsonl\", \"out\": \"o\", \"ranks\": 8}"), NL_ERR_BAD_INPUT);
  EXPECT_NE(std::string(nl_last_error()).find("unknown key \"ranks\""), std::string::npos) << nl_last_error();
  EXPECT_NE(std::string(nl_last_error()).find("seq-len"), std::string::npos) << "lists the keys";
  EXPECT_EQ(start("{\"data\": \"x.jsonl\", \"out\": \"o\", \"rank\": \"8\"}"), NL_ERR_BAD_INPUT);
  EXPECT_NE(std::string(nl_last_error()).find("\"rank\": must be an integer"), std::string::npos) << nl_last_error();
  EXPECT_EQ(start("{\"data\": \"x.jsonl\", \"out\": \"o\", \"rank\": 8.5}"), NL_ERR_BAD_INPUT);
  EXPECT_EQ(start("{\"data\": \"x.jsonl\", \"out\": \"o\", \"resume\": 1}"), NL_ERR_BAD_INPUT);
  EXPECT_EQ(start("{\"data\": \"x.jsonl\", \"out\": \"o\", \"keep\": 0}"), NL_ERR_BAD_INPUT);
  EXPECT_EQ(start("{\"data\": \"x.jsonl\", \"out\": \"o\", \"engine\": \"tpu\"}"), NL_ERR_BAD_INPUT);
  EXPECT_EQ(start("{\"out\": \"o\"}"), NL_ERR_BAD_INPUT);
  EXPECT_NE(std::string(nl_last_error()).find("\"data\" is required"), std::string::npos) << nl_last_error();
  EXPECT_EQ(job, nullptr);

  // Found by the job itself: missing data. nl_job_wait gives the CLI's message.
  TrainArgs t{(td / "missing.jsonl").string(), (td / "run").string()};
  ASSERT_EQ(start(t.as_json()), NL_OK) << nl_last_error();
  nl_train_result r;
  EXPECT_EQ(nl_job_wait(job, &r), NL_ERR_BAD_INPUT);
  const std::string api = nl_last_error();
  EXPECT_EQ(nl_job_free(job), NL_OK);
  const auto cli = run_cli(t.as_flags(path));
  EXPECT_EQ(cli.rc, 1);
  EXPECT_EQ(api, cli_error(cli));
  // The job's model must be this one.
  t.extra["model"] = (td / "other.gguf").string();
  ASSERT_EQ(start(t.as_json()), NL_OK);
  EXPECT_EQ(nl_job_wait(job, &r), NL_ERR_BAD_INPUT);
  EXPECT_NE(std::string(nl_last_error()).find("resident model"), std::string::npos) << nl_last_error();
  EXPECT_EQ(nl_job_free(job), NL_OK);
}

// Training through the API writes the adapter `nightlora train` writes (byte for byte), with
// the CLI's defaults (precision auto included); generation and evaluation with it give the
// CLI's greedy text and loss.
TEST(CApi, TrainGenerateEvalEqualTheCli) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", path);
  nltest::TempDir td;
  TrainArgs t{stories_data("train.jsonl"), (td / "api").string()};
  t.extra["rank"] = 4;
  Model model(path);
  struct Seen {
    std::mutex mu;
    std::vector<int64_t> steps;
    std::vector<std::string> lines;
  } seen;
  nl_train_callbacks cb;
  nl_train_callbacks_init(&cb);
  cb.user_data = &seen;
  cb.on_progress = [](void* u, const nl_train_progress* p) {
    auto* s = static_cast<Seen*>(u);
    std::lock_guard<std::mutex> lock(s->mu);
    s->steps.push_back(p->step);
    EXPECT_EQ(p->total_steps, 6);
    EXPECT_TRUE(std::isfinite(p->loss) && p->loss > 0) << p->loss;
    EXPECT_NE(std::string(p->status).find("step "), std::string::npos);
  };
  cb.on_log = [](void* u, int32_t, const char* line) {
    auto* s = static_cast<Seen*>(u);
    std::lock_guard<std::mutex> lock(s->mu);
    s->lines.push_back(line);
  };
  nl_train_result r;
  ASSERT_EQ(nl_train(model.m, t.as_json().c_str(), &cb, &r), NL_OK) << nl_last_error();
  EXPECT_EQ(r.finished, 1);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.step, 6);
  EXPECT_EQ(seen.steps, (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
  bool saw_saved = false;
  for (const std::string& l : seen.lines) saw_saved |= l.rfind("saved: ", 0) == 0;
  EXPECT_TRUE(saw_saved);

  TrainArgs c = t;
  c.out = (td / "cli").string();
  const auto cli = run_cli(c.as_flags(path));
  ASSERT_EQ(cli.rc, 0) << cli.err;
  for (const char* f : {"adapter.gguf", "adapter_model.safetensors"})
    EXPECT_EQ(nltest::read_text(td / "api" / f), nltest::read_text(td / "cli" / f)) << f << " differs";

  // Greedy text with the adapter, and without: the CLI's (which prints a newline after it).
  nl_adapter* a = nullptr;
  ASSERT_EQ(nl_adapter_load(model.m, (td / "api/adapter.gguf").c_str(), 1.0f, &a), NL_OK) << nl_last_error();
  const std::string gen = "generate --model " + shq(path.string()) + " --temp 0 -n 48 --seed 0 --quiet -t 2 --prompt Zorbo";
  const auto cli_adapted = run_cli(gen + " --adapter " + shq((td / "cli/adapter.gguf").string()));
  const auto cli_base = run_cli(gen);
  ASSERT_EQ(cli_adapted.rc, 0) << cli_adapted.err;
  const std::string adapted = generate(model.m, "Zorbo", 48, a);
  EXPECT_EQ(adapted + "\n", cli_adapted.out);
  EXPECT_EQ(generate(model.m, "Zorbo", 48) + "\n", cli_base.out);
  EXPECT_NE(adapted + "\n", cli_base.out) << "the adapter changes nothing";
  // Scale 0 is the base model; the scale is read back.
  ASSERT_EQ(nl_adapter_set_scale(a, 0.0f), NL_OK);
  float s = 1;
  ASSERT_EQ(nl_adapter_get_scale(a, &s), NL_OK);
  EXPECT_EQ(s, 0.0f);
  EXPECT_EQ(generate(model.m, "Zorbo", 48, a) + "\n", cli_base.out);

  // Evaluation: `nightlora eval --json`'s numbers, with the adapter at 0.5 and without.
  ASSERT_EQ(nl_adapter_set_scale(a, 0.5f), NL_OK);
  nl_eval_options eo;
  nl_eval_options_init(&eo);
  eo.seq_len = 128;
  eo.adapters = &a;
  eo.n_adapters = 1;
  nl_eval_result er;
  ASSERT_EQ(nl_eval(model.m, stories_data("valid.jsonl").c_str(), &eo, &er), NL_OK) << nl_last_error();
  const auto cli_eval = run_cli("eval --json --seq-len 128 -t 2 --model " + shq(path.string()) + " --data " +
                                shq(stories_data("valid.jsonl")) + " --adapter " + shq((td / "cli").string() + ":0.5"));
  ASSERT_EQ(cli_eval.rc, 0) << cli_eval.err;
  const json je = json::parse(cli_eval.out);
  EXPECT_EQ(er.loss, je["loss"].get<double>());
  EXPECT_EQ(er.perplexity, je["perplexity"].get<double>());
  EXPECT_EQ(er.examples, je["examples"].get<int64_t>());
  EXPECT_EQ(er.supervised_tokens, je["supervised_tokens"].get<int64_t>());
  EXPECT_EQ(er.tokens, je["tokens"].get<int64_t>());
  EXPECT_EQ(nl_adapter_free(a), NL_OK);
  EXPECT_EQ(nl_adapter_set_scale(a, 1.0f), NL_ERR_INVALID_ARGUMENT) << "unloaded";
}

TEST(CApi, TokenCallbackStreamsTheTextAndCanStop) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", path);
  Model model(path);
  struct Stream {
    std::string text;
    int tokens = 0;
    int stop_after = 0;
  } st;
  nl_generate_options o;
  nl_generate_options_init(&o);
  o.temperature = 0;
  o.max_tokens = 40;
  o.user_data = &st;
  o.on_token = [](void* u, int32_t, const char* text, size_t len) {
    auto* s = static_cast<Stream*>(u);
    s->text.append(text, len);
    return ++s->tokens == s->stop_after ? 1 : 0;
  };
  nl_generation g;
  ASSERT_EQ(nl_generate(model.m, "Once upon a time", &o, &g), NL_OK) << nl_last_error();
  EXPECT_EQ(st.text, g.text);  // the pieces make up the text
  EXPECT_EQ(st.tokens, g.new_tokens);
  EXPECT_GT(g.prompt_tokens, 1);
  const std::string full = g.text;
  nl_generation_free(&g);
  EXPECT_EQ(g.text, nullptr);

  st = Stream{};
  st.stop_after = 5;
  ASSERT_EQ(nl_generate(model.m, "Once upon a time", &o, &g), NL_OK);
  EXPECT_EQ(g.new_tokens, 5);
  EXPECT_EQ(g.stop_reason, NL_STOP_CALLBACK);
  EXPECT_EQ(full.rfind(g.text, 0), 0u) << "the stopped text begins the full one";
  nl_generation_free(&g);
}

// Stop strings and the repetition penalty as `nightlora generate --stop S --repeat-penalty P`.
TEST(CApi, StopStringsAndRepeatPenaltyAsTheCli) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", path);
  Model model(path);
  const char* stops[] = {"park", "!"};
  nl_generate_options o;
  nl_generate_options_init(&o);
  o.temperature = 0;
  o.max_tokens = 60;
  o.seed = 0;
  o.repeat_penalty = 1.3f;
  o.stop = stops;
  o.n_stop = 2;
  nl_generation g;
  ASSERT_EQ(nl_generate(model.m, "Once upon a time", &o, &g), NL_OK) << nl_last_error();
  const std::string text = g.text;
  const int32_t reason = g.stop_reason;
  nl_generation_free(&g);
  const auto cli = run_cli("generate --model " + shq(path.string()) +
                           " --temp 0 -n 60 --seed 0 --quiet -t 2 --repeat-penalty 1.3 --stop park --stop '!' "
                           "--prompt 'Once upon a time'");
  ASSERT_EQ(cli.rc, 0) << cli.err;
  EXPECT_EQ(text + "\n", cli.out);
  if (reason == NL_STOP_STRING) {
    EXPECT_EQ(text.find("park"), std::string::npos);
  }
  // Without the penalty and stops the text is another.
  EXPECT_NE(generate(model.m, "Once upon a time", 60), text);
}

// A job paused at a step boundary holds still while generation runs; resumed, it goes on;
// cancelled, it stops with a checkpoint (exit code 75), and the same options continue it to
// the adapter an uninterrupted `nightlora train` writes.
TEST(CApi, JobPauseResumeCancelAndContinue) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", path);
  nltest::TempDir td;
  Model model(path);
  const std::string base_text = generate(model.m, "Zorbo", 32);
  TrainArgs t{stories_data("train.jsonl"), (td / "api").string(), 40};
  t.extra["precision"] = "f32";
  // The progress callback pauses the job itself at step pause_at (from the job's thread).
  struct Gate {
    std::atomic<int64_t> step{0}, pause_at{-1};
    std::atomic<nl_job*> job{nullptr};
  } gate;
  nl_train_callbacks cb;
  nl_train_callbacks_init(&cb);
  cb.user_data = &gate;
  cb.on_progress = [](void* u, const nl_train_progress* p) {
    auto* g = static_cast<Gate*>(u);
    g->step = p->step;
    if (p->step == g->pause_at) {
      EXPECT_EQ(nl_job_pause(g->job), NL_OK);
    }
  };
  nl_job* job = nullptr;
  ASSERT_EQ(nl_train_start(model.m, t.as_json().c_str(), &cb, &job), NL_OK) << nl_last_error();
  gate.job = job;
  EXPECT_EQ(nl_job_resume(job), NL_ERR_STATE) << "not paused";
  ASSERT_EQ(nl_job_pause(job), NL_OK);
  int32_t state = -1;
  nl_train_progress p;
  auto wait_paused = [&] {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    state = -1;
    while (state != NL_JOB_PAUSED && std::chrono::steady_clock::now() < deadline) {
      ASSERT_EQ(nl_job_get_state(job, &state, &p), NL_OK);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_EQ(state, NL_JOB_PAUSED);
  };
  wait_paused();
  const int64_t paused_at = p.step;
  EXPECT_EQ(paused_at, 1) << "paused at the first step boundary";
  // Paused: the engine is free (generation gives the same text) and no step is taken.
  EXPECT_EQ(generate(model.m, "Zorbo", 32), base_text);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ASSERT_EQ(nl_job_get_state(job, &state, &p), NL_OK);
  EXPECT_EQ(state, NL_JOB_PAUSED);
  EXPECT_EQ(p.step, paused_at);
  // Running again: generation between its steps still gives the same text. It pauses itself
  // at step 5, and is cancelled there.
  gate.pause_at = 5;
  ASSERT_EQ(nl_job_resume(job), NL_OK);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(generate(model.m, "Zorbo", 32), base_text);
  wait_paused();
  EXPECT_EQ(p.step, 5);
  ASSERT_EQ(nl_job_cancel(job), NL_OK);
  nl_train_result r;
  ASSERT_EQ(nl_job_wait(job, &r), NL_OK) << nl_last_error();
  EXPECT_EQ(r.finished, 0);
  EXPECT_EQ(r.exit_code, 75);
  EXPECT_STREQ(r.stop_reason, "stopped by the caller");
  EXPECT_EQ(r.step, 5);
  ASSERT_EQ(nl_job_get_state(job, &state, nullptr), NL_OK);
  EXPECT_EQ(state, NL_JOB_DONE);
  EXPECT_EQ(nl_job_pause(job), NL_ERR_STATE);
  EXPECT_EQ(nl_job_wait(job, &r), NL_OK) << "waiting again gives the same answer";
  EXPECT_EQ(nl_job_free(job), NL_OK);
  EXPECT_FALSE(fs::exists(td / "api/adapter.gguf"));

  // The same options continue it from the checkpoint to the end.
  ASSERT_EQ(nl_train(model.m, t.as_json().c_str(), nullptr, &r), NL_OK) << nl_last_error();
  EXPECT_EQ(r.finished, 1);
  EXPECT_EQ(r.step, 40);
  TrainArgs c = t;
  c.out = (td / "cli").string();
  const auto cli = run_cli(c.as_flags(path));
  ASSERT_EQ(cli.rc, 0) << cli.err;
  EXPECT_EQ(nltest::read_text(td / "api/adapter.gguf"), nltest::read_text(td / "cli/adapter.gguf"));

  // Freeing a running job cancels it (and waits for it).
  TrainArgs more = t;
  more.out = (td / "freed").string();
  ASSERT_EQ(nl_train_start(model.m, more.as_json().c_str(), nullptr, &job), NL_OK);
  EXPECT_EQ(nl_job_free(job), NL_OK);
  EXPECT_FALSE(fs::exists(td / "freed/adapter.gguf"));
}

// Several threads generate with different adapters on one model at once; each gets the text it
// gets alone.
TEST(CApi, ConcurrentGenerationsWithDifferentAdapters) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", path);
  nltest::TempDir td;
  Model model(path);
  TrainArgs t{stories_data("train.jsonl"), (td / "a").string(), 4};
  t.extra["precision"] = "f32";
  nl_train_result r;
  ASSERT_EQ(nl_train(model.m, t.as_json().c_str(), nullptr, &r), NL_OK) << nl_last_error();
  nl_adapter* a = nullptr;
  ASSERT_EQ(nl_adapter_load(model.m, (td / "a").c_str(), 1.0f, &a), NL_OK) << nl_last_error();
  nl_adapter* half = nullptr;
  ASSERT_EQ(nl_adapter_load(model.m, (td / "a/adapter.gguf").c_str(), 0.5f, &half), NL_OK) << nl_last_error();
  const std::vector<nl_adapter*> choices = {nullptr, a, half};
  std::vector<std::string> alone;
  for (nl_adapter* c : choices) alone.push_back(generate(model.m, "Once", 40, c));
  EXPECT_NE(alone[0], alone[1]);
  std::vector<std::thread> threads;
  std::vector<std::string> got(6);
  for (size_t i = 0; i < got.size(); ++i)
    threads.emplace_back([&, i] { got[i] = generate(model.m, "Once", 40, choices[i % choices.size()]); });
  for (auto& th : threads) th.join();
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], alone[i % choices.size()]) << "thread " << i;
  EXPECT_EQ(nl_adapter_free(a), NL_OK);
  EXPECT_EQ(nl_adapter_free(half), NL_OK);
}

}  // namespace
