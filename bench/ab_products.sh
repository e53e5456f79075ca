#!/usr/bin/env bash
# A/B of two builds of the products benchmark (bench/products.cpp) on the same cases: for
# each model and weight type in turn, runs OLD and NEW ROUNDS times each (old, new, then
# new, old, ...), keeps each one's best time per case and product, and prints both, the
# dX/fwd ratios and NEW's speed-up (OLD time / NEW time), with geometric means. On a shared
# VM the same binary's times drift by 20-40% over minutes; the two builds' runs of a case
# are seconds apart here, and the order alternates, so both see about the same load.
# Still, compare only figures of one A/B, and repeat it before believing a few percent.
#   bench/ab_products.sh OLD NEW [--rounds 3] [--models a,b] [--types q4_0,...] -- \
#     [other nl_bench_products options: --tokens --projs --precision --threads --reps ...]
# OLD and NEW are nl_bench_products programs, e.g. one copied aside before a change:
#   cp build-bench/bench/nl_bench_products /tmp/old   # ... change, rebuild, then
#   bench/ab_products.sh /tmp/old build-bench/bench/nl_bench_products --types q4_0 -- \
#     --precision int8 --tokens 128,512 --threads 1
set -euo pipefail
case "${1:-}" in -h|--help) sed -n 2,14p "$0"; exit 0 ;; esac
[ $# -ge 2 ] || { sed -n 2,14p "$0"; exit 2; }
old=$1 new=$2; shift 2
rounds=3
models=qwen2.5-0.5b,qwen2.5-1.5b,llama-3.2-1b
types=q4_0,q8_0,q4_K,q6_K,f16
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --types) types=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "ab_products.sh: unknown option '$1' (the benchmark's other options go after --)" >&2; exit 2 ;;
  esac
done
for b in "$old" "$new"; do [ -x "$b" ] || { echo "ab_products.sh: $b is not an executable" >&2; exit 2; }; done

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
n=0
for model in ${models//,/ }; do
  for type in ${types//,/ }; do
    for r in $(seq "$rounds"); do
      order="old new"; [ $((r % 2)) = 0 ] && order="new old"
      for v in $order; do
        bin=$old; [ "$v" = new ] && bin=$new
        n=$((n + 1))
        # The peaks are not needed here: given, so that no second of each run goes to them.
        "$bin" --models "$model" --types "$type" "$@" --peak-gflops 1 --int8-peak-gops 1 \
          --jsonl "$out/$v-$n.jsonl" >/dev/null
      done
    done
    echo "ab_products.sh: $model $type done" >&2
  done
done

python3 - "$out" <<'PY'
import glob, json, math, os, sys
best = {}
for path in glob.glob(os.path.join(sys.argv[1], "*.jsonl")):
    variant = os.path.basename(path).split("-")[0]
    for line in open(path):
        r = json.loads(line)
        key = (r["model"], r["projs"], f'{r["out"]}x{r["in"]}', r["type"], r.get("precision", "f32"), r["T"])
        b = best.setdefault((variant,) + key, [math.inf, math.inf])
        b[0], b[1] = min(b[0], r["fwd_s"]), min(b[1], r["dx_s"])
keys = sorted({k[1:] for k in best})
print("| model | proj | shape | type | precision | T | old fwd ms | old dX ms | old dX/fwd "
      "| new fwd ms | new dX ms | new dX/fwd | fwd speed-up | dX speed-up |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
gains = {"fwd": [], "dX": []}
for k in keys:
    o, n = best[("old",) + k], best[("new",) + k]
    gf, gd = o[0] / n[0], o[1] / n[1]
    gains["fwd"].append(gf), gains["dX"].append(gd)
    print("| " + " | ".join(map(str, k)) + f" | {o[0]*1e3:.2f} | {o[1]*1e3:.2f} | {o[1]/o[0]:.2f} "
          f"| {n[0]*1e3:.2f} | {n[1]*1e3:.2f} | {n[1]/n[0]:.2f} | {gf:.3f} | {gd:.3f} |")
geo = lambda v: math.exp(sum(map(math.log, v)) / len(v))
print(f"\ngeometric mean speed-up of new over old ({len(keys)} cases): "
      f"forward {geo(gains['fwd']):.3f}, input gradient {geo(gains['dX']):.3f}")
PY
