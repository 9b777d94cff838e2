#!/usr/bin/env bash
# The issue-5 benchmark: prefix caching and the KV offload tier on synth100m Q8_0
# (in-process, no HTTP).
#
#   bench/prefix_cache.sh [--quick] [extra bench_prefix_cache options...]
#
# Builds bench_prefix_cache, generates the synth100m Q8_0 model with `rapide synth` when it is
# missing (build dir and model dir: see bench/common.sh), then prints the three tables (ttft, chat, cycle)
# with the exact command line that produced them. The 2,760-token ttft prompt is beyond
# synth100m's trained context (2048): the engine allows it with a warning (rope
# extrapolates; the timing is what matters here).
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
bench_build bench_prefix_cache
synth="$(synth_model q8_0)"

cmd=("$build/bench/bench_prefix_cache" "$synth" "$@")
echo "+ ${cmd[*]}"
"${cmd[@]}"
