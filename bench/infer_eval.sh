#!/usr/bin/env bash
# Evaluation speed on the LaMP-2 experiment (issue 42, item 4): the nightly gate's scoring and
# `lamp2-eval`, timed for one nightlora binary or two side by side (before/after a change),
# interleaved, medians, with a check that both give the same outputs.
#
#   bench/infer_eval.sh [--base OLD_NIGHTLORA] [--new NIGHTLORA] [--model M.gguf] [--reps 5]
#                       [--threads 1] [--user u0] [--out DIR]
#                       [--new-eval-args "--precision int8"] [--new-lamp2-args "--precision int8"]
#
# Data as bench/personalization.sh makes it (make-lamp2 with its defaults: 60 profile items,
# 25 questions per user, seed 3), and one night (`nightlora nightly --task lamp2`, 60 steps)
# trained by the new binary, so both binaries score the very same adapter. Then, per rep and
# binary (one process per command, model load included, as the job runs them):
#   gate      what the nightly job runs to decide (src/eval/nightly.cpp, step 4): the
#             held-out loss of the candidate and of the base model on the held-out items
#             (`eval`, f32), and the task's metric, tag accuracy of both on the held-out
#             questions (`lamp2-eval`)
#   job       the gate as the job itself runs it: `nightlora nightly` again on a copy of the
#             night's folder as it stood before its decision, so the one process loads the model
#             once, scores both adapters (held-out loss and tag accuracy), decides, publishes
#             and seals (steps 4-6)
#   lamp2     `lamp2-eval` of the user's 25 questions with the candidate, no retrieval
#   lamp2-k4  the same with 4 retrieved profile items in each prompt
# NL_NO_BUILD=1 uses the nightlora already in $NL_BUILD_DIR (default build-bench) as --new.
set -euo pipefail
source "$(dirname "$0")/common.sh"

base=""; new=""; model=${NL_SHARED:-$NL_ROOT/..}/shared/models/stories260K/stories260K.gguf
reps=5; threads=1; user=u0; out=""; new_eval_args=""; new_lamp2_args=""
while [ $# -gt 0 ]; do
  case "$1" in
    --base) base=$2; shift 2 ;;
    --new) new=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --user) user=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --new-eval-args) new_eval_args=$2; shift 2 ;;
    --new-lamp2-args) new_lamp2_args=$2; shift 2 ;;
    *) echo "infer_eval.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[ -f "$model" ] || { echo "infer_eval.sh: no model at $model (give --model)" >&2; exit 1; }
[ -n "$new" ] || new=$(nl_built_nightlora)
out=${out:-$NL_ROOT/bench/results/infer-eval-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"

"$new" make-lamp2 --users 1 --items-per-user 60 --questions-per-user 25 --seed 3 --tags-per-user 2 --noise 0.1 \
  --out "$out/data" >/dev/null
# night_cmd BIN JOB_DIR: sets `night` to the command of one night of the LaMP-2 task, with this
# benchmark's settings.
night_cmd() {
  night=("$1" nightly --task lamp2 --model "$model" --user-data "$out/data" --user "$user" --out "$2" --threads "$threads"
         --batch 4 --rank 8 --iters 60 --lr 5e-3 --save-every 1000 --no-report -- --normal-priority)
}
night_cmd "$new" "$out/job"
"${night[@]}" > "$out/nightly.log" 2>&1
run=$out/job/runs/0001
[ -f "$run/candidate/adapter_config.json" ] || { echo "infer_eval.sh: the night left no candidate (see $out/nightly.log)" >&2; exit 1; }
seq_len=$("$NL_PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["settings"].get("seq_len", 512))' "$run/run.json")
k=$("$NL_PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["data"].get("k_retrieved", 0))' "$run/run.json")

# The job folder as it stood before the night's decision (training done, nothing scored): the
# `job` case runs the job's own steps 4-6 from a copy of it.
pre=$out/job-before-decision
rm -rf "$pre"; cp -a "$out/job" "$pre"
rm -rf "$pre/runs/0001/eval.json" "$pre/runs/0001/decision.json" "$pre/runs/0001/summary.md" "$pre/current" "$pre/adapters/0001"

# One command, timed: its wall, user and system seconds to FILE, in microseconds' resolution
# (the child's rusage from wait4; /usr/bin/time prints hundredths, and a gate of four commands
# of ~0.07 s each lost a tenth of its time to that rounding). stdout and stderr pass through.
timed_cmd() {
  "$NL_PY" - "$@" <<'PY'
import os, subprocess, sys, time
out, cmd = sys.argv[1], sys.argv[2:]
t0 = time.perf_counter()
p = subprocess.Popen(cmd)
_, status, ru = os.wait4(p.pid, 0)
wall = time.perf_counter() - t0
open(out, "w").write(f"{wall:.6f} {ru.ru_utime:.6f} {ru.ru_stime:.6f}\n")
sys.exit(os.waitstatus_to_exitcode(status))
PY
}

# run_case BIN NAME RESULT_PREFIX [EVAL_ARGS [LAMP2_ARGS]]: runs one case, printing its wall
# seconds and its CPU seconds (user + system of every command: on a shared machine the wall
# time also counts waiting for a core), each summed over the case's commands (the timer's own
# start is in neither).
run_case() {
  local bin=$1 name=$2 res=$3 wall=0 cpu=0 w u s
  local common=(--model "$model" --threads "$threads")
  timed() {
    timed_cmd "$res.time" "$@"
    read -r w u s < "$res.time"
    wall=$(echo "$wall + $w" | bc); cpu=$(echo "$cpu + $u + $s" | bc)
  }
  local ea=() la=()
  read -r -a ea <<< "${4:-}"
  read -r -a la <<< "${5:-}"
  case "$name" in
    gate)
      timed "$bin" eval "${common[@]}" --data "$run/heldout.jsonl" --seq-len "$seq_len" --adapter "$run/candidate" --json "${ea[@]}" > "$res.cand.json"
      timed "$bin" eval "${common[@]}" --data "$run/heldout.jsonl" --seq-len "$seq_len" --json "${ea[@]}" > "$res.base.json"
      timed "$bin" lamp2-eval "${common[@]}" --questions "$run/heldout_questions.json" --outputs "$run/heldout_outputs.json" \
        --retrieve "$k" --adapter "$run/candidate" --json "${la[@]}" > "$res.cand-tags.json"
      timed "$bin" lamp2-eval "${common[@]}" --questions "$run/heldout_questions.json" --outputs "$run/heldout_outputs.json" \
        --retrieve "$k" --json "${la[@]}" > "$res.base-tags.json" ;;
    job)  # the same decision as the job makes it: one process, the model loaded once
      rm -rf "$res.job"; cp -a "$pre" "$res.job"
      night_cmd "$bin" "$res.job"
      timed "${night[@]}" > "$res.job.log" 2>&1
      "$NL_PY" -c 'import json, sys
d = json.load(open(sys.argv[1]))
d["current"].pop("adapter", None)
print(json.dumps({k: d[k] for k in ("outcome", "reason", "candidate", "current")}))' "$res.job/runs/0001/decision.json" > "$res.json" ;;
    lamp2)
      timed "$bin" lamp2-eval "${common[@]}" --questions "$out/data/questions.json" --outputs "$out/data/outputs.json" \
        --user "$user" --adapter "$run/candidate" --json "${la[@]}" > "$res.json" ;;
    lamp2-k4)
      timed "$bin" lamp2-eval "${common[@]}" --questions "$out/data/questions.json" --outputs "$out/data/outputs.json" \
        --user "$user" --adapter "$run/candidate" --retrieve 4 --json "${la[@]}" > "$res.json" ;;
  esac
  echo "$wall $cpu"
}

sides=(new); [ -n "$base" ] && sides=(base new)
echo "infer_eval.sh: $(date -u +%Y-%m-%dT%H:%M:%SZ), model $model, user $user, threads $threads, reps $reps; run $run"
echo "base: ${base:-(none)}"
echo "new:  $new${new_eval_args:+ (eval $new_eval_args)}${new_lamp2_args:+ (lamp2-eval $new_lamp2_args)}"
: > "$out/times.tsv"
for ((r = 1; r <= reps; r++)); do
  for c in gate job lamp2 lamp2-k4; do
    for side in "${sides[@]}"; do
      mkdir -p "$out/$side"
      if [ "$side" = base ]; then s=$(run_case "$base" "$c" "$out/$side/$c")
      else s=$(run_case "$new" "$c" "$out/$side/$c" "$new_eval_args" "$new_lamp2_args"); fi
      printf '%s\t%s\t%s\t%s\n' "$c" "$side" ${s} >> "$out/times.tsv"
    done
  done
done

if [ -n "$base" ]; then
  # Same outputs (eval's JSON names no binary; lamp2-eval's holds every tag's log-probability):
  # identical, or else whether every prediction, count and metric is, and how far the numbers
  # that differ are apart (relative).
  same=yes
  for f in "$out"/new/*.json; do
    # eval --json of the new binary also says which precision it used.
    if ! verdict=$("$NL_PY" - "$out/base/$(basename "$f")" "$f" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
for d in (a, b):
    if isinstance(d, dict): d.pop("precision", None)
if a == b: sys.exit(0)
fields, worst = set(), 0.0
def walk(x, y, path):
    global worst
    if isinstance(x, dict) and isinstance(y, dict):
        for k in set(x) | set(y): walk(x.get(k), y.get(k), path + "/" + k)
    elif isinstance(x, list) and isinstance(y, list) and len(x) == len(y):
        for u, v in zip(x, y): walk(u, v, path)
    elif x != y:
        fields.add(path)
        if isinstance(x, float) and isinstance(y, float):
            worst = max(worst, abs(x - y) / max(abs(x), abs(y)))
        else:
            worst = float("inf")
walk(a, b, "")
print(f"{', '.join(sorted(fields))} differ by at most {worst:.1e} (relative)"
      + ("; every prediction and metric is the same" if "/items/tag_logprob" in fields and len(fields) == 1 else ""))
sys.exit(1)
PY
    ); then same=no; echo "outputs differ: $(basename "$f"): $verdict"; fi
  done
  echo "same outputs (every loss, every tag log-probability): $same${new_eval_args:+ (the new side ran eval with other arguments)}${new_lamp2_args:+ (the new side ran lamp2-eval with other arguments)}"
fi

"$NL_PY" - "$out/times.tsv" <<'PY'
import collections, statistics, sys
t = collections.defaultdict(list)    # wall seconds
cpu = collections.defaultdict(list)  # user + system seconds
for line in open(sys.argv[1]):
    c, side, s, u = line.split("\t")
    t[(c, side)].append(float(s))
    cpu[(c, side)].append(float(u))
cases = ["gate", "job", "lamp2", "lamp2-k4"]
has_base = any(side == "base" for _, side in t)
print("| case | base wall s | new wall s | speed-up | base CPU s | new CPU s | speed-up |" if has_base
      else "| case | new wall s | new CPU s |")
print("|---|---|---|---|---|---|---|" if has_base else "|---|---|---|")
m = statistics.median
for c in cases:
    n, nc = m(t[(c, "new")]), m(cpu[(c, "new")])
    if has_base:
        b, bc = m(t[(c, "base")]), m(cpu[(c, "base")])
        print(f"| {c} | {b:.3f} | {n:.3f} | {b / n:.2f}x | {bc:.3f} | {nc:.3f} | {bc / nc:.2f}x |")
    else:
        print(f"| {c} | {n:.3f} | {nc:.3f} |")
print(f"\nseconds per case (whole commands, model loads included; CPU = user + system), medians of "
      f"{len(t[('gate', 'new')])} interleaved reps")
PY
