#!/usr/bin/env bash
# The training-step benchmark side by side (issue 5): nightlora's LoRA step
# (`nightlora bench-step`: the step, its memory plan and its time breakdown) and the PyTorch
# LoRA trainer (tools/torch_ref/lora_trainer_bench.py, f32 dense, its best BLAS: the OpenMP
# build of OpenBLAS, see common.sh) on the same synthetic model, sequence length, rank and targets,
# with the loss on all tokens and on the completion half only, PyTorch with gradient
# checkpointing off and on. Each configuration runs in its own process, so each peak RSS
# is that configuration's. Prints tokens/s, peak RSS and the ratios against the targets.
#   bench/run_step.sh [--preset qwen2.5-0.5b] [--type q4_0] [--layers N] [--model FILE]
#                     [--seq 256] [--rank 8] [--steps 3] [--threads N]
#                     [--checkpointing both|on|off] [--loss both|all|completion]
#                     [--max-memory SIZE] [--host-threads N] [--precision f32|f16|int8]
# --max-memory is our step's memory budget (keeps that many blocks' activations, see
# `nightlora bench-step --help`); without it every block but the last is recomputed.
# --layers N uses a model cut to N decoder blocks (a quick check; the targets are for the
# full model). --model uses an existing GGUF instead of a synthetic one. --precision is the
# mode of our frozen products (PyTorch always runs f32).
# Environment: NL_BUILD_DIR (default build-bench), NL_JOBS (build parallelism, default 2).
set -euo pipefail
source "$(dirname "$0")/common.sh"

preset=qwen2.5-0.5b; type=q4_0; layers=""; model=""
seq=256; rank=8; steps=3; threads=$(nproc); ckpt=both; losses=both; max_memory=""; host_threads=1; precision=f32
while [ $# -gt 0 ]; do
  case "$1" in
    --preset) preset=$2; shift 2 ;;
    --type) type=$2; shift 2 ;;
    --layers) layers=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --seq) seq=$2; shift 2 ;;
    --rank) rank=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --checkpointing) ckpt=$2; shift 2 ;;
    --loss) losses=$2; shift 2 ;;
    --max-memory) max_memory=$2; shift 2 ;;
    --host-threads) host_threads=$2; shift 2 ;;
    --precision) precision=$2; shift 2 ;;
    -h|--help) sed -n 2,19p "$0"; exit 0 ;;
    *) echo "run_step.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
case "$ckpt" in both) ckpts="off on" ;; on|off) ckpts=$ckpt ;; *) echo "run_step.sh: --checkpointing both|on|off" >&2; exit 2 ;; esac
case "$losses" in both) losses="all completion" ;; all|completion) ;; *) echo "run_step.sh: --loss both|all|completion" >&2; exit 2 ;; esac

nl_bench_prepare "$threads" nightlora_cli
if [ -z "$model" ]; then
  mkdir -p "$NL_BUILD_DIR/bench-models"
  model="$NL_BUILD_DIR/bench-models/$preset-$type${layers:+-L$layers}.gguf"
  if [ ! -f "$model" ]; then
    echo "bench: writing the synthetic model $model" >&2
    "$NL_BUILD_DIR/nightlora" synth-model --preset "$preset" --type "$type" ${layers:+--layers "$layers"} "$model.tmp" >&2
    mv "$model.tmp" "$model"
  fi
fi
echo "bench: model $model, seq $seq, rank $rank, all seven targets, $steps timed steps after one warm-up"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

for loss in $losses; do
  echo; echo "## nightlora, loss on $loss, frozen products in $precision"
  "$NL_BUILD_DIR/nightlora" bench-step --model "$model" --seq "$seq" --rank "$rank" --steps "$steps" \
      --threads "$threads" --host-threads "$host_threads" --loss "$loss" --precision "$precision" ${max_memory:+--max-memory "$max_memory"} \
      --json "$out/ours-$loss.json"
  for c in $ckpts; do
    echo; echo "## PyTorch, loss on $loss, checkpointing $c"
    nl_torch_python "$NL_ROOT/tools/torch_ref/lora_trainer_bench.py" --model "$model" --seq "$seq" --rank "$rank" \
        --steps "$steps" --threads "$threads" --loss "$loss" --checkpointing "$c" --json "$out/torch-$loss-$c.json"
  done
done

echo; echo "## Side by side"
"$NL_PY" - "$out" <<'PY'
import glob, json, os, sys
rows = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(sys.argv[1], "*.json")))]
print("| trainer | loss on | checkpointing | step s | tokens/s | peak RSS MiB | peak RSS while training MiB |")
print("|---|---|---|---|---|---|---|")
for r in rows:
    ck = r["checkpointing"] if r["trainer"] == "pytorch" else \
        f"block inputs kept; activations of {r['kept_blocks']}/{r['n_layer']} blocks kept, the rest recomputed"
    who = r["trainer"] + (f" ({r['blas']})" if "blas" in r else f" ({r.get('precision', 'f32')} products)")
    print(f"| {who} | {r['loss']} | {ck} | "
          f"{r['step_s']:.2f} | {r['tokens_per_s']:.1f} | {r['peak_rss_mib']:.0f} | {r.get('train_peak_rss_mib', -1):.0f} |")
print("\n(peak RSS: the whole process, loading included, as the target counts it; while training: the kernel's")
print("VmHWM reset after loading, -1/nan where the kernel refuses the reset)")
print("targets: tokens/s >= 1.5x PyTorch's best configuration; peak RSS <= 0.25x of that configuration's")
for loss in ("all", "completion"):
    ours = [r for r in rows if r["trainer"] == "nightlora" and r["loss"] == loss]
    torch = [r for r in rows if r["trainer"] == "pytorch" and r["loss"] == loss]
    if not ours or not torch:
        continue
    o, best = ours[0], max(torch, key=lambda r: r["tokens_per_s"])
    speed, mem = o["tokens_per_s"] / best["tokens_per_s"], o["peak_rss_mib"] / best["peak_rss_mib"]
    print(f"- loss on {loss}: nightlora / PyTorch best (checkpointing {best['checkpointing']}): "
          f"tokens/s {speed:.2f}x ({'ok' if speed >= 1.5 else 'MISSED'}), "
          f"peak RSS {mem:.2f}x ({'ok' if mem <= 0.25 else 'MISSED'}); "
          f"our time outside the three frozen products {100 * o['outside_frozen_share']:.0f}% of the step "
          f"({'ok' if o['outside_frozen_share'] <= 0.15 else 'MISSED'}: target <= 15%)")
PY
