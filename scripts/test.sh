#!/usr/bin/env bash
# Installs dependencies, builds everything and runs the whole test suite with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
cd build
ctest --output-on-failure --parallel "$(nproc)" --timeout 600 "$@"
