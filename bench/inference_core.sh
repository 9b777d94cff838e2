#!/usr/bin/env bash
# Inference-core speed on this machine, measured against its own limits in one run:
# generates the synth100m model (F16, Q8_0, Q4_0, Q6_K) with `rapide synth` and the Q4_K_M
# and Q5_K_M mixes from its F16 with `rapide quantize`, then for each prints
# the read bandwidth (decode roofline), decode tok/s at batch 1 and its share of the
# roofline (each decode run paired with a probe taken just before it; the share of the probe's
# best pass, the roofline, and of its median pass, kernels/bandwidth.h), prefill tok/s +
# GFLOP/s for a 128-token prompt (F16 also with --act-quant bf16); then stories260K
# (overhead-bound); then the 2026 architectures at synth100m's bytes per token (Q8_0): qwen3
# and gemma3 decode against llama, paired in time, and deepseek2's MLA at a 2k context.
#
#   bash bench/inference_core.sh [--threads N] [--build DIR]
#
# Environment: see bench/common.sh (--build DIR is BUILD_DIR=DIR); ARCH_ROUNDS (7): rounds of
# the architecture comparison; SECTIONS=arch runs that section alone.
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

# decode_run MODEL ARGS...: one bench_speed_report run (batch 1 only); prints
# "TOK_PER_S MIB_PER_TOKEN" (its decode figure and the weights it reads per step).
decode_run() {
  "$build/bench/bench_speed_report" "$1" --threads "$threads" "${@:2}" | awk '
    /^model:/ { sub(/.*\(/, ""); mib = $1 }
    /^decode batch 1:/ { tps = $4 }
    END { if (tps == "") exit 1; print tps, mib }'
}

# median of the numbers on stdin, and their range
median_range() {
  sort -g | awk '{ v[NR] = $1 } END {
    m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    printf "%.3f (range %.3f-%.3f, %d rounds)", m, v[1], v[NR], NR }'
}

# The 2026 architectures at synth100m's weight bytes per token (rapide synth --arch; Q8_0):
# qwen3 adds per-head q/k norms, gemma3 sandwich norms, q/k norms, GELU, a 512-position window
# on 5 of 6 layers and a tied head. Each round decodes 128 tokens at batch 1 (contexts 16-144)
# with the three back to back, their order rotated from round to round, and takes the ratios
# within the round: the machine's speed drifts between minutes. Target: within 10 % of llama.
arch_rounds="${ARCH_ROUNDS:-7}"
archs=(llama qwen3 gemma3)
declare -A arch_file
for arch in "${archs[@]}"; do arch_file[$arch]="$(synth_model q8_0 "$arch")"; done
echo "== synth100m-sized llama, qwen3, gemma3 (Q8_0): batch-1 decode paired in time, $arch_rounds rounds"
echo "+ $build/bench/bench_speed_report MODEL --threads $threads --prompt 16 --decode 128 --repeats 1"
qwen3_ratios=()
gemma3_ratios=()
for round in $(seq 1 "$arch_rounds"); do
  declare -A tps=() mib=()
  for i in 0 1 2; do
    arch="${archs[$(((i + round) % 3))]}"
    run="$(decode_run "${arch_file[$arch]}" --prompt 16 --decode 128 --repeats 1)"
    read -r "tps[$arch]" "mib[$arch]" <<<"$run"
  done
  printf 'round %d: llama %s, qwen3 %s, gemma3 %s tok/s\n' "$round" "${tps[llama]}" "${tps[qwen3]}" \
    "${tps[gemma3]}"
  qwen3_ratios+=("$(awk -v a="${tps[qwen3]}" -v b="${tps[llama]}" 'BEGIN { print a / b }')")
  gemma3_ratios+=("$(awk -v a="${tps[gemma3]}" -v b="${tps[llama]}" 'BEGIN { print a / b }')")
done
echo "weights read per token: llama ${mib[llama]} MiB, qwen3 ${mib[qwen3]} MiB, gemma3 ${mib[gemma3]} MiB"
echo "qwen3/llama decode: $(printf '%s\n' "${qwen3_ratios[@]}" | median_range)"
echo "gemma3/llama decode: $(printf '%s\n' "${gemma3_ratios[@]}" | median_range)"

# deepseek2 at a 2k context: MLA caches one latent row a position in each layer (kv_lora_rank
# 256 + the shared 64-value rope key) where an expanded layout caches every head's K (192) and
# V (128); bench_speed_report prints both sizes from the model's shape. Decode at batch 1 from a
# 2048-token prompt (32 tokens, contexts 2048-2080), alternated with synth100m llama (4 KV heads
# of 64: 1 KiB a position in each layer in f16) in each round, and once at contexts 16-48.
ds="$(synth_model q8_0 deepseek2)"
ds_rounds="${DS_ROUNDS:-3}"
if ! why="$("$rapide" inspect "$ds" 2>&1 >/dev/null)"; then
  echo "== synth100m-sized deepseek2: this build cannot load it, section skipped: $why"
  exit 0
fi
echo "== synth100m-sized deepseek2 (Q8_0, MLA): decode at a 2k context against llama, $ds_rounds rounds"
echo "+ $build/bench/bench_speed_report MODEL --threads $threads --prompt 16 --decode 32 --decode-context 2048 --repeats 1"
"$build/bench/bench_speed_report" "$ds" --threads "$threads" --prompt 16 --decode 32 \
  --decode-context 2048 --repeats 1 | grep -E '^(model|K/V cache)'
"$build/bench/bench_speed_report" "${arch_file[llama]}" --threads "$threads" --prompt 16 \
  --decode 32 --decode-context 2048 --repeats 1 | grep -E '^K/V cache'
ds_ratios=()
for round in $(seq 1 "$ds_rounds"); do
  run_ds="$(decode_run "$ds" --prompt 16 --decode 32 --decode-context 2048 --repeats 1)"
  run_llama="$(decode_run "${arch_file[llama]}" --prompt 16 --decode 32 --decode-context 2048 --repeats 1)"
  printf 'round %d at context 2048: deepseek2 %s, llama %s tok/s\n' "$round" "${run_ds%% *}" \
    "${run_llama%% *}"
  ds_ratios+=("$(awk -v a="${run_ds%% *}" -v b="${run_llama%% *}" 'BEGIN { print a / b }')")
done
echo "deepseek2/llama decode at context 2048: $(printf '%s\n' "${ds_ratios[@]}" | median_range)"
run_short="$(decode_run "$ds" --prompt 16 --decode 32 --repeats 3)"
echo "deepseek2 at contexts 16-48 (median of 3): ${run_short%% *} tok/s"
