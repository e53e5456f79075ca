#!/usr/bin/env bash
# The main job: a short personalization. Prints the base model's greedy story, trains a LoRA
# adapter on the repository's stories about Zorbo the dragon (data/stories/), and prints the
# adapted model's greedy story.
#
# Model: stories260K from ../shared/models when present; otherwise a small synthetic
# (random-weight) model, which can still learn the data but will not tell a real story.
# Environment: NIGHTLORA (the binary; default build/nightlora), ITERS (default 30),
# THREADS (default: all cores), OUT (the run folder; default a temporary one).
set -euo pipefail
cd "$(dirname "$0")/.."

NL=${NIGHTLORA:-build/nightlora}
if [ ! -x "$NL" ]; then
  echo "demo: $NL not found; build it first:" >&2
  echo "  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build build --target nightlora_cli" >&2
  exit 1
fi
ITERS=${ITERS:-30}
THREADS=${THREADS:-0}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
OUT=${OUT:-$WORK/zorbo}

MODEL=../shared/models/stories260K/stories260K.gguf
if [ -f "$MODEL" ]; then
  echo "== model: stories260K (a real tiny model trained on TinyStories)"
  LR=5e-3
else
  MODEL=$WORK/tiny-llama.gguf
  echo "== ../shared/models is absent: using a SYNTHETIC model (random weights, nightlora synth-model"
  echo "   --preset tiny-llama). It learns the data, but its stories are not meaningful text."
  "$NL" synth-model --preset tiny-llama --type f32 --seed 1 "$MODEL" >/dev/null
  LR=1e-2
fi

echo
echo "== base model, greedy story:"
"$NL" generate --model "$MODEL" --temp 0 -n 120 --threads "$THREADS"

echo
echo "== training a LoRA adapter on data/stories (stories about Zorbo the dragon):"
"$NL" train --model "$MODEL" --data data/stories/train.jsonl --valid data/stories/valid.jsonl --out "$OUT" \
  --iters "$ITERS" --batch 8 --lr "$LR" --warmup 5 --rank 8 --alpha 16 --seq-len 256 --val-every 20 \
  --seed 1 --threads "$THREADS"

echo
echo "== adapted model, greedy story (adapter: $OUT/adapter.gguf):"
"$NL" generate --model "$MODEL" --temp 0 -n 120 --threads "$THREADS" --adapter "$OUT/adapter.gguf"
