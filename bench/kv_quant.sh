#!/usr/bin/env bash
# The issue-16 quantized KV cache benchmark: --kv-type f16 vs q8_0 vs q4_0.
#
#   bench/kv_quant.sh [--quick]
#
# 1. bench_kv_quant on synth100m Q8_0: sequences of 2k context that one --kv-memory holds,
#    and decode tok/s with 2k cached positions (paired rounds).
# 2. attention_bench: the attention kernels alone per KV type (Prefill/2700 is the prefix-cache
#    hit's attention: 60 new tokens over 2,700 cached positions).
# 3. bench_prefix_cache --scenario ttft: the 2,700-token system prompt, miss vs hit TTFT, per
#    KV type.
# 4. `rapide perplexity` of TinyStories-656K F16 on the shared eval text, per KV type, and
#    its increase over f16.
# Every command is printed before its output. MODEL_DIR can point at existing synth models
# (e.g. MODEL_DIR=/work/main/build/bench-models), see bench/common.sh.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
quick=()
if [[ "${1:-}" == "--quick" ]]; then quick=(--quick); fi
bench_build bench_kv_quant attention_bench bench_prefix_cache rapide
synth="$(synth_model q8_0)"

run() {
  echo
  echo "+ $*"
  "$@"
}

run "$build/bench/bench_kv_quant" "$synth" "${quick[@]}"

min_time=1
if [[ ${#quick[@]} -gt 0 ]]; then min_time=0.1; fi
run env RAPIDE_BENCH_THREADS=1 "$build/bench/attention_bench" --benchmark_filter='Prefill/2700' \
  --benchmark_min_time="$min_time"

for type in f16 q8_0 q4_0; do
  run "$build/bench/bench_prefix_cache" "$synth" --scenario ttft --kv-type "$type" "${quick[@]}"
done

tiny="$shared/models/tinystories-656k/TinyStories-656K-F16.gguf"
text="$shared/reference/text/stories-eval.txt"
echo
echo "## perplexity of TinyStories-656K F16 on stories-eval.txt (--ctx 256) per KV type"
echo
echo "| kv type | PPL | increase over f16 |"
echo "|---|---:|---:|"
base=""
for type in f16 q8_0 q4_0; do
  echo "+ $rapide perplexity -m $tiny -f $text --ctx 256 --kv-type $type" >&2
  ppl="$("$rapide" perplexity -m "$tiny" -f "$text" --ctx 256 --kv-type "$type" 2>/dev/null |
    sed -n 's/^PPL = \([0-9.]*\).*/\1/p')"
  if [[ -z "$base" ]]; then base="$ppl"; fi
  echo "| $type | $ppl | $(awk -v p="$ppl" -v b="$base" 'BEGIN { printf "%+.3f %%", 100 * (p - b) / b }') |"
done
