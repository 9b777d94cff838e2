#!/usr/bin/env bash
# The issue-4 engine benchmark on synth100m Q8_0 and stories260K (in-process, no HTTP).
#
#   bench/engine.sh [--quick] [extra bench_engine_workload options...]
#
# Builds bench_engine_workload, prints the batched decode vs prefill figures of
# bench_speed_report, generates the synth100m Q8_0 model with `rapide synth` when it
# is missing (build dir and model dir: see bench/common.sh), then prints each model's tables with the exact
# command line that produced them. --quick keeps the whole run CI-sized.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
bench_build bench_engine_workload bench_speed_report
synth="$(synth_model q8_0)"

# Batched decode against prefill (issue 25): 32 sequences at contexts 128-192 and a 128-token
# prefill in one process, wall and per CPU-second (the figure other load disturbs less); with
# --kv-in-cache the same steps also with the K/V served from cache, paired run by run: what
# attention's reads from DRAM cost the step. Each decode run follows prefill runs of its own;
# the ratio to quote is the median of those pairs ("paired with"), also with attention's flops
# counted (a row at contexts 128-192 does 2.5 times the attention of a prefill token). Then
# the same with the q8_0 KV cache (the `--kv-type q8_0` lever: half the K/V bytes, integer
# attention; docs/kv-cache.md has its accuracy).
for kv in f16 q8_0; do
  cmd=("$build/bench/bench_speed_report" "$synth" --prompt 128 --batch-sizes 32 --batch-prompt 128
       --decode 64 --repeats 5 --kv-in-cache --kv-type "$kv")
  echo "+ ${cmd[*]}"
  "${cmd[@]}" | grep -E "machine|prefill|decode batch"
done

for model in "$synth" "$stories"; do
  cmd=("$build/bench/bench_engine_workload" "$model" "$@")
  echo
  echo "+ ${cmd[*]}"
  "${cmd[@]}"
done
