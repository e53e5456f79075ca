#!/usr/bin/env bash
# The Vulkan backend beside the cpu engine, on one synthetic model:
#  1. per-product benchmark (bench/vulkan_products.cpp): forward and input gradient per
#     projection, token count and precision mode, host wall time and (vulkan) device time;
#  2. training steps: `nightlora train` with --engine cpu and --engine vulkan on the same
#     data (tokens/s of each step after the first from log.jsonl), and `nightlora bench-step
#     --engine ...` as well when this build's bench-step takes --engine.
# Needs only the Vulkan loader and a driver at run time (plus cmake, ninja, a compiler,
# libvulkan-dev and glslc to build). NL_VULKAN_DEVICE=index picks the device.
#   bench/run_vulkan.sh [--preset qwen2.5-0.5b] [--type q4_0] [--layers 4] [--model FILE]
#                       [--tokens 64,256] [--precision f32,f16,int8] [--seq 256] [--steps 4]
#                       [--threads N]
# Environment: NL_BUILD_DIR (default build-bench), NL_JOBS (build parallelism, default 2).
# On lavapipe (Mesa's software device, "cpu" type) the device is the same CPU cores:
# those figures are not GPU figures.
set -euo pipefail
NL_ROOT=$(cd "$(dirname "$0")/.." && pwd)
NL_BUILD_DIR=${NL_BUILD_DIR:-$NL_ROOT/build-bench}

preset=qwen2.5-0.5b; type=q4_0; layers=4; model=""; tokens=64,256; precision=f32,f16,int8
seq=256; steps=4; threads=$(nproc)
while [ $# -gt 0 ]; do
  case "$1" in
    --preset) preset=$2; shift 2 ;;
    --type) type=$2; shift 2 ;;
    --layers) layers=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --tokens) tokens=$2; shift 2 ;;
    --precision) precision=$2; shift 2 ;;
    --seq) seq=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    -h|--help) sed -n 2,16p "$0"; exit 0 ;;
    *) echo "run_vulkan.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done

if [ ! -f "$NL_BUILD_DIR/build.ninja" ]; then
  cmake -S "$NL_ROOT" -B "$NL_BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >&2
fi
if ! grep -q "NL_HAVE_VULKAN=1" "$NL_BUILD_DIR/build.ninja"; then
  echo "run_vulkan.sh: $NL_BUILD_DIR has no Vulkan backend: install libvulkan-dev and glslc, then" \
       "re-run cmake (rm $NL_BUILD_DIR/CMakeCache.txt)" >&2
  exit 1
fi
ninja -C "$NL_BUILD_DIR" -j"${NL_JOBS:-2}" nl_bench nightlora_cli >&2
nl="$NL_BUILD_DIR/nightlora"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

if [ -z "$model" ]; then
  mkdir -p "$NL_BUILD_DIR/bench-models"
  model="$NL_BUILD_DIR/bench-models/$preset-$type-l$layers.gguf"
  [ -f "$model" ] || "$nl" synth-model --preset "$preset" --type "$type" --layers "$layers" --seed 1 \
                       --tokenizer generated "$model" >&2
fi
echo "# Vulkan backend beside the cpu engine"
echo "model: $model; date: $(date -u +%Y-%m-%dT%H:%MZ); machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
if command -v vulkaninfo >/dev/null; then
  echo "Vulkan devices:"; vulkaninfo --summary 2>/dev/null | grep -E "deviceName|deviceType|driverName" | sed 's/^/  /' || true
fi

echo; echo "## Frozen products (nl_bench_vulkan_products; GFLOP/s = 2 * out * in * T / host wall time)"
"$NL_BUILD_DIR/bench/nl_bench_vulkan_products" --model "$model" --tokens "$tokens" --precision "$precision" \
  --threads "$threads" --jsonl "$out/products.jsonl"

echo; echo "## Training steps (nightlora train, seq $seq, rank 8, all projections; tokens/s median of steps 2..$steps)"
/usr/bin/python3 - "$out/data.jsonl" "$seq" <<'PY'
import json, sys
words = "the small green dragon flew over a big hill and found a shiny red stone near the old tree".split()
with open(sys.argv[1], "w") as f:
    for i in range(16):
        n = int(sys.argv[2]) * 2
        f.write(json.dumps({"text": " ".join(words[(i + k) % len(words)] for k in range(n))}) + "\n")
PY
for engine in cpu vulkan; do
  "$nl" train --model "$model" --data "$out/data.jsonl" --out "$out/train-$engine" --engine "$engine" \
    --iters "$steps" --batch 1 --seq-len "$seq" --rank 8 --targets all --threads "$threads" >/dev/null
  /usr/bin/python3 - "$out/train-$engine/log.jsonl" "$engine" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
steps = [r for r in rows if r.get("type") == "train"]
later = steps[1:] or steps
tps = statistics.median(r["tokens_per_s"] for r in later)
print(f"| {sys.argv[2]} | {len(steps)} steps | {tps:.1f} tokens/s | loss {steps[0]['loss']:.4f} -> {steps[-1]['loss']:.4f} |")
PY
done

if "$nl" bench-step --help 2>/dev/null | grep -q -- "--engine"; then
  echo; echo "## bench-step (step-time breakdown)"
  for engine in cpu vulkan; do
    echo "### --engine $engine"
    "$nl" bench-step --model "$model" --seq "$seq" --steps "$steps" --threads "$threads" --engine "$engine"
  done
else
  echo; echo "(this build's bench-step has no --engine option: breakdown skipped)"
fi
