#!/usr/bin/env bash
# The issue-5 benchmark: prefix caching and the KV offload tier on synth100m Q8_0
# (in-process, no HTTP).
#
#   bench/prefix_cache.sh [--quick] [extra bench_prefix_cache options...]
#
# Builds rapide and bench_prefix_cache in $BUILD_DIR (default build-prefix), generates the
# synth100m Q8_0 model with `rapide synth` when it is missing (into $MODEL_DIR, default
# $BUILD_DIR/models: never committed), then prints the three tables (ttft, chat, cycle)
# with the exact command line that produced them. The 2,760-token ttft prompt is beyond
# synth100m's trained context (2048): the engine allows it with a warning (rope
# extrapolates; the timing is what matters here).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build-prefix}"
models="${MODEL_DIR:-$build/models}"
shared="${SHARED_DIR:-$(cd "$root/.." && pwd)/shared}"
synth="$models/synth100m-q8_0.gguf"
vocab="$shared/models/llama2-tiny-random/llama-2-tiny-random.gguf"

if [[ ! -f "$build/build.ninja" ]]; then
  cmake -S "$root" -B "$build" -G Ninja >/dev/null
fi
ninja -C "$build" -j "${JOBS:-2}" bench_prefix_cache >/dev/null

mkdir -p "$models"
if [[ ! -f "$synth" ]]; then
  ninja -C "$build" -j "${JOBS:-2}" rapide >/dev/null
  echo "+ $build/apps/rapide/rapide synth --shape synth100m --type q8_0 --vocab-from $vocab -o $synth"
  "$build/apps/rapide/rapide" synth --shape synth100m --type q8_0 --vocab-from "$vocab" -o "$synth"
fi

cmd=("$build/bench/bench_prefix_cache" "$synth" "$@")
echo "+ ${cmd[*]}"
"${cmd[@]}"
