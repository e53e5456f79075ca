#!/usr/bin/env bash
# The memory plan's estimated peak against the real peak RSS of `nightlora train` runs
# (ru_maxrss of the process, through /usr/bin/time), over models, sequence lengths,
# precisions and memory plans. One line per run:
#   model seq precision plan kept estimate_mib peak_mib peak/estimate
# Usage: bench/memory_estimate.sh [--bin NIGHTLORA] [--models a,b] [--seqs 128,256,512]
#          [--precisions f32,int8,auto] [--plans default,keep1] [--valid] [--work DIR]
# Models: stories260K, tinystories-656k (../shared/models), q4_0, q8_0 (the qwen2.5-0.5b
# synthetic preset, made with `nightlora synth-model` into the work folder).
# Each run is one optimizer step (batch 1, loss on all tokens, rank 8, all seven
# projections, 2 threads) on text long enough to fill the sequence; it ends with the final
# checkpoint and adapter writes, as a real run does. --valid: with a validation set (the same
# text), so the run keeps its best adapter (a copy in memory, best/step-N files), which the
# estimate counts. Memory only: timings mean nothing here.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/build/nightlora
models=stories260K,tinystories-656k,q4_0,q8_0
seqs=128,256,512
precisions=f32,int8,auto
plans=default,keep1
valid=()
work=${TMPDIR:-/tmp}/nl-memory-estimate
while [ $# -gt 0 ]; do
  case $1 in
    --bin) bin=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --seqs) seqs=$2; shift 2 ;;
    --precisions) precisions=$2; shift 2 ;;
    --plans) plans=$2; shift 2 ;;
    --valid) valid=(--valid); shift ;;
    --work) work=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
shared=$root/../shared/models
mkdir -p "$work"
python3 - "$work/data.jsonl" <<'PY'
import json, sys
words = "the little fox walked through a quiet forest and found an old map under the roots of a tall tree while birds sang".split()
with open(sys.argv[1], "w") as f:
    for j in range(4):
        f.write(json.dumps({"text": " ".join(words[(i * 7 + i // 5 + j) % len(words)] for i in range(900))}) + "\n")
PY
model_path() {
  case $1 in
    stories260K) echo "$shared/stories260K/stories260K.gguf" ;;
    tinystories-656k) echo "$shared/tinystories-656k" ;;
    q4_0|q8_0)
      local f=$work/qwen2.5-0.5b-$1.gguf
      [ -f "$f" ] || "$bin" synth-model --preset qwen2.5-0.5b --type "$1" "$f" >/dev/null 2>&1
      echo "$f" ;;
    *) echo "unknown model $1" >&2; exit 2 ;;
  esac
}
printf '%-17s %4s %5s %-8s %6s %10s %10s %6s\n' model seq prec plan kept est_MiB peak_MiB ratio
for m in ${models//,/ }; do
  path=$(model_path "$m")
  if [ ! -e "$path" ]; then echo "$m: $path not found, skipped" >&2; continue; fi
  for s in ${seqs//,/ }; do
    for p in ${precisions//,/ }; do
      for plan in ${plans//,/ }; do
        extra=()
        [ "$plan" = keep1 ] && extra=(--keep-blocks 1)
        [ ${#valid[@]} -gt 0 ] && extra+=(--valid "$work/data.jsonl")
        out=$work/run; rm -rf "$out"
        log=$( { /usr/bin/time -f "maxrss_kb %M" "$bin" train --model "$path" --data "$work/data.jsonl" --out "$out" \
          --iters 1 --batch 1 --seq-len "$s" --train-on all --rank 8 --save-every 0 --save-every-sec 0 \
          --plan-cache off --threads 2 --precision "$p" "${extra[@]}"; } 2>&1 ) || { echo "$m $s $p $plan: failed"; echo "$log" | tail -5; continue; }
        est=$(echo "$log" | sed -n 's/.*estimated peak \([0-9.]*\) MiB.*/\1/p' | head -1)
        kept=$(echo "$log" | sed -n 's/.*keeping activations of \([0-9]*\/[0-9]*\) blocks.*/\1/p' | head -1)
        kb=$(echo "$log" | sed -n 's/^maxrss_kb \([0-9]*\)$/\1/p' | tail -1)
        awk -v m="$m" -v s="$s" -v p="$p" -v plan="$plan" -v kept="$kept" -v est="$est" -v kb="$kb" \
          'BEGIN { peak = kb / 1024; printf "%-17s %4s %5s %-8s %6s %10.1f %10.1f %6.3f\n", m, s, p, plan, kept, est, peak, peak / est }'
      done
    done
  done
done
