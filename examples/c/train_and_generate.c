/* nightlora from C: load a model once, train a small LoRA adapter on it in a background job
 * (progress printed as it goes), then generate with and without the adapter on the same
 * resident weights.
 *
 *   cc train_and_generate.c $(pkg-config --cflags --libs nightlora) -o train_and_generate
 *   ./train_and_generate MODEL.gguf TRAIN.jsonl OUT_DIR [PROMPT]
 *
 * e.g. with the repository's stories: ../shared/models/stories260K/stories260K.gguf and
 * data/stories/train.jsonl (a little dragon called Zorbo). Exit status 0 on success. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nightlora.h>

static int check(nl_status s, const char* what) {
  if (s != NL_OK) {
    fprintf(stderr, "%s failed (%s): %s\n", what, nl_status_name(s), nl_last_error());
    return 0;
  }
  return 1;
}

/* Each event of the job: steps, validations, checkpoints, waits (with the same numbers as the
 * run's log.jsonl). */
static void on_event(void* user_data, const nl_train_event* e) {
  (void)user_data;
  switch (e->kind) {
    case NL_TRAIN_EVENT_STEP:
      printf("step %lld/%lld  loss %.4f  %.0f tok/s\n", (long long)e->step, (long long)e->total_steps, e->loss,
             e->tokens_per_second);
      break;
    case NL_TRAIN_EVENT_VALIDATION:
      printf("validation at step %lld: loss %.4f\n", (long long)e->step, e->val_loss);
      break;
    case NL_TRAIN_EVENT_CHECKPOINT:
      printf("checkpoint at step %lld\n", (long long)e->step);
      break;
    case NL_TRAIN_EVENT_WAITING:
      printf(e->paused ? "waiting: %s\n" : "going on%s\n", e->reason);
      break;
    default:
      break;
  }
}

static void on_log(void* user_data, int32_t level, const char* line) {
  (void)user_data;
  fprintf(stderr, "%s%s\n", level == NL_LOG_WARNING ? "warning: " : "", line);
}

static int on_token(void* user_data, int32_t token, const char* text, size_t len) {
  (void)user_data;
  (void)token;
  fwrite(text, 1, len, stdout);
  fflush(stdout);
  return 0; /* go on */
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s MODEL TRAIN.jsonl OUT_DIR [PROMPT]\n", argv[0]);
    return 2;
  }
  const char* prompt = argc > 4 ? argv[4] : "Zorbo";
  printf("nightlora %s (C API %d)\n", nl_version(), nl_api_version());
  if (nl_api_version() != NL_API_VERSION) {
    fprintf(stderr, "built against C API %d, running with %d\n", NL_API_VERSION, nl_api_version());
    return 1;
  }

  nl_model* model = NULL;
  if (!check(nl_model_load(argv[1], NULL, &model), "nl_model_load")) return 1;
  nl_model_info info;
  if (!check(nl_model_get_info(model, &info), "nl_model_get_info")) return 1;
  printf("model: %s, %lld layers, vocab %lld\n", info.arch, (long long)info.n_layer, (long long)info.vocab);

  /* Options are `nightlora train`'s, as JSON. */
  char options[4096];
  snprintf(options, sizeof options,
           "{\"data\": \"%s\", \"out\": \"%s\", \"iters\": 30, \"lr\": 5e-3, \"batch\": 4, \"seq-len\": 128}",
           argv[2], argv[3]);
  nl_train_callbacks callbacks;
  nl_train_callbacks_init(&callbacks);
  callbacks.on_event = on_event;
  callbacks.on_log = on_log;
  nl_job* job = NULL;
  if (!check(nl_train_start(model, options, &callbacks, &job), "nl_train_start")) return 1;
  nl_train_result result;
  if (!check(nl_job_wait(job, &result), "nl_job_wait")) return 1;
  nl_job_free(job);
  if (!result.finished) {
    fprintf(stderr, "training stopped: %s\n", result.stop_reason);
    return 1;
  }
  printf("trained %lld steps\n", (long long)result.step);

  char adapter_path[4096];
  snprintf(adapter_path, sizeof adapter_path, "%s/adapter.gguf", argv[3]);
  nl_adapter* adapter = NULL;
  if (!check(nl_adapter_load(model, adapter_path, 1.0f, &adapter), "nl_adapter_load")) return 1;

  nl_generate_options gen;
  nl_generate_options_init(&gen);
  gen.temperature = 0; /* greedy */
  gen.max_tokens = 60;
  gen.on_token = on_token;
  nl_generation base, adapted;
  printf("base:    ");
  if (!check(nl_generate(model, prompt, &gen, &base), "nl_generate")) return 1;
  printf("\nadapted: ");
  gen.adapters = &adapter;
  gen.n_adapters = 1;
  if (!check(nl_generate(model, prompt, &gen, &adapted), "nl_generate")) return 1;
  printf("\n");
  const int differ = strcmp(base.text, adapted.text) != 0;
  printf("%lld + %lld tokens; the adapter %s the text\n", (long long)base.new_tokens, (long long)adapted.new_tokens,
         differ ? "changed" : "did not change");
  nl_generation_free(&base);
  nl_generation_free(&adapted);
  nl_adapter_free(adapter);
  nl_model_free(model);
  return differ ? 0 : 1;
}
