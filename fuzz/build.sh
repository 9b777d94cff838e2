#!/usr/bin/env bash
# Builds every libFuzzer target with clang into DIR (default build-fuzz): the whole library
# configured with clang, only the fuzz targets and what they link built. Extra arguments go to
# cmake (e.g. -DCMAKE_CXX_COMPILER_LAUNCHER=ccache).
#
#   bash fuzz/build.sh [DIR] [cmake args...]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="${1:-$root/build-fuzz}"
shift || true
# -O1 and line tables: fast to build, enough for the sanitizers' stack traces.
CC=clang CXX=clang++ cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Fuzz \
  -DCMAKE_CXX_FLAGS_FUZZ="-O1 -gline-tables-only" -DCMAKE_C_FLAGS_FUZZ="-O1 -gline-tables-only" \
  -DRAPIDE_BUILD_FUZZ=ON -DRAPIDE_BUILD_TESTS=OFF -DRAPIDE_BUILD_BENCH=OFF "$@" >/dev/null
cmake --build "$dir" --target fuzz --parallel "$(nproc)"
