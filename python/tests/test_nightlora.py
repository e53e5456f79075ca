"""The Python bindings against the installed library (ctest capi.installed.python runs them
with PYTHONPATH at the installed package): generate, chat, train with progress, eval, errors.

Environment: NIGHTLORA_TEST_MODEL (a GGUF model; stories260K in the suite),
NIGHTLORA_TEST_DATA (the repository's data/stories), NIGHTLORA_TEST_CLI (the nightlora CLI,
the reference the answers are compared with).
"""
import json
import os
import subprocess
import threading

import pytest

import nightlora

MODEL = os.environ.get("NIGHTLORA_TEST_MODEL", "")
DATA = os.environ.get("NIGHTLORA_TEST_DATA", "")
CLI = os.environ.get("NIGHTLORA_TEST_CLI", "")

pytestmark = pytest.mark.skipif(not (MODEL and DATA and CLI and os.path.exists(MODEL)),
                                reason="set NIGHTLORA_TEST_MODEL, NIGHTLORA_TEST_DATA and NIGHTLORA_TEST_CLI")


def cli(*args):
    return subprocess.run([CLI, *args], capture_output=True, text=True)


@pytest.fixture(scope="module")
def model():
    m = nightlora.Model(MODEL, threads=2)
    yield m
    m.close()


@pytest.fixture(scope="module")
def trained(model, tmp_path_factory):
    """An adapter trained through the bindings, with every progress report kept."""
    out = tmp_path_factory.mktemp("run") / "zorbo"
    seen, lines, events = [], [], []
    result = model.train(data=os.path.join(DATA, "train.jsonl"), out=out, iters=8, lr=5e-3, batch=4, seq_len=128,
                         threads=2, plan_cache="off", progress=seen.append, log=lambda line, warn: lines.append(line),
                         events=events.append)
    return out, result, seen, lines, events


def test_version():
    assert nightlora.version().count(".") == 2
    assert nightlora.API_VERSION == 1


def test_train_reports_progress_and_writes_the_cli_adapter(model, trained, tmp_path):
    out, result, seen, lines, events = trained
    assert result["finished"] and result["exit_code"] == 0 and result["step"] == 8
    assert [p["step"] for p in seen] == list(range(1, 9))
    assert all(p["total_steps"] == 8 and p["loss"] > 0 and p["status"].startswith("step ") for p in seen)
    # The numbers of the run's own log, one "train" row per step.
    rows = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    rows = [r for r in rows if r.get("type") == "train"]
    assert len(rows) == len(seen)
    for p, r in zip(seen, rows):
        assert (p["step"], p["total_steps"], p["epoch"]) == (r["step"], r["total"], r["epoch"])
        assert (p["loss"], p["lr"], p["grad_norm"]) == (r["loss"], r["lr"], r["grad_norm"])
        assert (p["tokens_per_second"], p["elapsed_seconds"]) == (r["tokens_per_s"], r["elapsed_s"])
        assert p["event"] == "step" and not p["paused"]
    # Every event: the steps, and the checkpoint written at the end.
    assert [e for e in events if e["event"] == "step"] == seen
    assert [e["step"] for e in events if e["event"] == "checkpoint"] == [8]
    assert any(line.startswith("saved: ") for line in lines)
    r = cli("train", "--model", MODEL, "--data", os.path.join(DATA, "train.jsonl"), "--out", str(tmp_path / "cli"),
            "--iters", "8", "--lr", "5e-3", "--batch", "4", "--seq-len", "128", "--threads", "2", "--plan-cache", "off")
    assert r.returncode == 0, r.stderr
    assert (out / "adapter.gguf").read_bytes() == (tmp_path / "cli" / "adapter.gguf").read_bytes()


def test_generate_equals_the_cli_greedy_text(model, trained):
    out = trained[0]
    zorbo = model.load_adapter(out / "adapter.gguf")
    for adapters, extra in (([], []), ([zorbo], ["--adapter", str(out / "adapter.gguf")])):
        r = cli("generate", "--model", MODEL, "--temp", "0", "-n", "40", "--seed", "0", "--quiet", "-t", "2",
                "--prompt", "Zorbo", *extra)
        assert r.returncode == 0, r.stderr
        assert model.generate("Zorbo", max_tokens=40, temperature=0, seed=0, adapters=adapters) + "\n" == r.stdout
    zorbo.close()


def test_token_callback_streams_and_stops(model):
    pieces = []
    full = model.generate("Once upon a time", max_tokens=30, temperature=0, on_token=lambda t, s: pieces.append(s))
    assert "".join(pieces) == full and len(pieces) > 5
    first = []
    stopped = model.generate("Once upon a time", max_tokens=30, temperature=0,
                             on_token=lambda t, s: first.append(s) or len(first) >= 3)
    assert len(first) == 3 and "".join(first) == stopped and full.startswith(stopped) and len(stopped) < len(full)

    def boom(t, s):
        raise ValueError("from the callback")
    with pytest.raises(ValueError, match="from the callback"):
        model.generate("Once", max_tokens=5, temperature=0, on_token=boom)


def test_sampling_options_and_stop_strings_as_the_cli(model):
    got = model.generate("Once upon a time", max_tokens=50, temperature=0, seed=0, repeat_penalty=1.3, stop=["park"])
    r = cli("generate", "--model", MODEL, "--temp", "0", "-n", "50", "--seed", "0", "--quiet", "-t", "2",
            "--repeat-penalty", "1.3", "--stop", "park", "--prompt", "Once upon a time")
    assert r.returncode == 0, r.stderr
    assert got + "\n" == r.stdout and "park" not in got
    with pytest.raises(TypeError, match="unknown keyword"):
        model.generate("x", temprature=0)


def test_eval_equals_the_cli(model, trained):
    out = trained[0]
    zorbo = model.load_adapter(out, scale=0.5)
    assert zorbo.scale == 0.5
    got = model.eval(os.path.join(DATA, "valid.jsonl"), adapters=[zorbo], seq_len=128)
    r = cli("eval", "--json", "--seq-len", "128", "-t", "2", "--model", MODEL, "--data",
            os.path.join(DATA, "valid.jsonl"), "--adapter", f"{out}:0.5")
    assert r.returncode == 0, r.stderr
    want = json.loads(r.stdout)
    for k in ("loss", "perplexity", "examples", "tokens", "supervised_tokens"):
        assert got[k] == want[k], k
    base = model.eval(os.path.join(DATA, "valid.jsonl"), seq_len=128)
    assert base["loss"] != got["loss"]


def test_eval_text_equals_the_cli(model, trained, tmp_path):
    text = "\n\n".join(json.loads(line)["text"] for line in open(os.path.join(DATA, "valid.jsonl")))
    path = tmp_path / "stories.txt"
    path.write_text(text, encoding="utf-8")
    zorbo = model.load_adapter(trained[0], scale=0.5)
    for stride, adapters, extra in ((24, [], []), (0, [zorbo], ["--adapter", f"{trained[0]}:0.5"])):
        args = ["eval", "-t", "2", "--model", MODEL, "--text", str(path), "--seq-len", "64", *extra]
        if stride:
            args += ["--stride", str(stride)]
        r = cli(*args, "--json")
        assert r.returncode == 0, r.stderr
        want = json.loads(r.stdout)
        printed = cli(*args).stdout
        for got in (model.eval(text=text, seq_len=64, stride=stride, adapters=adapters),
                    model.eval(text_file=path, seq_len=64, stride=stride, adapters=adapters)):
            for k in ("loss", "perplexity", "windows", "tokens", "scored_tokens"):
                assert got[k] == want[k], k
            assert f"loss {got['loss']:.6f}  perplexity {got['perplexity']:.4f}" in printed
    zorbo.close()
    with pytest.raises(TypeError, match="give one of"):
        model.eval(os.path.join(DATA, "valid.jsonl"), text="x")
    with pytest.raises(nightlora.Error, match="--stride must be between 1 and --seq-len"):
        model.eval(text=text, seq_len=32, stride=40)


def test_chat_uses_the_template_or_says_why(model, tmp_path):
    messages = [{"role": "user", "content": "Hi"}]
    if model.info["chat_format"]:
        assert isinstance(model.chat(messages, max_tokens=8, temperature=0), str)
    else:  # stories260K has no chat template: the CLI's message
        with pytest.raises(nightlora.Error) as e:
            model.chat(messages, max_tokens=8)
        r = cli("generate", "--model", MODEL, "-n", "1", "--chat", "--prompt", "Hi")
        assert r.returncode == 1 and str(e.value) == r.stderr.strip().splitlines()[-1]
    # An explicit template works on any model with a tokenizer.
    text = model.chat(messages, max_tokens=8, temperature=0, chat_format="chatml")
    assert isinstance(text, str)


def test_errors_carry_the_cli_message(model, tmp_path):
    missing = str(tmp_path / "nope.gguf")
    with pytest.raises(nightlora.Error) as e:
        nightlora.Model(missing)
    assert e.value.status == 1
    r = cli("generate", "--model", missing, "-n", "1")
    assert str(e.value) == r.stderr.strip().splitlines()[-1]
    with pytest.raises(nightlora.Error, match="unknown key"):
        model.train(data="x.jsonl", out=str(tmp_path / "o"), rnak=4)
    with pytest.raises(nightlora.Error, match="must be an integer"):
        model.train(data="x.jsonl", out=str(tmp_path / "o"), iters="many")
    with pytest.raises(nightlora.Error) as e:  # found by the job: the data file is missing
        model.train(data=str(tmp_path / "missing.jsonl"), out=str(tmp_path / "o"))
    assert "missing.jsonl" in str(e.value)
    closed = nightlora.Model(MODEL)
    closed.close()
    with pytest.raises(nightlora.Error, match="closed"):
        closed.generate("x")


def test_background_job_pause_resume_cancel(model, tmp_path):
    steps = []
    job = model.start_training(os.path.join(DATA, "train.jsonl"), tmp_path / "bg", iters=200, lr=5e-3, batch=4,
                               seq_len=128, precision="f32", progress=lambda p: steps.append(p["step"]))
    job.pause()
    while job.state != "paused":
        threading.Event().wait(0.01)
    held = job.progress["step"]
    assert job.progress["paused"] and job.progress["reason"] == "paused by the caller"
    assert model.generate("Zorbo", max_tokens=10, temperature=0)  # the engine is free meanwhile
    threading.Event().wait(0.2)
    assert job.progress["step"] == held
    job.resume()
    job.cancel()
    result = job.wait()
    assert not result["finished"] and result["exit_code"] == 75 and result["stop_reason"] == "stopped by the caller"
    job.close()
