#!/usr/bin/env bash
# The products benchmark side by side: nightlora's frozen engine (bench/products.cpp) and
# PyTorch f32 dense (bench/torch_products.py) on the same shapes, token counts and threads,
# in one invocation; then one table with both and the targets of issue 4.
#   bench/run_products.sh [--models a,b] [--types q4_0,...] [--tokens 128,256,512]
#                         [--projs q,down] [--threads N] [--reps 3] [--budget 1.0]
#                         [--precision f32|f16|int8|all (or a comma-separated list)]
# Environment: NL_BUILD_DIR (default build-bench), NL_JOBS (build parallelism, default 2).
set -euo pipefail
source "$(dirname "$0")/common.sh"

threads=$(nproc)
common=()   # options both sides take
ours=()     # options only nl_bench_products takes
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) threads=$2; shift 2 ;;
    --models|--tokens|--projs|--reps|--budget) common+=("$1" "$2"); shift 2 ;;
    --types|--peak-gflops|--int8-peak-gops|--precision) ours+=("$1" "$2"); shift 2 ;;
    -h|--help) sed -n 2,8p "$0"; exit 0 ;;
    *) echo "run_products.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done

nl_bench_prepare "$threads" nl_bench_products
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

echo; echo "## nightlora frozen engine ($NL_BUILD_DIR/bench/nl_bench_products)"
"$NL_BUILD_DIR/bench/nl_bench_products" --threads "$threads" "${common[@]}" "${ours[@]}" --jsonl "$out/ours.jsonl"
echo; echo "## PyTorch f32 dense (bench/torch_products.py)"
nl_torch_python "$NL_ROOT/bench/torch_products.py" --threads "$threads" "${common[@]}" --jsonl "$out/torch.jsonl"

echo; echo "## Side by side (GFLOP/s; ratio = nightlora / PyTorch)"
"$NL_PY" - "$out/ours.jsonl" "$out/torch.jsonl" <<'PY'
import json, sys
ours = [json.loads(l) for l in open(sys.argv[1])]
torch = {(r["model"], r["out"], r["in"], r["T"]): r for r in map(json.loads, open(sys.argv[2]))}
print("targets: dX/fwd <= 1.15 (ours); Q4_0 in int8 mode >= 1.5x PyTorch (both products); f32 mode >= 60% of peak on large projections\n")
print("| model | proj | out x in | T | type | precision | ours fwd | torch fwd | fwd ratio | ours dX | torch dX | dX ratio | ours dX/fwd (<= 1.15) | int8 Q4_0 >= 1.5x torch |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for r in ours:
    t = torch.get((r["model"], r["out"], r["in"], r["T"]))
    if t is None:
        continue
    fr, gr = r["fwd_gflops"] / t["fwd_gflops"], r["dx_gflops"] / t["dx_gflops"]
    ratio = r["dx_s"] / r["fwd_s"]
    q4 = ""
    precision = r.get("precision", "f32")
    if r["type"] == "q4_0" and precision == "int8":
        q4 = "ok" if min(fr, gr) >= 1.5 else "MISSED"
    print(f"| {r['model']} | {r['projs']} | {r['out']} x {r['in']} | {r['T']} | {r['type']} | {precision} | {r['fwd_gflops']:.1f} | "
          f"{t['fwd_gflops']:.1f} | {fr:.2f}x | {r['dx_gflops']:.1f} | {t['dx_gflops']:.1f} | {gr:.2f}x | "
          f"{ratio:.2f} {'ok' if ratio <= 1.15 else 'MISSED'} | {q4} |")
PY
