#!/usr/bin/env bash
# The personalization experiment (issue 7), on synthetic LaMP-2 users and stories260K:
# for every user, five conditions answered on the user's held-out questions by tag scoring:
#   none        the base model, no adapter, no retrieval
#   retrieval   the base model with the k most similar profile items in the prompt (BM25)
#   mezo        a MeZO (forward-only) adapter trained for the SAME wall time as first-order
#   first-order our adapter (`nightlora nightly`, first-order training)
#   torch       the "server-trained" adapter: tools/torch_ref/train_lora_jsonl.py (PyTorch
#               autograd, same LoRA config, same JSONL, same steps), loaded with --adapter
# Adapters are trained by `nightlora nightly` (first-order, then MeZO with --budget-sec set to
# the first-order run's training time) on the user's profile minus the latest items it holds
# out for its own decision; the PyTorch trainer reads the very same train.jsonl. Then accuracy
# and macro-F1 per condition (all questions pooled) and paired comparisons (per-user accuracy,
# bootstrap CI) via `nightlora lamp2-compare`. Writes OUT/results.md (and every raw file).
#
#   bench/personalization.sh [--out DIR] [--users N] [--items N] [--questions N] [--seed S]
#                            [--tags-per-user N] [--noise X] [--retrieve K] [--iters N]
#                            [--lr X] [--mezo-lr X] [--rank R] [--threads N] [--model GGUF]
# Runs from a fresh checkout after scripts/setup.sh (builds what it needs into
# $NL_BUILD_DIR, default build-bench; NL_NO_BUILD=1 uses the nightlora already there). Needs ../shared/models/stories260K (or --model).
set -euo pipefail
source "$(dirname "$0")/common.sh"

# Defaults: the run recorded in docs/PERSONALIZATION.md (about 25 minutes on 2 shared cores).
# MeZO's rate is its own: at first-order's 1e-2 (or 1e-3) its training loss diverges.
out=""; users=6; items=60; questions=25; seed=3; tags=2; noise=0.1; retrieve=4
iters=60; lr=5e-3; mezo_lr=1e-4; mezo_eps=1e-3; rank=8; threads=1; batch=4
model=${NL_SHARED:-$NL_ROOT/..}/shared/models/stories260K/stories260K.gguf
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --users) users=$2; shift 2 ;;
    --items) items=$2; shift 2 ;;
    --questions) questions=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --tags-per-user) tags=$2; shift 2 ;;
    --noise) noise=$2; shift 2 ;;
    --retrieve) retrieve=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --lr) lr=$2; shift 2 ;;
    --mezo-lr) mezo_lr=$2; shift 2 ;;
    --mezo-eps) mezo_eps=$2; shift 2 ;;
    --rank) rank=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    *) echo "personalization.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[ -f "$model" ] || { echo "personalization.sh: no model at $model (give --model)" >&2; exit 1; }
out=${out:-$NL_ROOT/bench/results/personalization-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out/jobs"

if [ "${NL_NO_BUILD:-0}" = 1 ]; then
  # Use the nightlora already built in $NL_BUILD_DIR: a long run should not pick up a working tree
  # that others are editing half-way. nl_bench_prepare still sets up PyTorch's BLAS.
  [ -x "$NL_BUILD_DIR/nightlora" ] || { echo "personalization.sh: NL_NO_BUILD=1 but no $NL_BUILD_DIR/nightlora" >&2; exit 1; }
  ninja() { echo "bench: NL_NO_BUILD=1: not building, using $NL_BUILD_DIR/nightlora as it is" >&2; }
fi
nl_bench_prepare "$threads" nightlora_cli
bin=$NL_BUILD_DIR/nightlora
py=$NL_PY
echo "personalization: model $model, $users users x $items profile items, $questions questions each, out $out"

"$bin" make-lamp2 --users "$users" --items-per-user "$items" --questions-per-user "$questions" --seed "$seed" \
  --tags-per-user "$tags" --noise "$noise" --out "$out/data" >/dev/null
common=(--task lamp2 --model "$model" --user-data "$out/data" --threads "$threads" --batch "$batch" --rank "$rank"
        --save-every 1000 --no-report)
# Training runs at normal priority: equal wall-time budgets mean nothing under SCHED_IDLE on a busy machine.
bg=(-- --normal-priority)

evaluate() {  # evaluate NAME USER [--adapter A] [--retrieve K]
  local name=$1 user=$2; shift 2
  mkdir -p "$out/eval/$name"
  "$bin" lamp2-eval --model "$model" --questions "$out/data/questions.json" --outputs "$out/data/outputs.json" \
    --user "$user" --threads "$threads" --json "$@" > "$out/eval/$name/$user.json"
}

for ((i = 0; i < users; i++)); do
  u=u$i
  echo "== user $u"
  # Our adapter, first-order.
  "$bin" nightly "${common[@]}" --user "$u" --out "$out/jobs/$u/first-order" --iters "$iters" --lr "$lr" "${bg[@]}" > "$out/jobs/$u.first-order.log"
  fo_time=$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["elapsed_s"])' \
            "$out/jobs/$u/first-order/runs/0001/trained.json")
  # MeZO for the same training wall time: many steps allowed, the budget stops it.
  "$bin" nightly "${common[@]}" --user "$u" --out "$out/jobs/$u/mezo" --method mezo --mezo-eps "$mezo_eps" \
    --lr "$mezo_lr" --iters 1000000 --budget-sec "$fo_time" "${bg[@]}" > "$out/jobs/$u.mezo.log"
  # The server-trained reference on the same JSONL.
  nl_torch_python "$NL_ROOT/tools/torch_ref/train_lora_jsonl.py" --model "$model" --nightlora "$bin" \
    --data "$out/jobs/$u/first-order/runs/0001/train.jsonl" --out "$out/jobs/$u/torch" --rank "$rank" \
    --alpha 16 --lr "$lr" --iters "$iters" --batch "$batch" --seed "$seed" --threads "$threads" \
    > "$out/jobs/$u.torch.log"
  grep -h "^train:" "$out/jobs/$u.torch.log" "$out/jobs/$u/first-order/runs/0001/train.out" | sed 's/^/  /'
  evaluate none "$u"
  evaluate retrieval "$u" --retrieve "$retrieve"
  evaluate mezo "$u" --adapter "$out/jobs/$u/mezo/runs/0001/candidate"
  evaluate first-order "$u" --adapter "$out/jobs/$u/first-order/runs/0001/candidate"
  evaluate torch "$u" --adapter "$out/jobs/$u/torch"
done

"$py" "$NL_ROOT/bench/personalization_summary.py" --bin "$bin" --out "$out" --users "$users" \
  --command "bench/personalization.sh --users $users --items $items --questions $questions --seed $seed --tags-per-user $tags --noise $noise --retrieve $retrieve --iters $iters --lr $lr --mezo-lr $mezo_lr --mezo-eps $mezo_eps --rank $rank --batch $batch --threads $threads" \
  | tee "$out/results.md"
