#!/usr/bin/env bash
# Keeps the arm64 (phone) path honest: cross-compiles the kernel-level test programs for
# aarch64 (ARMv8.0 baseline, the sdot kernels chosen at run time) with Debian's
# g++-aarch64-linux-gnu into build-arm64/ and runs them under qemu-aarch64 (Debian's
# qemu-user) twice: `-cpu max`, so the dotprod code executes, and `-cpu cortex-a53`, an
# ARMv8.0 core without it, so the widening kernels run and nothing newer is executed.
# The same tree gets the static nightlora (scripts/build-arm64-static.sh), whose quickstart
# run is compared with the x86-64 build's (tests/arm64/quickstart.sh).
#
#   scripts/arm64.sh               build, then run the tests under qemu (ctest in build-arm64)
#   scripts/arm64.sh --build-only  build only (scripts/test.sh does this; the Release tree's
#                                  ctest then runs the programs as arm64.* entries)
#
# Which test folders: NL_ARM64_TEST_DIRS (default "quant engine modelio host_ops host util"), the
# same tests/<dir>/*.cpp files as the host build, so new kernel tests are picked up as they
# land; each program's gtest filter is tests/CMakeLists.txt's (of tests/host, only the
# precision plan and its calibration).
# Missing prerequisites (not a Debian machine set up by scripts/setup.sh): a clear message
# and exit status 0 with --build-only (the Release tree then reports the skip), 77 otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build_only=0
[ "${1:-}" = "--build-only" ] && build_only=1

build=${NL_ARM64_BUILD_DIR:-$root/build-arm64}
dirs=${NL_ARM64_TEST_DIRS:-quant engine modelio host_ops host util}
jobs=$(nproc 2>/dev/null || echo 2)
toolchain=$root/cmake/aarch64-linux-gnu.cmake

skip() {
  echo "arm64: SKIPPED: $1 (scripts/setup.sh installs it)" >&2
  [ "$build_only" = 1 ] && exit 0 || exit 77
}
command -v aarch64-linux-gnu-g++ >/dev/null || skip "no aarch64-linux-gnu-g++ (package g++-aarch64-linux-gnu)"
command -v qemu-aarch64 >/dev/null || skip "no qemu-aarch64 (package qemu-user)"
[ -f /usr/src/googletest/CMakeLists.txt ] || skip "no GoogleTest sources in /usr/src/googletest (package googletest)"
[ -f /usr/lib/aarch64-linux-gnu/pkgconfig/libpcre2-8.pc ] || skip "no aarch64 PCRE2 (package libpcre2-dev:arm64)"

# GoogleTest for aarch64, from Debian's sources; built once, kept in build-arm64/.
gtest_prefix=$build/googletest-armv8-a  # named for the flags it was built with
if [ ! -f "$gtest_prefix/lib/cmake/GTest/GTestConfig.cmake" ]; then
  echo "arm64: building GoogleTest for aarch64"
  cmake -S /usr/src/googletest -B "$build/googletest-build-armv8-a" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_TOOLCHAIN_FILE="$toolchain" -DBUILD_GMOCK=OFF -DINSTALL_GTEST=ON \
    -DCMAKE_INSTALL_PREFIX="$gtest_prefix" -DCMAKE_INSTALL_LIBDIR=lib >/dev/null
  cmake --build "$build/googletest-build-armv8-a" -j "$jobs" --target install >/dev/null
fi

echo "arm64: cross-compiling tests/{${dirs// /,}} for aarch64 (-march=armv8-a)"
# Static executables need PCRE2's static library (pkg-config would name the shared one).
# (-U: a tree configured before the baseline moved to armv8-a keeps no stale flags.)
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -UCMAKE_CXX_FLAGS -UCMAKE_C_FLAGS \
  -DCMAKE_TOOLCHAIN_FILE="$toolchain" -DGTest_DIR="$gtest_prefix/lib/cmake/GTest" \
  -D"pkgcfg_lib_PCRE2_pcre2-8=/usr/lib/aarch64-linux-gnu/libpcre2-8.a" \
  -DNL_BUILD_BENCH=OFF -DNL_VULKAN=OFF -DNL_CROSS_TEST_DIRS="${dirs// /;}" >/dev/null
targets=()
for d in $dirs; do [ -d "tests/$d" ] && targets+=("test_$d"); done
cmake --build "$build" -j "$jobs" --target "${targets[@]}"
# The static nightlora, in the same tree (the library is compiled once): the phone binary
# that the arm64.quickstart tests run end to end, built and checked by the script users run.
NL_ARM64_STATIC_DIR=$build bash scripts/build-arm64-static.sh

[ "$build_only" = 1 ] && exit 0
echo "arm64: running ${targets[*]} under qemu-aarch64 -cpu max"
cd "$build"
ctest --output-on-failure -j "$jobs" --timeout 1200
echo "arm64: running ${targets[*]} under qemu-aarch64 -cpu cortex-a53"
for t in "${targets[@]}"; do
  filter=$(sed -n "s/^NL_ARM64_GTEST_FILTER_$t:STRING=//p" CMakeCache.txt)
  [ -n "$filter" ] || filter=$(sed -n 's/^NL_ARM64_GTEST_FILTER:STRING=//p' CMakeCache.txt)
  qemu-aarch64 -cpu cortex-a53 -L /usr/aarch64-linux-gnu "tests/$t" --gtest_brief=1 --gtest_filter="$filter"
done
# The quickstart end to end against the x86-64 build, where there is one (scripts/test.sh's
# ctest runs these as arm64.quickstart and arm64-a53.quickstart).
cd "$root"
if [ -x build/nightlora ]; then
  for cpu in max cortex-a53; do bash tests/arm64/quickstart.sh build/nightlora "$build/nightlora" "$cpu"; done
else
  echo "arm64: no x86-64 build/nightlora: the quickstart comparison (tests/arm64/quickstart.sh) is left out"
fi
