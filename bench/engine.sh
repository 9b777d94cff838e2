#!/usr/bin/env bash
# The issue-4 engine benchmark on synth100m Q8_0 and stories260K (in-process, no HTTP).
#
#   bench/engine.sh [--quick] [extra bench_engine_workload options...]
#
# Builds bench_engine_workload in $BUILD_DIR (default build-ebench), generates the synth100m
# Q8_0 model with `rapide synth` (building rapide) when it is missing (into $MODEL_DIR, default
# $BUILD_DIR/models: never committed), then prints each model's tables with the exact
# command line that produced them. --quick keeps the whole run CI-sized.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build-ebench}"
models="${MODEL_DIR:-$build/models}"
shared="${SHARED_DIR:-$(cd "$root/.." && pwd)/shared}"
synth="$models/synth100m-q8_0.gguf"
stories="$shared/models/stories260K/stories260K.gguf"
vocab="$shared/models/llama2-tiny-random/llama-2-tiny-random.gguf"

if [[ ! -f "$build/build.ninja" ]]; then
  cmake -S "$root" -B "$build" -G Ninja >/dev/null
fi
ninja -C "$build" -j "${JOBS:-2}" bench_engine_workload >/dev/null

mkdir -p "$models"
if [[ ! -f "$synth" ]]; then
  # rapide (with its server) is only needed to write the model once.
  ninja -C "$build" -j "${JOBS:-2}" rapide >/dev/null
  echo "+ $build/apps/rapide/rapide synth --shape synth100m --type q8_0 --vocab-from $vocab -o $synth"
  "$build/apps/rapide/rapide" synth --shape synth100m --type q8_0 --vocab-from "$vocab" -o "$synth"
fi

for model in "$synth" "$stories"; do
  cmd=("$build/bench/bench_engine_workload" "$model" "$@")
  echo
  echo "+ ${cmd[*]}"
  "${cmd[@]}"
done
