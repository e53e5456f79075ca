"""nightlora from Python: train LoRA adapters on a quantized LLM and generate with them, on one
resident model. Pure Python over the C API (libnightlora.so, include/nightlora.h) with ctypes.

    import nightlora
    model = nightlora.Model("stories260K.gguf")
    result = model.train(data="train.jsonl", out="runs/zorbo", iters=30, lr=5e-3,
                         progress=lambda p: print(p["step"], p["loss"]))
    zorbo = model.load_adapter("runs/zorbo/adapter.gguf")
    print(model.generate("Zorbo", max_tokens=60, temperature=0, adapters=[zorbo]))
    print(model.eval("valid.jsonl", adapters=[zorbo])["perplexity"])

Training options are `nightlora train`'s, as keyword arguments (seq_len=128 is --seq-len 128);
defaults are the CLI's. Errors raise nightlora.Error with the message the CLI prints.
docs/EMBEDDING.md is the guide (thread safety, install).
"""
import ctypes
import json
import math
import os
import threading

from . import _capi

__all__ = ["Model", "Adapter", "Job", "Error", "version", "API_VERSION"]

API_VERSION = _capi.API_VERSION
_lib = None
_lib_lock = threading.Lock()


def _L():
    global _lib
    with _lib_lock:
        if _lib is None:
            _lib = _capi.load_library()
    return _lib


class Error(Exception):
    """A failed call: .status is the C API's status code, the message the CLI's."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


def _check(status):
    if status != _capi.OK:
        raise Error(status, (_L().nl_last_error() or b"").decode("utf-8", "replace") or
                    _L().nl_status_name(status).decode())


def _b(s):
    return None if s is None else str(s).encode("utf-8")


def version():
    """The library's version, e.g. '0.27.0'."""
    return _L().nl_version().decode()


class _Owned:
    """A handle of the C library, freed by close(), by leaving a `with` block, or at garbage
    collection. Subclasses name their free function and what they are (for the error)."""

    _free = None  # the name of the nl_*_free function
    _what = "handle"

    def _handle(self):
        if not self._h:
            raise Error(_capi.ERR_INVALID_ARGUMENT, f"nightlora: error: the {self._what} was closed")
        return self._h

    def close(self):
        if getattr(self, "_h", None):
            getattr(_L(), self._free)(self._h)
            self._h = ctypes.c_void_p()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class Adapter(_Owned):
    """A LoRA adapter loaded for one model (Model.load_adapter); applied on the fly."""

    _free, _what = "nl_adapter_free", "adapter"

    def __init__(self, model, path, scale):
        self._h = ctypes.c_void_p()
        self.model = model
        self.path = str(path)
        _check(_L().nl_adapter_load(model._handle(), _b(path), float(scale), ctypes.byref(self._h)))

    @property
    def scale(self):
        s = ctypes.c_float()
        _check(_L().nl_adapter_get_scale(self._handle(), ctypes.byref(s)))
        return s.value

    @scale.setter
    def scale(self, value):
        _check(_L().nl_adapter_set_scale(self._handle(), float(value)))



def _adapter_array(adapters):
    adapters = list(adapters or [])
    arr = (ctypes.c_void_p * max(1, len(adapters)))(*[a._handle().value for a in adapters])
    return arr, len(adapters)


class _TokenRelay:
    """Passes each token to a Python callback; an exception in it stops the generation and is
    raised again once the C call returns."""

    def __init__(self, fn):
        self.fn, self.error = fn, None
        self.c = _capi.TOKEN_CALLBACK(self._call)

    def _call(self, _user, token, text, length):
        try:
            return 1 if self.fn(int(token), ctypes.string_at(text, length).decode("utf-8", "replace")) else 0
        except BaseException as e:  # noqa: B902 - handed back to the caller
            self.error = e
            return 1


def _event_dict(e):
    """An nl_train_event as a dict (NaN where nothing is measured yet)."""
    return {"event": _capi.EVENT_KINDS.get(e.kind, str(e.kind)), "step": e.step, "total_steps": e.total_steps,
            "epoch": e.epoch, "loss": e.loss, "lr": e.lr, "grad_norm": e.grad_norm,
            "tokens_per_second": e.tokens_per_second, "skipped": bool(e.skipped), "paused": bool(e.paused),
            "val_loss": e.val_loss, "elapsed_seconds": e.elapsed_seconds, "idle_seconds": e.idle_seconds,
            "reason": e.reason.decode("utf-8", "replace"), "status": e.status.decode("utf-8", "replace")}


class Job(_Owned):
    """A training job running in the library's background thread (Model.start_training).
    close() cancels the job if it still runs, waits for it, and frees it."""

    _free, _what = "nl_job_free", "job"

    def __init__(self, model, options, progress=None, log=None, events=None):
        self.model = model
        self._h = ctypes.c_void_p()
        self._errors = []
        cb = _capi.TrainCallbacks()
        _L().nl_train_callbacks_init(ctypes.byref(cb))

        def guard(fn):
            def call(*args):
                try:
                    fn(*args)
                except BaseException as e:  # noqa: B902 - raised again by wait()
                    self._errors.append(e)
            return call

        if progress or events:
            def on_event(_u, e):
                d = _event_dict(e.contents)
                if events:
                    events(d)
                if progress and d["event"] == "step":
                    progress(d)
            cb.on_event = _capi.EVENT_CALLBACK(guard(on_event))
        if log:
            cb.on_log = _capi.LOG_CALLBACK(guard(lambda _u, level, line: log(line.decode("utf-8", "replace"),
                                                                              level == _capi.LOG_WARNING)))
        self._callbacks = cb  # alive as long as the job
        _check(_L().nl_train_start(model._handle(), _b(json.dumps(options)), ctypes.byref(cb), ctypes.byref(self._h)))

    def pause(self):
        _check(_L().nl_job_pause(self._handle()))

    def resume(self):
        _check(_L().nl_job_resume(self._handle()))

    def cancel(self):
        _check(_L().nl_job_cancel(self._handle()))

    @property
    def state(self):
        """'running', 'paused' or 'done'."""
        s = ctypes.c_int32()
        _check(_L().nl_job_get_state(self._handle(), ctypes.byref(s), None))
        return {_capi.JOB_RUNNING: "running", _capi.JOB_PAUSED: "paused", _capi.JOB_DONE: "done"}[s.value]

    @property
    def progress(self):
        """The latest event, as the events callback gets it ("paused" while pause() holds the job)."""
        e = _capi.TrainEvent()
        e.struct_size = ctypes.sizeof(e)
        _check(_L().nl_job_get_event(self._handle(), ctypes.byref(e)))
        return _event_dict(e)

    def wait(self):
        """Blocks until the job ends; returns its result (a dict), raises Error for a failed
        job, or what a callback raised."""
        r = _capi.TrainResult()
        # Waiting in short slices keeps Ctrl-C working in the interpreter.
        while self.state != "done":
            threading.Event().wait(0.05)
        _check(_L().nl_job_wait(self._handle(), ctypes.byref(r)))
        if self._errors:
            raise self._errors[0]
        return {"finished": bool(r.finished), "early_stopped": bool(r.early_stopped), "diverged": bool(r.diverged),
                "exit_code": r.exit_code, "step": r.step, "total_steps": r.total_steps, "kept_step": r.kept_step,
                "kept_val_loss": r.kept_val_loss, "stop_reason": r.stop_reason.decode("utf-8", "replace")}


class Model(_Owned):
    """A model loaded once (GGUF file or Hugging Face folder); generation, evaluation and
    training share its one copy of the weights. Safe to use from several threads."""

    _free, _what = "nl_model_free", "model"

    def __init__(self, path, threads=0, engine="cpu"):
        self.path = str(path)
        self._h = ctypes.c_void_p()
        o = _capi.ModelOptions()
        _L().nl_model_options_init(ctypes.byref(o))
        o.threads = int(threads)
        o.engine = _b(engine)
        _check(_L().nl_model_load(_b(path), ctypes.byref(o), ctypes.byref(self._h)))

    @property
    def info(self):
        i = _capi.ModelInfo()
        _check(_L().nl_model_get_info(self._handle(), ctypes.byref(i)))
        d = {n: getattr(i, n) for n, _ in _capi.ModelInfo._fields_}
        d["arch"], d["chat_format"] = i.arch.decode(), i.chat_format.decode()
        return d

    def load_adapter(self, path, scale=1.0):
        return Adapter(self, path, scale)

    @staticmethod
    def _generate_options(s, chat_format, relay):
        """The C options from the sampling keywords `s` (generate's and chat's); returns them
        with the buffers they point into (kept alive by the caller during the call)."""
        o = _capi.GenerateOptions()
        _L().nl_generate_options_init(ctypes.byref(o))
        o.max_tokens, o.temperature = int(s["max_tokens"]), float(s["temperature"])
        o.top_k, o.top_p, o.min_p = int(s["top_k"]), float(s["top_p"]), float(s["min_p"])
        o.repeat_penalty, o.repeat_last_n = float(s["repeat_penalty"]), int(s["repeat_last_n"])
        o.seed = _capi.SEED_RANDOM if s["seed"] is None else int(s["seed"])
        o.precision, o.kv_type, o.chat_format = _b(s["precision"]), _b(s["kv_type"]), _b(chat_format)
        arr, n = _adapter_array(s["adapters"])
        o.adapters, o.n_adapters = ctypes.cast(arr, ctypes.POINTER(ctypes.c_void_p)), n
        stops = [_b(x) for x in (s["stop"] or [])]
        stop_arr = (ctypes.c_char_p * max(1, len(stops)))(*stops)
        o.stop, o.n_stop = ctypes.cast(stop_arr, ctypes.POINTER(ctypes.c_char_p)), len(stops)
        if relay:
            o.on_token = relay.c
        return o, (arr, stop_arr, stops)

    def _run(self, call, on_token):
        relay = _TokenRelay(on_token) if on_token else None
        g = _capi.Generation()
        status = call(relay, g)
        if relay and relay.error:
            _L().nl_generation_free(ctypes.byref(g))
            raise relay.error
        _check(status)
        try:
            return ctypes.string_at(g.text).decode("utf-8", "replace")
        finally:
            _L().nl_generation_free(ctypes.byref(g))

    # `nightlora generate`'s sampling defaults (llama.cpp's).
    _SAMPLING = {"max_tokens": 256, "temperature": 0.8, "top_k": 40, "top_p": 0.95, "min_p": 0.05,
                 "repeat_penalty": 1.0, "repeat_last_n": 64, "seed": None, "stop": None, "adapters": (),
                 "precision": "int8", "kv_type": "f16"}

    def _sampling(self, kw):
        unknown = set(kw) - set(self._SAMPLING)
        if unknown:
            raise TypeError(f"unknown keyword(s): {', '.join(sorted(unknown))}")
        return {**self._SAMPLING, **kw}

    def generate(self, prompt="", on_token=None, **sampling):
        """The text generated after `prompt` (as `nightlora generate`). Keywords and defaults:
        max_tokens=256, temperature=0.8 (0: greedy), top_k=40, top_p=0.95, min_p=0.05,
        repeat_penalty=1.0, repeat_last_n=64, seed=None (random), stop=None (strings that end
        the text), adapters=(), precision="int8", kv_type="f16". on_token(token_id, text) is
        called for each token; returning True stops there."""
        s = self._sampling(sampling)

        def call(relay, g):
            o, keep = self._generate_options(s, None, relay)
            return _L().nl_generate(self._handle(), _b(prompt), ctypes.byref(o), ctypes.byref(g))
        return self._run(call, on_token)

    def chat(self, messages, chat_format=None, on_token=None, **sampling):
        """The assistant's answer to messages ([{"role": "user", "content": "Hi"}, ...]),
        rendered with the model's chat template (or chat_format); keywords as generate's."""
        s = self._sampling(sampling)
        msgs = (_capi.ChatMessage * max(1, len(messages)))()
        keep = []
        for i, m in enumerate(messages):
            role, content = _b(m["role"]), _b(m["content"])
            keep += [role, content]
            msgs[i].role, msgs[i].content = role, content

        def call(relay, g):
            o, keep_buffers = self._generate_options(s, chat_format, relay)
            return _L().nl_chat(self._handle(), msgs, len(messages), ctypes.byref(o), ctypes.byref(g))
        return self._run(call, on_token)

    def start_training(self, data, out, progress=None, log=None, events=None, **options):
        """Starts `nightlora train` on this model in the background; returns a Job.
        options: the CLI's option names (rank=8, iters=20, seq_len=128, precision="f32", ...)."""
        opts = {"data": os.fspath(data), "out": os.fspath(out)}
        opts.update({k: os.fspath(v) if isinstance(v, os.PathLike) else v for k, v in options.items()})
        return Job(self, opts, progress, log, events)

    def train(self, data, out, progress=None, log=None, events=None, **options):
        """Trains and returns the result (a dict: finished, step, exit_code, stop_reason, ...).
        progress(dict) after each step: step, total_steps, epoch, loss, lr, grad_norm,
        tokens_per_second, elapsed_seconds, val_loss (the last validation's), status, ...
        (the numbers of the run's log.jsonl). events(dict) gets every event: the same dict
        with "event" "step", "validation", "checkpoint", "waiting" (paused, reason) or
        "pacing" (idle_seconds, reason). log(line, is_warning) for each line the CLI prints."""
        with self.start_training(data, out, progress, log, events, **options) as job:
            return job.wait()

    def eval(self, data=None, adapters=(), seq_len=512, batch_tokens=512, train_on="completion",
             long_examples="truncate", precision="f32", text=None, text_file=None, stride=0):
        """Mean loss and perplexity, as `nightlora eval`: of the supervised tokens of a JSONL
        file (data), or of raw text (text: a string; text_file: a file) read in windows of
        seq_len tokens, stride apart (0: half of seq_len), as `nightlora eval --text`. Give one
        of data, text, text_file."""
        if sum(x is not None for x in (data, text, text_file)) != 1:
            raise TypeError("give one of data (a JSONL file), text (a string) or text_file")
        o = _capi.EvalOptions()
        _L().nl_eval_options_init(ctypes.byref(o))
        arr, n = _adapter_array(adapters)
        o.adapters, o.n_adapters = ctypes.cast(arr, ctypes.POINTER(ctypes.c_void_p)), n
        o.seq_len, o.batch_tokens, o.stride = int(seq_len), int(batch_tokens), int(stride)
        o.train_on, o.long_examples, o.precision = _b(train_on), _b(long_examples), _b(precision)
        r = _capi.EvalResult()
        if text is not None:
            raw = str(text).encode("utf-8")
            _check(_L().nl_eval_text(self._handle(), raw, len(raw), ctypes.byref(o), ctypes.byref(r)))
        elif text_file is not None:
            _check(_L().nl_eval_text_file(self._handle(), _b(os.fspath(text_file)), ctypes.byref(o), ctypes.byref(r)))
        else:
            _check(_L().nl_eval(self._handle(), _b(os.fspath(data)), ctypes.byref(o), ctypes.byref(r)))
        d = {"loss": r.loss, "perplexity": r.perplexity if math.isfinite(r.perplexity) else float("inf")}
        if data is not None:
            d.update({"examples": r.examples, "skipped": r.skipped, "tokens": r.tokens,
                      "supervised_tokens": r.supervised_tokens})
        else:  # the keys of `nightlora eval --text --json`
            d.update({"windows": r.examples, "tokens": r.tokens, "scored_tokens": r.supervised_tokens})
        return d
