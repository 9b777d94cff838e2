#!/usr/bin/env bash
# Inference-core speed on this machine, measured against its own limits in one run:
# generates the synth100m model (F16, Q8_0, Q4_0, Q6_K) with `rapide synth` and the Q4_K_M
# and Q5_K_M mixes from its F16 with `rapide quantize`, then for each prints
# the read bandwidth (decode roofline), decode tok/s at batch 1 and its share of the
# roofline (each decode run paired with a probe taken just before it; the share of the probe's
# best pass, the roofline, and of its median pass, kernels/bandwidth.h), prefill tok/s +
# GFLOP/s for a 128-token prompt (F16 also with --act-quant bf16); then stories260K
# (overhead-bound); then the 2026 architectures at synth100m's bytes per token (Q8_0): qwen3
# and gemma3 decode against llama, alternated in one process, and deepseek2's MLA at a 2k
# context.
#
#   bash bench/inference_core.sh [--threads N] [--build DIR]
#
# Environment: see bench/common.sh (--build DIR is BUILD_DIR=DIR); ARCH_ROUNDS (15) and
# DS_ROUNDS (5): rounds of the architecture comparisons; SECTIONS=arch runs them alone.
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

if [[ "${SECTIONS:-all}" == all ]]; then
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
fi

# The 2026 architectures at synth100m's weight bytes per token (rapide synth --arch; Q8_0):
# qwen3 adds per-head q/k norms, gemma3 sandwich norms, q/k norms, GELU, a 512-position window
# on 5 of 6 layers and a tied head. bench_speed_report --compare decodes 128 tokens at batch 1
# (contexts 16-144) with each in turn in one process, the order rotated from round to round,
# and gives each one's ratio to llama within the rounds (and of the best runs): on this shared
# machine a model's speed moved 2x between runs seconds apart in separate processes. Target:
# within 10 % of llama.
arch_rounds="${ARCH_ROUNDS:-15}"
llama="$(synth_model q8_0)"
qwen3="$(synth_model q8_0 qwen3)"
gemma3="$(synth_model q8_0 gemma3)"
echo "== synth100m-sized llama, qwen3, gemma3 (Q8_0): batch-1 decode alternated, $arch_rounds rounds"
cmd=("$build/bench/bench_speed_report" "$llama" --compare "$qwen3,$gemma3" --threads "$threads"
  --decode 128 --repeats "$arch_rounds")
echo "+ ${cmd[*]}"
"${cmd[@]}"

# deepseek2 at a 2k context: MLA caches a latent row a position in each layer (kv_lora_rank 256
# + the shared 64-value rope key) where an expanded layout caches every head's K (192 values)
# and V (128): the K/V lines give the bytes of the engine's own cache layout and of the
# expanded one. Batch-1 decode of 32 tokens after a 2048-token prompt (contexts 2048-2080),
# alternated with synth100m llama (4 KV heads of 64; the ratios are deepseek2/llama), then the
# same at contexts 16-48. Its
# weights read about as much per token as llama's (105.9 against 101.5 MiB, `rapide synth`'s
# figure; bench_speed_report's "weights read per step" counts all 8 experts, not the 2 a token
# uses).
ds="$(synth_model q8_0 deepseek2)"
ds_rounds="${DS_ROUNDS:-5}"
if ! why="$("$rapide" inspect "$ds" 2>&1 >/dev/null)"; then
  echo "== synth100m-sized deepseek2: this build cannot load it, section skipped: $why"
  exit 0
fi
for context in 2048 16; do
  echo "== synth100m-sized llama and deepseek2 (Q8_0, MLA) at contexts $context-$((context + 32)), $ds_rounds rounds"
  cmd=("$build/bench/bench_speed_report" "$llama" --compare "$ds" --threads "$threads"
    --decode-context "$context" --decode 32 --repeats "$ds_rounds")
  echo "+ ${cmd[*]}"
  "${cmd[@]}"
done
