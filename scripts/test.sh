#!/usr/bin/env bash
# Installs dependencies, builds everything and runs the whole test suite with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
cd build
# A few end-to-end tests measure real time on loopback; a failure is rerun once so a
# scheduling hiccup on a loaded machine does not fail the suite (a real bug fails twice).
ctest --output-on-failure --parallel "$(nproc)" --timeout 600 --repeat until-pass:2 "$@"
