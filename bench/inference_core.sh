#!/usr/bin/env bash
# Inference-core speed on this machine, measured against its own limits in one run:
# generates the synth100m model (F16, Q8_0, Q4_0) with `rapide synth`, then for each prints
# the read bandwidth (decode roofline), decode tok/s at batch 1 and its share of the
# roofline (each decode run paired with a probe taken just before it), prefill tok/s +
# GFLOP/s for a 128-token prompt; then stories260K (overhead-bound).
#
#   bash bench/inference_core.sh [--threads N] [--build DIR]
#
# Environment: see bench/common.sh (--build DIR is BUILD_DIR=DIR).
set -euo pipefail
threads=2
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) threads="$2"; shift 2 ;;
    --build) export BUILD_DIR="$2"; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
bench_build rapide bench_speed_report

for type in f16 q8_0 q4_0; do
  model="$(synth_model "$type")"
  echo "== synth100m $type"
  "$build/bench/bench_speed_report" "$model" --threads "$threads" --prompt 128 --decode 64 --repeats 5
done
echo "== stories260K (per-step overhead bound)"
"$build/bench/bench_speed_report" "$stories" --threads "$threads" --prompt 128 --decode 256 --repeats 5
