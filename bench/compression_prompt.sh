#!/usr/bin/env bash
# The issue-24 benchmark: prompt compression's TTFT and answer fidelity at ratios
# 1.0 / 0.7 / 0.5 / 0.3, in-process (no HTTP), on a RAG-like workload built from the shared
# story text (see bench/compression_prompt.cpp): TinyStories-656K serves; stories260K
# (another vocabulary, a quarter of the weights) and TinyStories-656K itself score.
#
#   bench/compression_prompt.sh [--repeats N] [--threads N] [extra bench options...]
#
# Prints, per scorer, a cold table (the scorer's passage cache emptied before each run) and
# a warm one (every passage seen before), with the exact command line.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
bench_build bench_compression_prompt
served="$shared/models/tinystories-656k/TinyStories-656K-F16.gguf"
texts=(--text "$shared/reference/text/stories-eval.txt")
for f in "$shared"/reference/greedy/*.txt; do texts+=(--text "$f"); done

cmd=("$build/bench/bench_compression_prompt" "$served" --scorer "$stories" --scorer "$served"
     "${texts[@]}" --ratios 1.0,0.7,0.5,0.3 "$@")
echo "+ ${cmd[*]}"
"${cmd[@]}"
