#!/usr/bin/env bash
# Builds nightlora (Release) and runs the whole test suite with ctest: unit tests, the
# reference comparisons (PyTorch, the npm peers), and the kernel-level tests cross-compiled for arm64 and run under qemu
# twice (scripts/arm64.sh; ctest entries arm64.* with -cpu max, arm64-a53.* with
# -cpu cortex-a53, an ARMv8.0 core without dotprod), with the static arm64 nightlora's
# quickstart compared to the x86-64 build's (arm64.quickstart, arm64-a53.quickstart).
# Then the fuzz targets (scripts/fuzz.sh --ci, a clang ASan/UBSan build in build-fuzz/):
# every file of fuzz/regressions/ replayed, the hostile-input tests under ASan/UBSan, every
# target fuzzed 20 s two at a time, the planted-bug check and serve's hostile requests
# against the sanitized server (docs/RELIABILITY.md).
# Installs what it needs first (scripts/setup.sh is quick when all is there).
set -euo pipefail
cd "$(dirname "$0")/.."
# Each phase's wall time is printed, to keep the whole run (CI: ~25 minutes) in view.
phase() { echo "test.sh: $1 done at ${SECONDS}s"; }
bash scripts/setup.sh
phase setup
jobs=$(nproc 2>/dev/null || echo 2)
# arm64 first: the Release tree lists the cross-built test programs when it is configured.
bash scripts/arm64.sh --build-only
phase "arm64 build"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DNL_ARM64_TESTS=ON >/dev/null
cmake --build build -j "$jobs" --target all
phase "Release build"
cd build
ctest --output-on-failure -j "$jobs" --timeout 1200
cd ..
phase ctest
bash scripts/fuzz.sh --ci
phase fuzzing
