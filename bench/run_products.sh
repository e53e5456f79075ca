#!/usr/bin/env bash
# The products benchmark side by side: nightlora's frozen engine (bench/products.cpp) and
# PyTorch f32 dense (bench/torch_products.py) on the same shapes, token counts and threads,
# in one invocation; then one table with both and the targets of issue 4.
#   bench/run_products.sh [--models a,b] [--types q4_0,...] [--tokens 128,256,512]
#                         [--projs q,down] [--threads N] [--reps 3] [--min-time 0] [--budget 1.0]
#                         [--precision f32|f16|int8|all (or a comma-separated list)]
#                         [--keep DIR]   (keep both sides' JSONL records in DIR)
# Environment: NL_BUILD_DIR (default build-bench), NL_JOBS (build parallelism, default 2).
set -euo pipefail
source "$(dirname "$0")/common.sh"

threads=$(nproc)
keep=""
common=()   # options both sides take
ours=()     # options only nl_bench_products takes
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) threads=$2; shift 2 ;;
    --models|--tokens|--projs|--reps|--min-time|--budget) common+=("$1" "$2"); shift 2 ;;
    --types|--peak-gflops|--int8-peak-gops|--precision) ours+=("$1" "$2"); shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    -h|--help) sed -n 2,9p "$0"; exit 0 ;;
    *) echo "run_products.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done

nl_bench_prepare "$threads" nl_bench
if [ -n "$keep" ]; then
  out=$keep
  mkdir -p "$out"
else
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi

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

# One line per (type, precision) over every model, shape and token count.
print("\n## Summary per type and precision (over all models, shapes and token counts)\n")
print("| type | precision | cases | dX/fwd median (max) | dX/fwd <= 1.15 | fwd % peak median (int8: of the int8 peak) | dX % peak median | fwd vs torch median (min) | dX vs torch median (min) |")
print("|---|---|---|---|---|---|---|---|---|")
groups = {}
for r in ours:
    t = torch.get((r["model"], r["out"], r["in"], r["T"]))
    if t is None:
        continue
    groups.setdefault((r["type"], r.get("precision", "f32")), []).append((r, t))
med = lambda v: sorted(v)[len(v) // 2]
for (ty, pr), rs in groups.items():
    ratio = [r["dx_s"] / r["fwd_s"] for r, _ in rs]
    fwd_t = [r["fwd_gflops"] / t["fwd_gflops"] for r, t in rs]
    dx_t = [r["dx_gflops"] / t["dx_gflops"] for r, t in rs]
    ok = sum(x <= 1.15 for x in ratio)
    print(f"| {ty} | {pr} | {len(rs)} | {med(ratio):.2f} ({max(ratio):.2f}) | {ok}/{len(rs)} | "
          f"{med([100 * r['fwd_gflops'] / r['peak_gflops'] for r, _ in rs]):.0f}% | "
          f"{med([100 * r['dx_gflops'] / r['peak_gflops'] for r, _ in rs]):.0f}% | "
          f"{med(fwd_t):.2f}x ({min(fwd_t):.2f}x) | {med(dx_t):.2f}x ({min(dx_t):.2f}x) |")
PY
