#!/usr/bin/env bash
# Inference beside llama.cpp (issue 42): prompt processing (pp) and greedy decode (tg)
# tokens/s of nightlora (bench/infer.cpp, nl_bench_infer, on nl::Decoder) and of real
# llama.cpp (tools/js/llama_bench_infer.mjs, node-llama-cpp 3.21.1's prebuilt CPU binary)
# on the same GGUF, the same prompt token ids and the same threads, run interleaved
# (ours, theirs, ours, theirs, ...: one process per side and rep, each with a short
# untimed warm-up), then the medians side by side with the ratio ours/llama.cpp.
#
#   bench/run_infer.sh [--presets q4_0,q8_0,q4_K,f16] [--model M.gguf ...] [--prompt-tokens 256]
#                      [-n 64] [--threads 2] [--reps 5] [--models-dir DIR] [--out DIR]
#                      [--precision P] [--kv-type T] [--flash-attention auto|on|off]
#
# --presets makes the qwen2.5-0.5b synthetic models of those weight types (`nightlora
# synth-model`, cached in --models-dir, default bench/results/models); --model adds any GGUF
# (repeatable; with --model alone no preset is made unless --presets is given too).
# --presets none makes none. Raw JSON lines and the table go to --out (default
# bench/results/infer-DATE). NL_NO_BUILD=1 uses the programs already in $NL_BUILD_DIR.
# Speed on a shared machine moves: run it in a quiet window and compare within one run.
set -euo pipefail
source "$(dirname "$0")/common.sh"

presets=""; models=(); prompt_tokens=256; n_gen=64; threads=2; reps=5
models_dir=$NL_ROOT/bench/results/models; out=""; precision=default; kv_type=default; fa=auto
while [ $# -gt 0 ]; do
  case "$1" in
    --presets) presets=$2; shift 2 ;;
    --model) models+=("$2"); shift 2 ;;
    --prompt-tokens) prompt_tokens=$2; shift 2 ;;
    -n) n_gen=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --models-dir) models_dir=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --precision) precision=$2; shift 2 ;;
    --kv-type) kv_type=$2; shift 2 ;;
    --flash-attention) fa=$2; shift 2 ;;
    *) echo "run_infer.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
if [ -z "$presets" ] && [ ${#models[@]} -eq 0 ]; then presets=q4_0,q8_0,q4_K,f16; fi
[ "$presets" = none ] && presets=""
out=${out:-$NL_ROOT/bench/results/infer-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out" "$models_dir"

js=$NL_ROOT/tools/js/llama_bench_infer.mjs
if [ ! -d "$NL_ROOT/tools/js/node_modules/node-llama-cpp" ]; then
  echo "run_infer.sh: node-llama-cpp is not installed in tools/js (run scripts/setup.sh)" >&2; exit 1
fi
if [ "${NL_NO_BUILD:-0}" != 1 ]; then
  [ -f "$NL_BUILD_DIR/build.ninja" ] || cmake -S "$NL_ROOT" -B "$NL_BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >&2
  ninja -C "$NL_BUILD_DIR" -j"${NL_JOBS:-2}" nl_bench nightlora_cli >&2
fi
bench=$NL_BUILD_DIR/bench/nl_bench_infer
bin=$NL_BUILD_DIR/nightlora
[ -x "$bench" ] && [ -x "$bin" ] || { echo "run_infer.sh: no $bench or $bin (build them, or unset NL_NO_BUILD)" >&2; exit 1; }

IFS=, read -r -a preset_types <<< "$presets"
for t in "${preset_types[@]}"; do
  m=$models_dir/qwen2.5-0.5b-$t.gguf
  if [ ! -f "$m" ]; then
    echo "run_infer.sh: making $m" >&2
    "$bin" synth-model --preset qwen2.5-0.5b --type "$t" "$m.tmp" >&2 && mv "$m.tmp" "$m"
  fi
  models+=("$m")
done

{
  echo "run_infer.sh: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(uname -m), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"
  echo "prompt $prompt_tokens tokens, decode $n_gen tokens, threads $threads, reps $reps (interleaved), precision $precision, kv $kv_type, llama.cpp flash attention $fa"
} | tee "$out/header.txt"

for m in "${models[@]}"; do
  name=$(basename "$m" .gguf)
  ids=$out/$name.prompt-ids
  # The prompt's token ids, written by our side and read by both.
  "$bench" --model "$m" --prompt-tokens "$prompt_tokens" -n 1 --reps 0 --warmup 0 --threads "$threads" \
    --write-prompt-ids "$ids" >/dev/null
  for ((r = 1; r <= reps; r++)); do
    echo "== $name rep $r/$reps" >&2
    "$bench" --model "$m" --prompt-ids-file "$ids" -n "$n_gen" --threads "$threads" --reps 1 --warmup 1 \
      --precision "$precision" --kv-type "$kv_type" | tee -a "$out/$name.nightlora.jsonl" >&2
    node "$js" --model "$m" --prompt-ids-file "$ids" -n "$n_gen" --threads "$threads" --reps 1 --warmup 1 \
      --flash-attention "$fa" | tee -a "$out/$name.llama.jsonl" >&2
  done
done

"$NL_PY" - "$out" "$prompt_tokens" "$n_gen" "$threads" "${models[@]}" <<'PY' | tee "$out/table.md"
import json, os, statistics, sys
out, pp_n, tg_n, threads, models = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
def med(path, key):
    rows = [json.loads(l) for l in open(path) if l.strip()]
    return statistics.median(r[key] for r in rows), len(rows)
print(f"| model | threads | pp{pp_n} nightlora | pp{pp_n} llama.cpp | pp ratio | tg{tg_n} nightlora | tg{tg_n} llama.cpp | tg ratio |")
print("|---|---|---|---|---|---|---|---|")
for m in models:
    name = os.path.basename(m)[:-len(".gguf")] if m.endswith(".gguf") else os.path.basename(m)
    ours, theirs = f"{out}/{name}.nightlora.jsonl", f"{out}/{name}.llama.jsonl"
    opp, n1 = med(ours, "pp_tps"); otg, _ = med(ours, "tg_tps")
    lpp, n2 = med(theirs, "pp_tps"); ltg, _ = med(theirs, "tg_tps")
    print(f"| {name} | {threads} | {opp:.1f} | {lpp:.1f} | {opp/lpp:.2f} | {otg:.2f} | {ltg:.2f} | {otg/ltg:.2f} |")
print(f"\ntokens/s, medians of {n1} interleaved reps per side; ratio = nightlora / llama.cpp. Raw JSON lines: {out}")
PY
