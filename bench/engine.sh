#!/usr/bin/env bash
# The issue-4 engine benchmark on synth100m Q8_0 and stories260K (in-process, no HTTP).
#
#   bench/engine.sh [--quick] [extra bench_engine_workload options...]
#
# Builds bench_engine_workload, generates the synth100m Q8_0 model with `rapide synth` when it
# is missing (build dir and model dir: see bench/common.sh), then prints each model's tables with the exact
# command line that produced them. --quick keeps the whole run CI-sized.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
bench_build bench_engine_workload
synth="$(synth_model q8_0)"

for model in "$synth" "$stories"; do
  cmd=("$build/bench/bench_engine_workload" "$model" "$@")
  echo
  echo "+ ${cmd[*]}"
  "${cmd[@]}"
done
