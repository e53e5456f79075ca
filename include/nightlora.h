/* nightlora C API: train LoRA adapters on a quantized LLM and generate with them, on one
 * resident model, from C (and anything that calls C: Python's ctypes, JNI, Swift, ...).
 *
 * C99, no C++ types. Link libnightlora.so (pkg-config nightlora, or CMake
 * find_package(nightlora) -> nightlora::nightlora). docs/EMBEDDING.md is the guide.
 *
 * Conventions
 *  - Every function that can fail returns an nl_status. NL_OK is 0. On failure,
 *    nl_last_error() gives the message the command-line tool would print for the same
 *    problem ("nightlora: error: <where>: <what> (<what to do>)"). No C++ exception ever
 *    leaves the library.
 *  - Handles (nl_model, nl_adapter, nl_job) are opaque. A call given a NULL, freed or
 *    wrong-kind handle returns NL_ERR_INVALID_ARGUMENT instead of touching it.
 *  - Options structs begin with `struct_size`: fill them with the *_init function (which
 *    sets every default, equal to the CLI's) and change what you need. Fields past an older
 *    caller's struct_size take their defaults, so the structs can grow without breaking
 *    programs built against this header. Fields are only ever appended; a library older
 *    than the header refuses a struct_size larger than it knows (NL_ERR_INVALID_ARGUMENT),
 *    so a program that needs a later field learns so from the status, never by misreading.
 *  - Strings are UTF-8 and NUL-terminated. Strings the library returns in a struct are
 *    owned by that struct (freed by its *_free function) or, for const char* returns, live
 *    as long as the library.
 *  - Threads: each function says what may run at the same time. In short: a model may be
 *    used from several threads at once (generation, evaluation and training jobs take turns
 *    on its one frozen engine: one forward or training step at a time, serving before
 *    training), and callbacks run on the thread doing the work.
 */
#ifndef NIGHTLORA_H
#define NIGHTLORA_H

#include <stddef.h>
#include <stdint.h>

/* The version of this API. A program can compare it with nl_api_version() at run time: the
 * library's number is the SONAME's (libnightlora.so.1). Functions and struct fields are
 * only ever added within a version. */
#define NL_API_VERSION 1

#if defined(__GNUC__)
#define NL_API __attribute__((visibility("default")))
#else
#define NL_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Status, errors, version -------------------------------------------------------- */

typedef enum nl_status {
  NL_OK = 0,
  /* Bad input: a file, the data or an option is wrong; the message says what, where and
   * what to do (the CLI's exit code 1). */
  NL_ERR_BAD_INPUT = 1,
  /* A bug in nightlora; please report it with the message (the CLI's exit code 2). */
  NL_ERR_INTERNAL = 2,
  /* Another process or job holds the training output folder (the CLI's exit code 4). */
  NL_ERR_BUSY = 4,
  /* A NULL pointer where a value is needed, a handle that is not one (freed, or another
   * kind), or a struct_size the library does not know. */
  NL_ERR_INVALID_ARGUMENT = 5,
  /* The call does not fit the object's state (resuming a job that is not paused, ...). */
  NL_ERR_STATE = 6
} nl_status;

/* The message of this thread's last failed call ("" when its last call succeeded).
 * Thread-local: each thread sees its own. Valid until this thread's next nl_* call. */
NL_API const char* nl_last_error(void);

/* A short name for a status ("ok", "bad input", ...). Any thread. */
NL_API const char* nl_status_name(nl_status status);

/* The library's version ("0.27.0") and API version (NL_API_VERSION it was built with).
 * Any thread. */
NL_API const char* nl_version(void);
NL_API int nl_api_version(void);

/* ---- Models --------------------------------------------------------------------------- */

/* A model loaded once, with its frozen engine made once (the quantized weights resident in
 * the engine's layout); generation, evaluation and training all use it. */
typedef struct nl_model nl_model;

typedef struct nl_model_options {
  uint32_t struct_size; /* sizeof(nl_model_options) */
  int32_t threads;      /* engine threads; 0: all cores (default) */
  /* Frozen-engine backend: "cpu" (default), "vulkan" or "auto", as `--engine`. */
  const char* engine;
} nl_model_options;

/* Any thread. */
NL_API void nl_model_options_init(nl_model_options* options);

/* Loads a GGUF file or a Hugging Face folder. options may be NULL (defaults). On success
 * *out is a new handle (free it with nl_model_free). Any thread; loads may run at once. */
NL_API nl_status nl_model_load(const char* path, const nl_model_options* options, nl_model** out);

/* Releases the handle. Calls already running on it finish first, and adapters and jobs made
 * from it keep the model loaded until they are freed too. The handle may not be used again.
 * NULL is accepted (and does nothing). Any thread. */
NL_API nl_status nl_model_free(nl_model* model);

typedef struct nl_model_info {
  int64_t n_layer, d_model, n_head, n_kv_head, d_ff, vocab, context;
  char arch[32];        /* "llama", "qwen2", "qwen3" */
  char chat_format[32]; /* the chat template detected ("chatml", "llama3", ...) or "" */
} nl_model_info;

/* The model's shape. Any thread. */
NL_API nl_status nl_model_get_info(const nl_model* model, nl_model_info* out);

/* ---- Adapters -------------------------------------------------------------------------- */

/* A LoRA adapter loaded for one model (a PEFT folder or a llama.cpp LoRA GGUF, as written
 * by training), applied on the fly to the resident weights: never merged, never a reload. */
typedef struct nl_adapter nl_adapter;

/* Loads an adapter for `model` at `scale` (1.0: the adapter's own alpha/rank, as
 * `--adapter PATH`; other values as `--adapter PATH:SCALE`). Refuses an adapter made for
 * another model. Any thread. */
NL_API nl_status nl_adapter_load(nl_model* model, const char* path, float scale, nl_adapter** out);

/* Changes the scale: generations and evaluations that start afterwards use it. Any thread. */
NL_API nl_status nl_adapter_set_scale(nl_adapter* adapter, float scale);
NL_API nl_status nl_adapter_get_scale(const nl_adapter* adapter, float* scale);

/* Unloads it. Generations already running with it finish with it. NULL is accepted. Any
 * thread. */
NL_API nl_status nl_adapter_free(nl_adapter* adapter);

/* ---- Generation ------------------------------------------------------------------------ */

/* Called with each new token and the text it completes (possibly empty: a character split
 * over several tokens comes out whole, with its last token; text that may begin a stop
 * string is held back until it is known not to). Return 0 to go on, anything
 * else to stop the generation there (the token is kept). Runs on the generating thread
 * while the engine is free for others. */
typedef int (*nl_token_callback)(void* user_data, int32_t token, const char* text, size_t text_len);

/* A seed meaning "a random one" (the CLI's default without --seed). */
#define NL_SEED_RANDOM UINT64_MAX

/* Sampling as `nightlora generate` samples (include/nightlora/infer/sampler.h): repetition
 * penalty, temperature, top-k, top-p, min-p, with llama.cpp's names and defaults. */
typedef struct nl_generate_options {
  uint32_t struct_size; /* sizeof(nl_generate_options) */
  int32_t max_tokens;   /* -n: most new tokens; 256 */
  float temperature;    /* --temp: 0 is greedy; 0.8 */
  int32_t top_k;        /* --top-k: 0 = all; 40 */
  float top_p;          /* --top-p: 1 = off; 0.95 */
  float min_p;          /* --min-p: 0 = off; 0.05 */
  float repeat_penalty; /* --repeat-penalty: 1 = off; 1.0 */
  int32_t repeat_last_n; /* --repeat-last-n: 0 = off, -1 = the whole context; 64 */
  uint64_t seed;        /* --seed; NL_SEED_RANDOM */
  /* --stop: the text ends before the first of these strings (not included); none by default. */
  const char* const* stop;
  size_t n_stop;
  /* --precision "int8" (default: int8 products) or "f32" (the exact path); --kv-type "f16"
   * (default) or "f32". */
  const char* precision;
  const char* kv_type;
  /* Chat template for nl_chat instead of the model's: "chatml", "qwen2", "qwen2.5",
   * "qwen3", "llama3", "llama3.1"; NULL: detect it from the model. */
  const char* chat_format;
  /* Adapters applied together (each at its scale, stacked as `--adapter A:S --adapter B:T`);
   * none: the base model. The same handles may be used by several generations at once. */
  nl_adapter* const* adapters;
  size_t n_adapters;
  nl_token_callback on_token; /* may be NULL */
  void* user_data;            /* passed to on_token */
} nl_generate_options;

/* Any thread. */
NL_API void nl_generate_options_init(nl_generate_options* options);

typedef enum nl_stop_reason {
  NL_STOP_TOKEN = 0,    /* the model produced an end token (EOS, end of turn, BOS) */
  NL_STOP_LENGTH = 1,   /* max_tokens, or the model's context is full */
  NL_STOP_CALLBACK = 2, /* on_token asked to stop */
  NL_STOP_STRING = 3    /* one of the stop strings appeared (it is not in the text) */
} nl_stop_reason;

typedef struct nl_generation {
  char* text;             /* the new text (no prompt); free with nl_generation_free */
  int64_t prompt_tokens;  /* tokens of the prompt (BOS and chat markers included) */
  int64_t new_tokens;     /* tokens generated (the end token not counted) */
  int32_t stop_reason;    /* nl_stop_reason */
  double prompt_seconds;  /* the prompt's forward pass */
  double decode_seconds;  /* the one-token forward passes after it */
} nl_generation;

/* Generates from `prompt` (as `nightlora generate --prompt P`: BOS first when the model adds
 * one; "" or NULL starts from BOS alone). options may be NULL (defaults). *out is filled on
 * NL_OK (free it with nl_generation_free). Any thread, several at once on one model: they
 * take turns one forward pass at a time, before waiting training steps. */
NL_API nl_status nl_generate(nl_model* model, const char* prompt, const nl_generate_options* options,
                             nl_generation* out);

typedef struct nl_chat_message {
  const char* role; /* "system", "user" or "assistant" */
  const char* content;
} nl_chat_message;

/* Generates the assistant's answer to `messages`, rendered with the model's chat template
 * followed by the assistant header (as `nightlora generate --chat`). Threads: as
 * nl_generate. */
NL_API nl_status nl_chat(nl_model* model, const nl_chat_message* messages, size_t n_messages,
                         const nl_generate_options* options, nl_generation* out);

/* Frees the text and zeroes the struct. NULL is accepted. Any thread. */
NL_API void nl_generation_free(nl_generation* generation);

/* ---- Training jobs --------------------------------------------------------------------- */

/* A training run (what `nightlora train` runs) on the model's resident weights, in a
 * background thread. */
typedef struct nl_job nl_job;

/* The figures of an optimizer step (the first version's progress report; nl_train_event
 * below carries these and more). The numbers are the step's log.jsonl row's. */
typedef struct nl_train_progress {
  int64_t step;        /* optimizer steps done */
  int64_t total_steps;
  double loss;         /* of this step (NaN when the divergence guard refused it) */
  double lr;
  double grad_norm;
  double tokens_per_second;
  const char* status;  /* the CLI's status line for the step */
} nl_train_progress;

/* After each optimizer step, on the job's thread. */
typedef void (*nl_progress_callback)(void* user_data, const nl_train_progress* progress);

/* What an nl_train_event reports. */
typedef enum nl_train_event_kind {
  NL_TRAIN_EVENT_STEP = 0,       /* an optimizer step finished (status: its status line) */
  NL_TRAIN_EVENT_VALIDATION = 1, /* the validation set was scored: val_loss is the new figure */
  NL_TRAIN_EVENT_CHECKPOINT = 2, /* a checkpoint of `step` was written */
  /* The job waits (paused 1, reason: why: on battery, outside the time window, ..., or
   * "paused by the caller" for nl_job_pause), or goes on again (paused 0). */
  NL_TRAIN_EVENT_WAITING = 3,
  NL_TRAIN_EVENT_PACING = 4      /* thermal pacing idled idle_seconds after `step` (reason: why) */
} nl_train_event_kind;

/* Where a training job stands. Every number is the one the run's log.jsonl records for the
 * same event ("train", "val", "wait" and "pace" rows), so no log reader is needed. Fields
 * added later are appended; struct_size says how many bytes the library filled (a library
 * older than your header fills fewer: read the fields that fit in struct_size). */
typedef struct nl_train_event {
  uint32_t struct_size; /* bytes filled (sizeof(nl_train_event) of the library's version) */
  int32_t kind;         /* nl_train_event_kind */
  int64_t step;         /* optimizer steps done (the event's step) */
  int64_t total_steps;
  int64_t epoch;        /* 0-based epoch of the last step's last example */
  /* The last step's figures (NaN before this session's first step). */
  double loss;
  double lr;
  double grad_norm;
  double tokens_per_second;
  int32_t skipped;      /* 1: the divergence guard refused the last step (its loss may be NaN) */
  int32_t paused;       /* 1 while the job waits (see NL_TRAIN_EVENT_WAITING) */
  double val_loss;      /* the last validation loss of this session; NaN before the first */
  double elapsed_seconds; /* training time so far, earlier sessions of the run included */
  double idle_seconds;  /* NL_TRAIN_EVENT_PACING: idle time after the step; else 0 */
  char reason[256];     /* WAITING, PACING: why; else "" */
  char status[256];     /* STEP: the CLI's status line; else "" */
} nl_train_event;

/* Each event of the job (steps, validations, checkpoints, waits, pacing), on the job's
 * thread; `event` lives for the call. */
typedef void (*nl_train_event_callback)(void* user_data, const nl_train_event* event);

typedef enum nl_log_level { NL_LOG_INFO = 0, NL_LOG_WARNING = 1 } nl_log_level;
/* Each line the CLI prints (what was loaded, plans, validation, saving; warnings), on the
 * job's thread. */
typedef void (*nl_log_callback)(void* user_data, int32_t level, const char* line);

typedef struct nl_train_callbacks {
  uint32_t struct_size; /* sizeof(nl_train_callbacks) */
  nl_progress_callback on_progress; /* may be NULL */
  nl_log_callback on_log;           /* may be NULL */
  void* user_data;                  /* passed to every callback */
  nl_train_event_callback on_event; /* may be NULL (a later field: see struct_size) */
} nl_train_callbacks;

/* Any thread. */
NL_API void nl_train_callbacks_init(nl_train_callbacks* callbacks);

typedef enum nl_job_state {
  NL_JOB_RUNNING = 0,
  NL_JOB_PAUSED = 1,  /* waiting at a step boundary for nl_job_resume */
  NL_JOB_DONE = 2     /* ended: nl_job_wait gives the result at once */
} nl_job_state;

typedef struct nl_train_result {
  int32_t finished;      /* 1: the adapter is written in the output folder */
  int32_t early_stopped; /* finished by early-stop before the last step */
  int32_t diverged;      /* the divergence guard gave up; no adapter was written */
  int32_t exit_code;     /* what `nightlora train` would exit with: 0, 3, 75 (stopped, resumable) */
  int64_t step, total_steps;
  int64_t kept_step;     /* the step of the adapter written (best validation or last); -1 */
  double kept_val_loss;  /* its validation loss, with a validation set */
  char stop_reason[256]; /* when not finished: "stopped by the caller", "--max-steps reached", ... */
} nl_train_result;

/* Starts a training job on `model`. options_json is a JSON object whose keys are the
 * `nightlora train` option names and whose values are what the options take, e.g.
 *   {"data": "train.jsonl", "out": "runs/zorbo", "rank": 8, "iters": 20, "lr": 5e-3}
 * ("seq-len" and "seq_len" are the same key; flags such as "resume" take true/false). Every
 * default is the CLI's (precision "auto" included). "model" may be left out (it is this
 * model's path). Bad options (unknown keys, wrong types, values the CLI would refuse) fail
 * here with NL_ERR_BAD_INPUT; problems found while the job loads its data fail the job
 * (nl_job_wait says so). callbacks may be NULL. On success *out is a running job: wait for
 * it and free it. Running the same options again on the same folder continues a stopped
 * run from its checkpoint. Any thread. */
NL_API nl_status nl_train_start(nl_model* model, const char* options_json, const nl_train_callbacks* callbacks,
                                nl_job** out);

/* Pause: the job stops at its next step boundary and waits there (holding its state in
 * memory, the engine free for others) until nl_job_resume. Resume fails with NL_ERR_STATE
 * when the job is not paused. Cancel: the job stops at its next step boundary, saving a
 * checkpoint (result: not finished, stop_reason "stopped by the caller", exit code 75; the
 * same options later continue it); a paused job is cancelled at once. Any thread. */
NL_API nl_status nl_job_pause(nl_job* job);
NL_API nl_status nl_job_resume(nl_job* job);
NL_API nl_status nl_job_cancel(nl_job* job);

/* The job's state and its last progress (step, total_steps, loss...; status is NULL here).
 * progress may be NULL. Any thread. */
NL_API nl_status nl_job_get_state(nl_job* job, int32_t* state, nl_train_progress* progress);

/* The job's latest event (as on_event last saw it; before the first: step and total 0, kind
 * NL_TRAIN_EVENT_STEP, NaN figures; while nl_job_pause holds the job: WAITING, paused 1).
 * Set out->struct_size to sizeof(nl_train_event) first; on return it is the number of bytes
 * filled (fewer when the library is older than your header). Any thread. */
NL_API nl_status nl_job_get_event(nl_job* job, nl_train_event* out);

/* Blocks until the job ends, then fills *result (may be NULL). Returns NL_OK when the run
 * ended normally (finished, diverged or stopped: see the result), or the job's error (bad
 * data, busy folder, ...) with nl_last_error() set on the calling thread. May be called
 * again, from any thread, with the same answer; from the job's own callbacks it returns
 * NL_ERR_STATE (the job would wait for itself). */
NL_API nl_status nl_job_wait(nl_job* job, nl_train_result* result);

/* Cancels the job if it is still running, waits for it, and releases the handle. NULL is
 * accepted. Any thread (a wait still running on another thread finishes first); from the
 * job's own callbacks it returns NL_ERR_STATE and frees nothing (the job would wait for
 * itself). */
NL_API nl_status nl_job_free(nl_job* job);

/* Start, wait and free in one call (the job runs on the calling thread's behalf). Any
 * thread. */
NL_API nl_status nl_train(nl_model* model, const char* options_json, const nl_train_callbacks* callbacks,
                          nl_train_result* result);

/* ---- Evaluation ------------------------------------------------------------------------ */

typedef struct nl_eval_options {
  uint32_t struct_size; /* sizeof(nl_eval_options) */
  nl_adapter* const* adapters; /* applied together (each at its scale); none: the base */
  size_t n_adapters;
  int64_t seq_len;             /* --seq-len; 512 */
  int64_t batch_tokens;        /* --batch-tokens; 512 */
  const char* train_on;        /* --train-on "completion" (default) or "all" */
  const char* long_examples;   /* --long-examples "truncate" (default), "skip", "error" */
  const char* precision;       /* --precision "f32" (default), "f16", "int8" */
  /* nl_eval_text*: --stride, tokens between window starts; 0 (default): half of seq_len.
   * (A later field: see struct_size.) */
  int64_t stride;
} nl_eval_options;

/* Any thread. */
NL_API void nl_eval_options_init(nl_eval_options* options);

typedef struct nl_eval_result {
  double loss;        /* mean NLL over the supervised tokens (NaN/inf: a broken adapter) */
  double perplexity;  /* exp(loss) */
  /* nl_eval: examples, left out, tokens, supervised tokens. nl_eval_text*: examples are the
   * windows, tokens the text's tokens, supervised_tokens the tokens scored; skipped 0. */
  int64_t examples, skipped, tokens, supervised_tokens;
} nl_eval_result;

/* The mean loss and perplexity of the model (with the adapters) on the supervised tokens of
 * a JSONL file in any format training reads, computed as `nightlora eval` computes them
 * (the same numbers). Threads: as nl_generate (it takes its turn on the engine). */
NL_API nl_status nl_eval(nl_model* model, const char* data_path, const nl_eval_options* options,
                         nl_eval_result* out);

/* The perplexity of raw text, as `nightlora eval --text FILE --seq-len N --stride S`
 * computes it (the same numbers; include/nightlora/eval/text_windows.h): the text is
 * tokenized once (BOS first when the model adds one) and read in windows of seq_len tokens
 * starting stride tokens apart, each token scored once. nl_eval_text_file reads a UTF-8
 * file; nl_eval_text takes the text itself (text_len bytes, NUL not needed). train_on and
 * long_examples do not apply. Threads: as nl_eval. */
NL_API nl_status nl_eval_text_file(nl_model* model, const char* text_path, const nl_eval_options* options,
                                   nl_eval_result* out);
NL_API nl_status nl_eval_text(nl_model* model, const char* text, size_t text_len, const nl_eval_options* options,
                              nl_eval_result* out);

#ifdef __cplusplus
}
#endif

#endif /* NIGHTLORA_H */
