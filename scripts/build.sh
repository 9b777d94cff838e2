#!/usr/bin/env bash
# Configures and builds rapide (Release) into ./build.
#
#   bash scripts/build.sh [--target NAME] [cmake args...]
#
# Without --target it builds everything (the binary, tests, benchmarks); scripts/test.sh needs
# that. `--target rapide` builds only the binary and the libraries it links, about half the
# steps (scripts/run.sh; issue 51: a first answer should not wait for the test suite). Extra
# arguments go to cmake's configure step. Before building it prints one line saying what it
# builds and how many steps that is; ninja's [n/N] lines then count the steps left to run.
set -euo pipefail
cd "$(dirname "$0")/.."
target=""
if [ "${1:-}" = "--target" ]; then
  target="${2:?--target needs a name}"
  shift 2
fi
bash scripts/install-deps.sh
jobs=$(nproc)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"

# The counts come from the generated build.ninja: every command a target needs, built or not,
# so the figure is the same on a cold and a warm build directory.
tree_steps=$(ninja -C build -t commands | wc -l)
if [ -n "$target" ]; then
  target_steps=$(ninja -C build -t commands "$target" | wc -l)
  echo "build.sh: building only '$target' and what it links: $target_steps of the tree's" \
    "$tree_steps steps (tests, benchmarks and fuzzers: scripts/test.sh), on $jobs cores"
  cmake --build build --target "$target" --parallel "$jobs"
else
  echo "build.sh: building everything (binary, tests, benchmarks): $tree_steps steps, on" \
    "$jobs cores"
  cmake --build build --parallel "$jobs"
fi
