#!/usr/bin/env bash
# Builds nightlora (Release) and runs the whole test suite with ctest: unit tests, the
# reference comparisons (PyTorch, the npm peers), the hostile-input tests under
# ASan/UBSan. Installs what it needs first (scripts/setup.sh is quick when all is there).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$jobs" --target all test_hostile_sanitized
cd build
ctest --output-on-failure -j "$jobs" --timeout 1200
