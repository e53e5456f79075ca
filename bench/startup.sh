#!/usr/bin/env bash
# Start-up of short nightlora commands, two builds side by side (bench/startup.py: interleaved
# runs, medians of wall and CPU time). The commands: `nightlora --version` (start-up and the
# CLI's option tables alone) and `nightlora tokenize` of three lines on stories260K (a real
# short command: a model's tokenizer loaded, text encoded).
#
#   bench/startup.sh --base OLD_NIGHTLORA [--new NIGHTLORA] [--model M.gguf] [--runs 50]
#                    [--libraries]
#
# --new defaults to $NL_BUILD_DIR/nightlora (build-bench; built unless NL_NO_BUILD=1).
# --libraries adds what each shared library costs at start-up by itself: a C++ hello-world
# built plainly and linked (--no-as-needed) with each library nightlora or nightlora-serve
# loads (libvulkan, libpcre2-8, libcpp-httplib with its OpenSSL, zlib and brotli).
set -euo pipefail
source "$(dirname "$0")/common.sh"

base=""; new=""; model=${NL_SHARED:-$NL_ROOT/..}/shared/models/stories260K/stories260K.gguf
runs=50; libraries=0
while [ $# -gt 0 ]; do
  case "$1" in
    --base) base=$2; shift 2 ;;
    --new) new=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --libraries) libraries=1; shift ;;
    *) echo "startup.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[ -n "$base" ] || { echo "startup.sh: give --base OLD_NIGHTLORA (a copy of the binary before the change)" >&2; exit 2; }
[ -f "$model" ] || { echo "startup.sh: no model at $model (give --model)" >&2; exit 1; }
[ -n "$new" ] || new=$(nl_built_nightlora)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf 'Once upon a time there was a little dragon.\nShe liked to fly over the hills.\nThe end.\n' > "$tmp/lines.txt"

echo "== start-up: $base (base) vs $new (new); $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
for b in base new; do
  bin=${!b}
  echo "$b libraries (DT_NEEDED): $(readelf -d "$bin" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | tr '\n' ' ')"
done
"$NL_PY" "$NL_ROOT/bench/startup.py" --runs "$runs" --stdin "$tmp/lines.txt" \
  "version-base=$base --version" "version-new=$new --version" \
  "tokenize-base=$base tokenize --model $model" "tokenize-new=$new tokenize --model $model"

if [ "$libraries" = 1 ]; then
  echo
  echo "== what each library costs at start-up: a C++ hello-world linked with it (--no-as-needed)"
  printf '#include <cstdio>\n#include <string>\nint main() { std::string s = "hello"; std::puts(s.c_str()); }\n' > "$tmp/hello.cpp"
  declare -A libs=([plain]="" [vulkan]="-lvulkan" [pcre2]="-lpcre2-8" [httplib]="-lcpp-httplib"
                   [vulkan+pcre2]="-lvulkan -lpcre2-8")
  cmds=()
  for name in plain vulkan pcre2 vulkan+pcre2 httplib; do
    g++ -O2 "$tmp/hello.cpp" -o "$tmp/hello-$name" -Wl,--no-as-needed ${libs[$name]}
    cmds+=("hello-$name=$tmp/hello-$name")
  done
  "$NL_PY" "$NL_ROOT/bench/startup.py" --runs "$runs" "${cmds[@]}"
fi
