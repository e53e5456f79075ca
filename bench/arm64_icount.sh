#!/usr/bin/env bash
# The arm64 (NEON) products without arm64 hardware: executed aarch64 instructions of one
# forward and one input-gradient product of the cpu engine (1 thread), per weight type and
# precision mode, counted under qemu-aarch64 (-cpu max: NEON with dotprod; --cpu cortex-a53 for an
# ARMv8.0 core, where the int8 products take the widening kernels).
# bench/arm64_icount.cpp says what is counted; an instruction count is not a time.
#
#   bench/arm64_icount.sh [--types q4_0,q8_0,q4_k,q6_k,f16] [--precision f32,f16,int8]
#                         [--rows 128] [--cols 1536] [--tokens 128] [--jobs 2] [--bin FILE]
#                         [--cpu max]
# --bin: count an nl_arm64_icount built elsewhere (an older commit, for an A/B) instead of
# building this tree's.
# Default shape: 128 x 1536 (half of qwen2.5-1.5b's k/v projection: K-quant rows need whole
# 256-column super-blocks) at 128 tokens, about a minute of qemu per type and mode. Needs
# what scripts/setup.sh installs (the aarch64 cross compiler, qemu-user, arm64 PCRE2);
# builds the aarch64 libraries with scripts/arm64.sh --build-only.
set -euo pipefail
cd "$(dirname "$0")/.."
types=q4_0,q8_0,q4_k,q6_k,f16; precision=f32,f16,int8; rows=128; cols=1536; tokens=128; jobs=2; bin=""; cpu=max
while [ $# -gt 0 ]; do
  case "$1" in
    --types) types=$2; shift 2 ;;
    --precision) precision=$2; shift 2 ;;
    --rows) rows=$2; shift 2 ;;
    --cols) cols=$2; shift 2 ;;
    --tokens) tokens=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --bin) bin=$(realpath "$2"); shift 2 ;;
    --cpu) cpu=$2; shift 2 ;;
    *) echo "arm64_icount: unknown option $1" >&2; exit 2 ;;
  esac
done
if [ -z "$bin" ]; then
  build=${NL_ARM64_BUILD_DIR:-$PWD/build-arm64}
  [ -f "$build/build.ninja" ] || bash scripts/arm64.sh --build-only >&2
  targets=(); archives=()
  for l in engine modelio tokenizer quant job util; do targets+=("nl_$l"); archives+=("$build/libnl_$l.a"); done
  cmake --build "$build" -j "$jobs" --target "${targets[@]}" >&2
  bin=$build/nl_arm64_icount
  rm -f "$bin"
  aarch64-linux-gnu-g++ -Iinclude -march=armv8-a -O2 -std=gnu++20 -static bench/arm64_icount.cpp \
    "${archives[@]}" -lpcre2-8 -pthread -o "$bin" 2>&1 | { grep -v "getaddrinfo\|in function" >&2 || true; }
fi
[ -x "$bin" ] || { echo "arm64_icount: no program $bin (build failed?)" >&2; exit 1; }

count() {  # TYPE PRECISION -> "TYPE PRECISION forward_instructions input_grad_instructions"
  qemu-aarch64 -cpu "$cpu" -singlestep -d exec,nochain -D /dev/stdout "$bin" "$1" "$2" "$rows" "$cols" "$tokens" |
    awk -v t="$1" -v p="$2" '/^Trace/ { s = $NF; n++; if (s == "nl_icount_mark" && prev != s) m[k++] = n; prev = s }
      END { if (k != 4) { print t, p, "failed"; exit 1 } print t, p, m[1] - m[0], m[3] - m[2] }'
}
export -f count
export bin rows cols tokens cpu
echo "arm64_icount: $bin, tree at $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(date -u '+%Y-%m-%d %H:%M UTC'), qemu $(qemu-aarch64 --version | head -1 | awk '{print $3}'), -cpu $cpu, 1 thread"
echo "shape: $rows x $cols (out x in), $tokens tokens; instructions per product and per 1024 multiply-adds"
printf '%-6s %-5s %12s %8s %12s %8s %7s\n' type mode forward "/1k MAC" "input grad" "/1k MAC" dX/fwd
for t in ${types//,/ }; do for p in ${precision//,/ }; do echo "$t $p"; done; done |
  xargs -P "$jobs" -n 2 bash -c 'count "$0" "$1"' |
  sort -k1,1 -k2,2 |
  awk -v macs="$((rows * cols * tokens))" '$3 == "failed" { print $1, $2, "failed"; next }
    { printf "%-6s %-5s %12d %8.1f %12d %8.1f %7.2f\n", $1, $2, $3, 1024 * $3 / macs, $4, 1024 * $4 / macs, $4 / $3 }'
