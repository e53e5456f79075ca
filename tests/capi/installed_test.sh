#!/bin/bash
# The installed tree as an app sees it (ctest capi.installed.*): `cmake --install` into a
# fresh prefix, then one of
#   symbols  libnightlora.so has its SONAME and exports exactly the C API's nl_* functions
#   c        examples/c built with plain `cc` + pkg-config (C99, -pedantic -Werror) and run
#   cmake    examples/c built with find_package(nightlora) and run
#   python   the Python bindings' pytest tests (python/tests), against the installed package
#   cli      bin/nightlora runs, and its `serve` finds bin/nightlora-serve beside it (where
#            the build has the server)
# Usage: installed_test.sh MODE BUILD_DIR NIGHTLORA_CLI
set -euo pipefail
mode=$1 build=$2 cli=$3
src=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(find "$prefix" -name 'libnightlora.so' -printf '%h\n' | head -1)
[ -n "$libdir" ] || { echo "libnightlora.so was not installed"; exit 1; }

# The model the example trains: stories260K, or a tiny synthetic model when ../shared is absent.
model=$src/../shared/models/stories260K/stories260K.gguf
[ -n "${NL_SHARED:-}" ] && model=$NL_SHARED/models/stories260K/stories260K.gguf
if [ ! -f "$model" ]; then
  echo "stories260K absent: using a tiny synthetic model"
  model=$tmp/tiny.gguf
  "$cli" synth-model --preset tiny-llama --type q8_0 --tokenizer generated "$model" >/dev/null
fi
data=$src/data/stories/train.jsonl

run_example() {  # the example program's output must show the adapter at work
  local exe=$1
  "$exe" "$model" "$data" "$tmp/run-$(basename "$exe")" Zorbo | tee "$tmp/example.out"
  grep -q "the adapter changed the text" "$tmp/example.out"
}

case $mode in
  symbols)
    so=$(readlink -f "$libdir/libnightlora.so")
    soname=$(readelf -d "$so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
    echo "SONAME: $soname"
    [[ $soname =~ ^libnightlora\.so\.[0-9]+$ ]] || { echo "no SONAME libnightlora.so.N"; exit 1; }
    [ -e "$libdir/$soname" ] || { echo "$soname is not installed beside the library"; exit 1; }
    nm -D --defined-only "$so" | awk '$2 != "A" {print $NF}' | sed 's/@.*//' | sort -u > "$tmp/exported"
    grep -o '^NL_API [^(]*(' "$prefix/include/nightlora.h" | sed 's/.*[ *]\([a-z_0-9]*\)($/\1/' | sort -u > "$tmp/declared"
    echo "exported: $(wc -l < "$tmp/exported") symbols; declared: $(wc -l < "$tmp/declared") functions"
    if ! diff "$tmp/declared" "$tmp/exported"; then
      echo "the exported symbols (>) are not the header's NL_API functions (<)"; exit 1
    fi
    [ -f "$prefix/include/nightlora/train/training_job.h" ] || { echo "C++ headers not installed"; exit 1; }
    ;;
  c)
    export PKG_CONFIG_PATH=$(dirname "$(find "$prefix" -name nightlora.pc)")
    echo "pkg-config: $(pkg-config --cflags --libs nightlora)"
    cc -std=c99 -Wall -Wextra -pedantic -Werror "$src/examples/c/train_and_generate.c" \
      $(pkg-config --cflags --libs nightlora) -Wl,-rpath,"$(pkg-config --variable=libdir nightlora)" \
      -o "$tmp/train_and_generate"
    run_example "$tmp/train_and_generate"
    ;;
  cmake)
    cmake -S "$src/examples/c" -B "$tmp/example-build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_BUILD_RPATH="$libdir" >/dev/null
    cmake --build "$tmp/example-build" >/dev/null
    run_example "$tmp/example-build/train_and_generate"
    ;;
  python)
    py=/usr/bin/python3
    if ! $py -c 'import pytest' 2>/dev/null; then
      echo "skipped: Debian's python3-pytest is not installed (scripts/setup.sh installs it)"; exit 77
    fi
    pkg=$(dirname "$(find "$prefix" -path '*/nightlora/__init__.py')")
    cd "$tmp"
    PYTHONPATH=$(dirname "$pkg") NIGHTLORA_TEST_MODEL=$model NIGHTLORA_TEST_DATA=$src/data/stories \
      NIGHTLORA_TEST_CLI=$cli $py -m pytest -q -p no:cacheprovider "$src/python/tests"
    ;;
  cli)
    [ -x "$prefix/bin/nightlora" ] || { echo "bin/nightlora was not installed"; exit 1; }
    "$prefix/bin/nightlora" --version
    if [ ! -x "$build/nightlora-serve" ]; then
      echo "skipped: this build has no nightlora-serve (no cpp-httplib)"; exit 77
    fi
    [ -x "$prefix/bin/nightlora-serve" ] || { echo "bin/nightlora-serve was not installed"; exit 1; }
    # Found beside the installed nightlora, not on PATH.
    PATH=/nonexistent "$prefix/bin/nightlora" serve --help > "$tmp/serve-help.txt"
    grep -q -- "--max-concurrent" "$tmp/serve-help.txt" || { cat "$tmp/serve-help.txt"; echo "no serve options"; exit 1; }
    echo "installed nightlora serve: runs $prefix/bin/nightlora-serve"
    ;;
  *) echo "unknown mode $mode"; exit 2 ;;
esac
