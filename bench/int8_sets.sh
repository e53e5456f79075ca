#!/usr/bin/env bash
# The int8 products per weight type and per x86-64 int8 kernel set, side by side in one run:
# for each round and model, nl_bench_products runs once under each set this CPU has
# (NL_INT8_VNNI=avx2, avx-vnni, avx512-vnni; the order rotates per round, so drift on a
# shared machine spreads over all sets), timing every type in that one process, so each
# type's time and Q4_0's are taken a few seconds apart (one process per type put minutes
# between them, and a loaded machine's drift into the ratios). Then per set: each type's
# time over Q4_0's on the same shape (forward, input gradient, both), the median over the
# shapes (of the per-shape medians over rounds), and each set's time over the plain AVX2
# set's.
#   bench/int8_sets.sh [--rounds 3] [--models a,b] [--types q4_0,q8_0,...] [--sets avx2,...] -- \
#     [other nl_bench_products options: --tokens --projs --threads --reps ...]
# Environment: NL_BUILD_DIR (default build-bench), NL_JOBS (build parallelism, default 2).
set -euo pipefail
source "$(dirname "$0")/common.sh"
case "${1:-}" in -h|--help) sed -n 2,10p "$0"; exit 0 ;; esac

rounds=3
models=qwen2.5-0.5b,qwen2.5-1.5b
types=q4_0,q8_0,q4_K,q5_K,q6_K,f16
sets=""
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --types) types=$2; shift 2 ;;
    --sets) sets=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "int8_sets.sh: unknown option '$1' (the benchmark's other options go after --)" >&2; exit 2 ;;
  esac
done

nl_bench_prepare "$(nproc)" nl_bench
bin=$NL_BUILD_DIR/bench/nl_bench_products
if [ -z "$sets" ]; then  # every set this CPU runs
  for s in avx2 avx-vnni avx512-vnni; do
    NL_INT8_VNNI=$s "$bin" --models qwen2.5-0.5b --types q4_0 --projs k --tokens 1 --reps 1 --precision int8 \
      --peak-gflops 1 --int8-peak-gops 1 > /dev/null 2>&1 && sets="$sets,$s"
  done
  sets=${sets#,}
fi
echo "sets: $sets; rounds: $rounds; models: $models; types: $types; options: $*"

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
read -r -a set_list <<< "${sets//,/ }"
for r in $(seq "$rounds"); do
  for model in ${models//,/ }; do
    n=${#set_list[@]}
    for i in $(seq 0 $((n - 1))); do
      s=${set_list[$(((i + r) % n))]}
      NL_INT8_VNNI=$s "$bin" --models "$model" --types "$types" --precision int8 --peak-gflops 1 --int8-peak-gops 1 \
        --jsonl "$out/$s.$r.$model.jsonl" "$@" > /dev/null
    done
  done
  echo "round $r done ($(date -u +%H:%M:%S) UTC)"
done

"$NL_PY" - "$out" "$sets" <<'PY'
import glob, json, os, statistics as st, sys
from collections import defaultdict
out, sets = sys.argv[1], sys.argv[2].split(",")
t = defaultdict(list)  # (set, model, projs, T, type) -> [(fwd, dx)] over rounds
isa = {}
for f in glob.glob(os.path.join(out, "*.jsonl")):
    s = os.path.basename(f).split(".")[0]
    for line in open(f):
        r = json.loads(line)
        t[(s, r["model"], r["projs"], r["T"], r["type"])].append((r["fwd_s"], r["dx_s"]))
        isa[s] = r["isa"]
med = {k: (st.median(a for a, _ in v), st.median(b for _, b in v)) for k, v in t.items()}
types = sorted({k[4] for k in med}, key=lambda x: (x != "q4_0", x))
def ratios(num, den):
    f = [num[k][0] / den[k][0] for k in num if k in den]
    d = [num[k][1] / den[k][1] for k in num if k in den]
    b = [(num[k][0] + num[k][1]) / (den[k][0] + den[k][1]) for k in num if k in den]
    return f, d, b
def cell(x): return f"{st.median(x):.2f} ({min(x):.2f}-{max(x):.2f})" if x else "-"
print("\n## time over Q4_0's, same set and shape: median over shapes (range); both = forward + input gradient")
print("| set (engine isa) | type | shapes | forward | input grad | both |")
print("|---|---|---|---|---|---|")
for s in sets:
    for ty in types:
        num = {k[1:4]: v for k, v in med.items() if k[0] == s and k[4] == ty}
        den = {k[1:4]: v for k, v in med.items() if k[0] == s and k[4] == "q4_0"}
        f, d, b = ratios(num, den)
        print(f"| {s} ({isa.get(s, '?')}) | {ty} | {len(b)} | {cell(f)} | {cell(d)} | {cell(b)} |")
base = sets[0]
print(f"\n## time over the {base} set's, same type and shape: median over shapes (range)")
print("| set | type | shapes | forward | input grad | both |")
print("|---|---|---|---|---|---|")
for s in sets[1:]:
    for ty in types:
        num = {k[1:]: v for k, v in med.items() if k[0] == s and k[4] == ty}
        den = {k[1:]: v for k, v in med.items() if k[0] == base and k[4] == ty}
        f, d, b = ratios(num, den)
        print(f"| {s} | {ty} | {len(b)} | {cell(f)} | {cell(d)} | {cell(b)} |")
print("\n## per shape: median ms over rounds, forward / input grad")
print("| model | projs | T | type | " + " | ".join(sets) + " |")
print("|---|---|---|---|" + "---|" * len(sets))
for key in sorted({k[1:] for k in med}, key=lambda k: (k[0], k[1], k[2], types.index(k[3]))):
    cells = [f"{med[(s,) + key][0]*1e3:.2f} / {med[(s,) + key][1]*1e3:.2f}" if (s,) + key in med else "-" for s in sets]
    print(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | " + " | ".join(cells) + " |")
PY
