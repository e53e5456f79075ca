#!/usr/bin/env bash
# The x86-64 nightlora on CPUs older than the one running the tests: the same binary under
# qemu-x86_64 with an emulated CPU model, whose CPUID the run-time dispatch reads. ctest runs
# it as x86.older-cpu.Nehalem (x86-64-v2, no AVX: the scalar kernels and the generic host
# code) and x86.older-cpu.Haswell (AVX2 and FMA, no VNNI, no AVX-512: the plain AVX2 sets).
#
#   tests/x86/older_cpus.sh NIGHTLORA QEMU_CPU EXPECTED_KERNEL_SET
#
# Why: the development and CI machines change CPU between sessions, and a build that runs on
# a Zen 5 can still execute an AVX-512 instruction before it has asked the CPU (2026-12-07:
# building the avx512-vnni kernel table did, so every command died with SIGILL on Zen 3 and
# on any x86-64 CPU without AVX-512). qemu's TCG does not emulate AVX-512, so such a slip is
# an illegal instruction here whatever CPU the tests run on.
#
# Three checks, each resting on something exact:
# 1. `--version` names the expected kernel set (the dispatch saw the emulated CPU).
# 2. The quickstart's story (base, and adapted after 3 f32 steps) is the native run's, byte
#    for byte (tests/arm64/quickstart.sh says why f32 stories can be compared across kernel
#    sets). Measured for this run's settings (stories260K, `generate --logits-json`): the
#    smallest gap between the best and the second-best token is 0.13 in the base story and
#    0.12 in the adapted one, against f32 differences between kernel sets of about 2e-5.
# 3. int8 training with the CPU's kernels and with NL_ENGINE_ISA=scalar (the reference) gives
#    the same adapter bytes: the same binary and host code, kernels bit-identical to the
#    reference.
# Exit status 77 (ctest: skipped) with the reason when qemu-x86_64 is missing.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ $# -ne 3 ]; then
  echo "usage: $0 NIGHTLORA QEMU_CPU EXPECTED_KERNEL_SET" >&2
  exit 2
fi
native=$1 cpu=$2 expected=$3
[ -x "$native" ] || { echo "x86 older cpu: no nightlora at $native (build target nightlora_cli)" >&2; exit 1; }
command -v qemu-x86_64 >/dev/null || { echo "x86 older cpu: SKIPPED: qemu-x86_64 not found (package qemu-user)"; exit 77; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
emulated=(qemu-x86_64 -cpu "$cpu" "$native")

status=0
fail() {
  echo "x86 older cpu ($cpu): FAILED: $*" >&2
  status=1
}

version=$("${emulated[@]}" --version 2>&1) || { echo "$version" >&2; echo "x86 older cpu ($cpu): FAILED: --version exited with an error" >&2; exit 1; }
set_line=$(grep "cpu engine kernels on this CPU" <<<"$version" || true)
echo "$cpu: $set_line"
[[ $set_line == *"on this CPU: $expected "* ]] || fail "--version names another kernel set than $expected"

model=${NL_SHARED:-../shared}/models/stories260K/stories260K.gguf
lr=1e-2
if [ ! -f "$model" ]; then
  echo "x86 older cpu: $model is absent: using the synthetic tiny-llama model, as scripts/demo.sh does"
  model=$work/tiny-llama.gguf
  "$native" synth-model --preset tiny-llama --type f32 --seed 1 "$model" >/dev/null
fi
# Shorter than the quickstart (one 64-token example a step: emulated AVX2 trains at about 20
# tokens/s), with a larger learning rate so that 3 steps change the story.
train() {  # train OUT PRECISION ITERS NIGHTLORA...
  local out=$1 precision=$2 iters=$3
  shift 3
  "$@" train --model "$model" --out "$out" --data data/stories/train.jsonl \
    --iters "$iters" --batch 1 --lr "$lr" --warmup 1 --rank 8 --alpha 16 --seq-len 64 --seed 1 --threads 2 --precision "$precision" >"$out.log" 2>&1 ||
    { cat "$out.log" >&2; echo "x86 older cpu ($cpu): FAILED: train ($*) exited with an error" >&2; exit 1; }
}
story() {  # story ADAPTER|"" NIGHTLORA...
  local adapter=$1
  shift
  "$@" generate --model "$model" --temp 0 -n 48 --threads 2 --precision f32 --kv-type f32 ${adapter:+--adapter "$adapter"} \
    2>>"$work/generate.log" || { cat "$work/generate.log" >&2; echo "x86 older cpu ($cpu): FAILED: generate ($*) exited with an error" >&2; exit 1; }
}

start=$(date +%s)
story "" "$native" >"$work/native-base.txt"
train "$work/native-f32" f32 3 "$native"
story "$work/native-f32/adapter.gguf" "$native" >"$work/native-adapted.txt"
mid=$(date +%s)
story "" "${emulated[@]}" >"$work/emulated-base.txt"
train "$work/emulated-f32" f32 3 "${emulated[@]}"
story "$work/emulated-f32/adapter.gguf" "${emulated[@]}" >"$work/emulated-adapted.txt"
train "$work/emulated-int8" int8 2 "${emulated[@]}"
NL_ENGINE_ISA=scalar train "$work/emulated-int8-scalar" int8 2 "${emulated[@]}"
end=$(date +%s)
echo "x86 older cpu: natively $((mid - start)) s, under qemu-x86_64 -cpu $cpu $((end - mid)) s"

for s in base adapted; do
  if cmp -s "$work/native-$s.txt" "$work/emulated-$s.txt"; then
    echo "== $s story (the same natively and on $cpu):"
    cat "$work/native-$s.txt"
  else
    fail "the $s story differs between this CPU and $cpu"
    diff "$work/native-$s.txt" "$work/emulated-$s.txt" >&2 || true
  fi
done
cmp -s "$work/native-base.txt" "$work/native-adapted.txt" && fail "training changed nothing: the adapted story is the base story"
if cmp -s "$work/emulated-int8/adapter.gguf" "$work/emulated-int8-scalar/adapter.gguf"; then
  echo "== int8 training on $cpu: its kernels and the scalar reference give the same adapter bytes"
else
  fail "int8 training gives a different adapter with $cpu's kernels than with NL_ENGINE_ISA=scalar"
fi
exit $status
