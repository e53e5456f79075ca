#!/usr/bin/env bash
# Builds the phone-runnable nightlora: one fully static aarch64 Linux executable that needs no
# shared library, no dynamic loader and nothing newer than ARMv8.0 (Cortex-A53), so the same
# file runs from `adb shell` or Termux on Android and on any arm64 Linux board. The sdot
# (dotprod) kernels are in it too and chosen at run time where the core has them.
#
#   scripts/build-arm64-static.sh             build into build-arm64-static/nightlora and check it
#   scripts/build-arm64-static.sh --if-available
#                                             the same, but a machine without the cross toolchain
#                                             says so and exits 0 instead of 1
# CI: scripts/arm64.sh (run by scripts/test.sh) calls it on its own aarch64 tree; the Release
# tree's ctest then runs the binary end to end (arm64.quickstart, arm64-a53.quickstart).
#
# Toolchain: Debian's g++-aarch64-linux-gnu with its static glibc (cmake/aarch64-linux-gnu.cmake:
# -march=armv8-a, -static) and PCRE2 from libpcre2-dev:arm64, all installed by scripts/setup.sh.
# Vulkan is left out (the cpu engine is the phone's path) and so are tests and benchmarks.
#
# Static glibc has functions that still load shared objects at run time (getpwnam and the
# rest of NSS, getaddrinfo, dlopen), and the linker warns about each one a program uses.
# nightlora uses none, and this script fails if the linker says otherwise, so the binary's
# behaviour never depends on what is installed on the phone. Nor does it set a locale: it
# runs in the "C" locale, which glibc has built in. What Android itself refuses (system calls
# outside its app sandbox) is handled at start-up (cli/static_start.cpp).
# Environment: NL_ARM64_STATIC_DIR (the build folder; default build-arm64-static).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
if_available=0
[ "${1:-}" = "--if-available" ] && if_available=1

build=${NL_ARM64_STATIC_DIR:-$root/build-arm64-static}
jobs=$(nproc 2>/dev/null || echo 2)
triple=aarch64-linux-gnu

skip() {
  echo "arm64-static: SKIPPED: $1 (scripts/setup.sh installs it)" >&2
  [ "$if_available" = 1 ] && exit 0 || exit 1
}
command -v $triple-g++ >/dev/null || skip "no $triple-g++ (package g++-$triple)"
pcre2=/usr/lib/$triple/libpcre2-8.a
[ -f "$pcre2" ] || skip "no aarch64 PCRE2 static library $pcre2 (package libpcre2-dev:arm64)"
command -v file >/dev/null || skip "no file(1), which checks the result (package file)"

echo "arm64-static: building nightlora for aarch64 (static, -march=armv8-a) in $build"
# A new folder gets no tests. An existing one keeps its choice: scripts/arm64.sh points this
# script at its test tree (NL_ARM64_STATIC_DIR=build-arm64), so CI compiles the aarch64
# library once for the test programs and this binary (same toolchain file, same flags).
# (ccache, where installed, is set up for a new folder only: changing the launcher of an
# existing tree would recompile all of it.)
fresh=()
if [ ! -f "$build/CMakeCache.txt" ]; then
  fresh=(-DNL_BUILD_TESTS=OFF)
  command -v ccache >/dev/null && fresh+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
# pkgcfg_lib_PCRE2_pcre2-8: pkg-config names the shared PCRE2; a static link needs the archive.
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_TOOLCHAIN_FILE="$root/cmake/aarch64-linux-gnu.cmake" "${fresh[@]}" \
  -D"pkgcfg_lib_PCRE2_pcre2-8=$pcre2" \
  -DNL_VULKAN=OFF -DNL_BUILD_BENCH=OFF >/dev/null
# The link's own output is kept: static glibc warns there about every function that would
# dlopen at run time ("Using 'getpwnam' in statically linked applications requires ...").
rm -f "$build/nightlora"
log=$build/link.log
cmake --build "$build" -j "$jobs" --target nightlora_cli 2>&1 | tee "$log"
bin=$build/nightlora

# The checks that make it a phone binary. Each failure names what went wrong.
fail() { echo "arm64-static: FAILED: $1" >&2; exit 1; }
if grep -q "statically linked applications requires at runtime" "$log"; then
  grep "statically linked applications" "$log" >&2
  fail "the binary calls glibc functions that load shared libraries at run time (see above); it must not"
fi
desc=$(file -b "$bin")
case "$desc" in
  *"ARM aarch64"*"statically linked"*) ;;
  *) fail "file(1) says \"$desc\", expected an ARM aarch64 statically linked executable" ;;
esac
if $triple-readelf -l "$bin" | grep -q INTERP; then fail "$bin asks for a dynamic loader (PT_INTERP)"; fi
if $triple-readelf -d "$bin" 2>/dev/null | grep -q NEEDED; then fail "$bin names shared libraries (DT_NEEDED)"; fi
# A Cortex-A53 (ARMv8.0, no dotprod) runs it: nothing newer than the baseline executes on the
# way to --help (the end-to-end test, tests/arm64/quickstart.sh, runs a whole demo there).
# And its first system call installs the SIGSYS handler (cli/static_start.cpp), ahead of glibc's
# set_robust_list and rseq, which Android's app sandbox would otherwise answer by killing it.
if command -v qemu-aarch64 >/dev/null; then
  qemu-aarch64 -cpu cortex-a53 "$bin" --help >/dev/null || fail "$bin --help failed under qemu-aarch64 -cpu cortex-a53"
  first=$(qemu-aarch64 -strace -cpu cortex-a53 "$bin" --help 2>&1 >/dev/null | sed -n '1s/^[0-9]* //p')
  case "$first" in
    "rt_sigaction(SIGSYS,"*) ;;
    *) fail "the first system call is \"$first\", not rt_sigaction(SIGSYS, ...): the entry point nl_static_start is not in use" ;;
  esac
  # It has no HTTP server (nightlora-serve is not cross-built): `serve` says so, exit 1.
  serve_rc=0
  serve_err=$(qemu-aarch64 -cpu cortex-a53 "$bin" serve --help 2>&1 >/dev/null) || serve_rc=$?
  if [ "$serve_rc" != 1 ] || [[ $serve_err != *"this build of nightlora has no nightlora-serve"* ]]; then
    fail "\`nightlora serve\` exited $serve_rc without saying the build has no server: $serve_err"
  fi
fi
echo "arm64-static: $bin"
echo "arm64-static: $desc"
