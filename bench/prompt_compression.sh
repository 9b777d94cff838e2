#!/usr/bin/env bash
# The issue-24 benchmark: prompt compression's TTFT and answer fidelity at ratios
# 1.0 / 0.7 / 0.5 / 0.3, in-process (no HTTP), on a RAG-like workload built from the shared
# story text (see bench/prompt_compression.cpp): TinyStories-656K serves; stories260K
# (another vocabulary, a quarter of the weights) and TinyStories-656K itself score.
#
#   bench/prompt_compression.sh [--repeats N] [--threads N] [extra bench options...]
#
# Prints, per scorer, a cold table (the scorer's passage cache emptied before each run) and
# a warm one (every passage seen before), with the exact command line.
#
# Then the same workload served by synth100m Q8_0 (100M parameters, Llama-2 vocabulary:
# the served model much larger than the scorer, as in production) with stories260K scoring:
# its TTFT columns show what compression buys when prefill is expensive; its fidelity columns
# mean nothing (random weights). LARGE=0 skips it.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
bench_build bench_prompt_compression
served="$shared/models/tinystories-656k/TinyStories-656K-F16.gguf"
texts=(--text "$shared/reference/text/stories-eval.txt")
for f in "$shared"/reference/greedy/*.txt; do texts+=(--text "$f"); done

cmd=("$build/bench/bench_prompt_compression" "$served" --scorer "$stories" --scorer "$served"
     "${texts[@]}" --ratios 1.0,0.7,0.5,0.3 "$@")
echo "+ ${cmd[*]}"
"${cmd[@]}"

if [[ "${LARGE:-1}" != 0 ]]; then
  large="$(synth_model q8_0)"
  cmd=("$build/bench/bench_prompt_compression" "$large" --scorer "$stories"
       "${texts[@]}" --ratios 1.0,0.7,0.5,0.3 "$@")
  echo
  echo "+ ${cmd[*]}"
  "${cmd[@]}"
fi
