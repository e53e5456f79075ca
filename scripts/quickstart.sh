#!/usr/bin/env bash
# Installs what nightlora needs, builds it in Release and runs the main job on the embedded
# default: a short personalization of the stories260K model (scripts/demo.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$jobs" --target nightlora_cli
bash scripts/demo.sh
