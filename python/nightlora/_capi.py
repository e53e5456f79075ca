"""The C API (include/nightlora.h) as ctypes declarations: structs, callbacks, functions.

Every struct here mirrors the header field for field; keep them in step with it (the
struct_size each init function sets is checked against ctypes.sizeof in load_library).
"""
import ctypes
import ctypes.util
import os
from pathlib import Path

API_VERSION = 1
SEED_RANDOM = 2**64 - 1

OK, ERR_BAD_INPUT, ERR_INTERNAL, ERR_BUSY, ERR_INVALID_ARGUMENT, ERR_STATE = 0, 1, 2, 4, 5, 6
STOP_TOKEN, STOP_LENGTH, STOP_CALLBACK, STOP_STRING = 0, 1, 2, 3
LOG_INFO, LOG_WARNING = 0, 1
JOB_RUNNING, JOB_PAUSED, JOB_DONE = 0, 1, 2
EVENT_KINDS = {0: "step", 1: "validation", 2: "checkpoint", 3: "waiting", 4: "pacing"}

c_char_p = ctypes.c_char_p
c_void_p = ctypes.c_void_p


class ModelOptions(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("threads", ctypes.c_int32), ("engine", c_char_p)]


class ModelInfo(ctypes.Structure):
    _fields_ = [(n, ctypes.c_int64) for n in ("n_layer", "d_model", "n_head", "n_kv_head", "d_ff", "vocab", "context")] + [
        ("arch", ctypes.c_char * 32),
        ("chat_format", ctypes.c_char * 32),
    ]


TOKEN_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, c_void_p, ctypes.c_int32, ctypes.POINTER(ctypes.c_char), ctypes.c_size_t)


class GenerateOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("max_tokens", ctypes.c_int32),
        ("temperature", ctypes.c_float),
        ("top_k", ctypes.c_int32),
        ("top_p", ctypes.c_float),
        ("min_p", ctypes.c_float),
        ("repeat_penalty", ctypes.c_float),
        ("repeat_last_n", ctypes.c_int32),
        ("seed", ctypes.c_uint64),
        ("stop", ctypes.POINTER(c_char_p)),
        ("n_stop", ctypes.c_size_t),
        ("precision", c_char_p),
        ("kv_type", c_char_p),
        ("chat_format", c_char_p),
        ("adapters", ctypes.POINTER(c_void_p)),
        ("n_adapters", ctypes.c_size_t),
        ("on_token", TOKEN_CALLBACK),
        ("user_data", c_void_p),
    ]


class Generation(ctypes.Structure):
    _fields_ = [
        ("text", ctypes.POINTER(ctypes.c_char)),
        ("prompt_tokens", ctypes.c_int64),
        ("new_tokens", ctypes.c_int64),
        ("stop_reason", ctypes.c_int32),
        ("prompt_seconds", ctypes.c_double),
        ("decode_seconds", ctypes.c_double),
    ]


class ChatMessage(ctypes.Structure):
    _fields_ = [("role", c_char_p), ("content", c_char_p)]


class TrainProgress(ctypes.Structure):
    _fields_ = [
        ("step", ctypes.c_int64),
        ("total_steps", ctypes.c_int64),
        ("loss", ctypes.c_double),
        ("lr", ctypes.c_double),
        ("grad_norm", ctypes.c_double),
        ("tokens_per_second", ctypes.c_double),
        ("status", c_char_p),
    ]


PROGRESS_CALLBACK = ctypes.CFUNCTYPE(None, c_void_p, ctypes.POINTER(TrainProgress))
LOG_CALLBACK = ctypes.CFUNCTYPE(None, c_void_p, ctypes.c_int32, c_char_p)


class TrainEvent(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("kind", ctypes.c_int32),
        ("step", ctypes.c_int64),
        ("total_steps", ctypes.c_int64),
        ("epoch", ctypes.c_int64),
        ("loss", ctypes.c_double),
        ("lr", ctypes.c_double),
        ("grad_norm", ctypes.c_double),
        ("tokens_per_second", ctypes.c_double),
        ("skipped", ctypes.c_int32),
        ("paused", ctypes.c_int32),
        ("val_loss", ctypes.c_double),
        ("elapsed_seconds", ctypes.c_double),
        ("idle_seconds", ctypes.c_double),
        ("reason", ctypes.c_char * 256),
        ("status", ctypes.c_char * 256),
    ]


EVENT_CALLBACK = ctypes.CFUNCTYPE(None, c_void_p, ctypes.POINTER(TrainEvent))


class TrainCallbacks(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("on_progress", PROGRESS_CALLBACK),
        ("on_log", LOG_CALLBACK),
        ("user_data", c_void_p),
        ("on_event", EVENT_CALLBACK),
    ]


class TrainResult(ctypes.Structure):
    _fields_ = [
        ("finished", ctypes.c_int32),
        ("early_stopped", ctypes.c_int32),
        ("diverged", ctypes.c_int32),
        ("exit_code", ctypes.c_int32),
        ("step", ctypes.c_int64),
        ("total_steps", ctypes.c_int64),
        ("kept_step", ctypes.c_int64),
        ("kept_val_loss", ctypes.c_double),
        ("stop_reason", ctypes.c_char * 256),
    ]


class EvalOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("adapters", ctypes.POINTER(c_void_p)),
        ("n_adapters", ctypes.c_size_t),
        ("seq_len", ctypes.c_int64),
        ("batch_tokens", ctypes.c_int64),
        ("train_on", c_char_p),
        ("long_examples", c_char_p),
        ("precision", c_char_p),
        ("stride", ctypes.c_int64),
    ]


class EvalResult(ctypes.Structure):
    _fields_ = [
        ("loss", ctypes.c_double),
        ("perplexity", ctypes.c_double),
        ("examples", ctypes.c_int64),
        ("skipped", ctypes.c_int64),
        ("tokens", ctypes.c_int64),
        ("supervised_tokens", ctypes.c_int64),
    ]


P = ctypes.POINTER
_SIGNATURES = {
    "nl_last_error": (c_char_p, []),
    "nl_status_name": (c_char_p, [ctypes.c_int]),
    "nl_version": (c_char_p, []),
    "nl_api_version": (ctypes.c_int, []),
    "nl_model_options_init": (None, [P(ModelOptions)]),
    "nl_model_load": (ctypes.c_int, [c_char_p, P(ModelOptions), P(c_void_p)]),
    "nl_model_free": (ctypes.c_int, [c_void_p]),
    "nl_model_get_info": (ctypes.c_int, [c_void_p, P(ModelInfo)]),
    "nl_adapter_load": (ctypes.c_int, [c_void_p, c_char_p, ctypes.c_float, P(c_void_p)]),
    "nl_adapter_set_scale": (ctypes.c_int, [c_void_p, ctypes.c_float]),
    "nl_adapter_get_scale": (ctypes.c_int, [c_void_p, P(ctypes.c_float)]),
    "nl_adapter_free": (ctypes.c_int, [c_void_p]),
    "nl_generate_options_init": (None, [P(GenerateOptions)]),
    "nl_generate": (ctypes.c_int, [c_void_p, c_char_p, P(GenerateOptions), P(Generation)]),
    "nl_chat": (ctypes.c_int, [c_void_p, P(ChatMessage), ctypes.c_size_t, P(GenerateOptions), P(Generation)]),
    "nl_generation_free": (None, [P(Generation)]),
    "nl_train_callbacks_init": (None, [P(TrainCallbacks)]),
    "nl_train_start": (ctypes.c_int, [c_void_p, c_char_p, P(TrainCallbacks), P(c_void_p)]),
    "nl_job_pause": (ctypes.c_int, [c_void_p]),
    "nl_job_resume": (ctypes.c_int, [c_void_p]),
    "nl_job_cancel": (ctypes.c_int, [c_void_p]),
    "nl_job_get_state": (ctypes.c_int, [c_void_p, P(ctypes.c_int32), P(TrainProgress)]),
    "nl_job_get_event": (ctypes.c_int, [c_void_p, P(TrainEvent)]),
    "nl_job_wait": (ctypes.c_int, [c_void_p, P(TrainResult)]),
    "nl_job_free": (ctypes.c_int, [c_void_p]),
    "nl_train": (ctypes.c_int, [c_void_p, c_char_p, P(TrainCallbacks), P(TrainResult)]),
    "nl_eval_options_init": (None, [P(EvalOptions)]),
    "nl_eval": (ctypes.c_int, [c_void_p, c_char_p, P(EvalOptions), P(EvalResult)]),
    "nl_eval_text_file": (ctypes.c_int, [c_void_p, c_char_p, P(EvalOptions), P(EvalResult)]),
    "nl_eval_text": (ctypes.c_int, [c_void_p, c_char_p, ctypes.c_size_t, P(EvalOptions), P(EvalResult)]),
}


def _candidates():
    """Where libnightlora.so may be: $NIGHTLORA_LIBRARY, beside this package in an installed
    tree (PREFIX/lib/python3/dist-packages/nightlora -> PREFIX/lib), then the loader's path."""
    env = os.environ.get("NIGHTLORA_LIBRARY")
    if env:
        yield env
        return
    here = Path(__file__).resolve().parent
    for up in (3, 4):  # lib/python3/dist-packages/nightlora, lib/<arch>/python3/...
        if len(here.parents) > up - 1:
            lib = here.parents[up - 1]
            for name in (f"libnightlora.so.{API_VERSION}", "libnightlora.so"):
                if (lib / name).exists():
                    yield str(lib / name)
    found = ctypes.util.find_library("nightlora")
    if found:
        yield found
    yield f"libnightlora.so.{API_VERSION}"


def load_library():
    errors = []
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
            break
        except OSError as e:
            errors.append(f"{path}: {e}")
    else:
        raise OSError("nightlora: cannot load libnightlora.so (set NIGHTLORA_LIBRARY to its path): " + "; ".join(errors))
    for name, (restype, argtypes) in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    if lib.nl_api_version() != API_VERSION:
        raise OSError(f"nightlora: the library's C API is version {lib.nl_api_version()}, these bindings are {API_VERSION}")
    # The structs here must be the library's size (their init functions set struct_size).
    for struct, init in ((ModelOptions, lib.nl_model_options_init), (GenerateOptions, lib.nl_generate_options_init),
                         (TrainCallbacks, lib.nl_train_callbacks_init), (EvalOptions, lib.nl_eval_options_init)):
        s = struct()
        init(ctypes.byref(s))
        if s.struct_size != ctypes.sizeof(struct):
            raise OSError(f"nightlora: {struct.__name__} is {ctypes.sizeof(struct)} bytes here, {s.struct_size} in the library")
    return lib
