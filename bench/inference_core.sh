#!/usr/bin/env bash
# Inference-core speed on this machine, measured against its own limits in one run:
# generates the synth100m model (F16, Q8_0, Q4_0, Q6_K) with `rapide synth` and the Q4_K_M
# and Q5_K_M mixes from its F16 with `rapide quantize`, then for each prints
# the read bandwidth (decode roofline), decode tok/s at batch 1 and its share of the
# roofline (each decode run paired with a probe taken just before it; the share of the probe's
# best pass, the roofline, and of its median pass, kernels/bandwidth.h), prefill tok/s +
# GFLOP/s for a 128-token prompt (F16 also with --act-quant bf16); then stories260K
# (overhead-bound).
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

# quantized_model PRESET: synth100m F16 rewritten by `rapide quantize` (first time only).
quantized_model() {
  local file="$models/synth100m-$1.gguf"
  if [[ ! -f "$file" ]]; then
    local f16
    f16="$(synth_model f16)"
    echo "+ $rapide quantize $f16 $file --type $1" >&2
    "$rapide" quantize "$f16" "$file" --type "$1" >&2
  fi
  echo "$file"
}

for type in f16 q8_0 q4_0 q6_K Q4_K_M Q5_K_M; do
  case "$type" in
    Q*_K_[SM]) model="$(quantized_model "$type")" ;;
    *) model="$(synth_model "$type")" ;;
  esac
  echo "== synth100m $type"
  "$build/bench/bench_speed_report" "$model" --threads "$threads" --prompt 128 --decode 64 --repeats 5
  if [[ "$type" == f16 ]]; then
    echo "== synth100m f16 --act-quant bf16 (weights run as BF16: vdpbf16ps)"
    "$build/bench/bench_speed_report" "$model" --threads "$threads" --prompt 128 --decode 64 \
      --repeats 5 --act-quant bf16
  fi
done
echo "== stories260K (per-step overhead bound)"
"$build/bench/bench_speed_report" "$stories" --threads "$threads" --prompt 128 --decode 256 --repeats 5
