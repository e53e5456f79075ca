#!/usr/bin/env bash
# A/B of two nightlora builds' training step (`nightlora bench-step`) on the same synthetic
# presets: for each preset and weight type, runs OLD and NEW ROUNDS times each, alternating
# the order (old, new, then new, old, ...), and prints each one's median tokens/s, the
# ratio NEW/OLD, the precision each ran (a calibrated plan's int8/f32 counts), kept blocks
# and peak RSS. Options after -- go to both builds (e.g. --seq 256 --threads 2); give
# OLD_ARGS / NEW_ARGS in the environment for options only one build takes.
#   bench/ab_step.sh OLD_NIGHTLORA NEW_NIGHTLORA [--rounds 3] [--presets qwen2.5-0.5b] \
#     [--types q4_0,q8_0] -- --seq 256 --threads 2
# The defaults A/B (issue 40): OLD a build from before `--precision auto` and the default
# memory plan became the defaults, both with no precision or memory option.
set -euo pipefail
case "${1:-}" in -h|--help) sed -n 2,11p "$0"; exit 0 ;; esac
[ $# -ge 2 ] || { sed -n 2,11p "$0"; exit 2; }
old=$1 new=$2; shift 2
rounds=3 presets=qwen2.5-0.5b types=q4_0
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --presets) presets=$2; shift 2 ;;
    --types) types=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "ab_step.sh: unknown option '$1' (bench-step's options go after --)" >&2; exit 2 ;;
  esac
done
for b in "$old" "$new"; do [ -x "$b" ] || { echo "ab_step.sh: $b is not an executable" >&2; exit 2; }; done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
n=0
for preset in ${presets//,/ }; do
  for type in ${types//,/ }; do
    for r in $(seq "$rounds"); do
      order="old new"; [ $((r % 2)) = 0 ] && order="new old"
      for v in $order; do
        bin=$old extra=${OLD_ARGS:-}
        [ "$v" = new ] && bin=$new extra=${NEW_ARGS:-}
        n=$((n + 1))
        # shellcheck disable=SC2086
        "$bin" bench-step --preset "$preset" --type "$type" "$@" $extra --json "$out/$v-$preset-$type-$n.json" \
          >"$out/$v-$n.out" 2>&1 || { echo "ab_step.sh: $v failed:" >&2; tail -5 "$out/$v-$n.out" >&2; exit 1; }
      done
    done
    echo "ab_step.sh: $preset $type done" >&2
  done
done
python3 - "$out" <<'PY'
import glob, json, os, statistics, sys
runs = {}
for path in glob.glob(os.path.join(sys.argv[1], "*.json")):
    variant, rest = os.path.basename(path).split("-", 1)
    key = rest.rsplit("-", 1)[0]
    runs.setdefault((key, variant), []).append(json.load(open(path)))
print(f'{"preset-type":<22} {"build":<5} {"tok/s (median)":>15} {"runs":>26} {"precision":>22} {"kept":>6} {"peak RSS MiB":>13}')
for key in sorted({k for k, _ in runs}):
    med = {}
    for variant in ("old", "new"):
        rs = runs.get((key, variant), [])
        if not rs:
            continue
        tps = [r["tokens_per_s"] for r in rs]
        med[variant] = statistics.median(tps)
        c = rs[-1].get("precision_counts")
        prec = f'{c["int8"]} int8 {c["f32"]} f32' if c else rs[-1].get("precision", "?")
        print(f'{key:<22} {variant:<5} {med[variant]:>15.1f} {" ".join(f"{t:.1f}" for t in tps):>26} {prec:>22} '
              f'{rs[-1]["kept_blocks"]:>3}/{rs[-1]["n_layer"]:<2} {max(r["peak_rss_mib"] for r in rs):>13.0f}')
    if len(med) == 2:
        print(f'{key:<22} new/old tokens/s: {med["new"] / med["old"]:.2f}x')
PY
