#!/usr/bin/env bash
# Inference-core speed on this machine, measured against its own limits in one run:
# generates the synth100m model (F16, Q8_0, Q4_0) with `rapide synth`, then for each prints
# the read bandwidth (decode roofline), decode tok/s at batch 1 and its share of the
# roofline, prefill tok/s + GFLOP/s for a 128-token prompt; then stories260K (overhead-bound).
#
#   bash bench/inference_core.sh [--threads N] [--build DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
threads=2
build=build
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) threads="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
shared="${RAPIDE_SHARED_DIR:-../shared}"
if [ ! -x "$build/apps/rapide/rapide" ] || [ ! -x "$build/bench/bench_speed_report" ]; then
  bash scripts/build.sh
  build=build
fi
rapide="$build/apps/rapide/rapide"
models="$build/bench-models"
mkdir -p "$models"
for type in f16 q8_0 q4_0; do
  file="$models/synth100m-$type.gguf"
  if [ ! -f "$file" ]; then
    "$rapide" synth --shape synth100m --type "$type" \
      --vocab-from "$shared/models/llama2-tiny-random/llama-2-tiny-random.gguf" -o "$file"
  fi
done

for type in f16 q8_0 q4_0; do
  echo "== synth100m $type"
  "$build/bench/bench_speed_report" "$models/synth100m-$type.gguf" --threads "$threads" \
    --prompt 128 --decode 64 --repeats 5
done
echo "== stories260K (per-step overhead bound)"
"$build/bench/bench_speed_report" "$shared/models/stories260K/stories260K.gguf" \
  --threads "$threads" --prompt 128 --decode 256 --repeats 5
