#!/usr/bin/env bash
# Runs every libFuzzer target (fuzz/) for long: SECONDS each (default 300), one after the
# other, each continuing from the inputs earlier runs found (BUILD_DIR/fuzz-work/<target>) and
# its committed seeds. Prints, per target: executions, execs/s, coverage (edges `cov`,
# features `ft`), corpus size, peak RSS and findings (crash-/timeout-/oom- files, with the
# command that reproduces each). Exit status 1 if any target found something.
#
#   bench/fuzz.sh [SECONDS] [TARGET...]
#
# Environment: FUZZ_BUILD_DIR (default build-fuzz, made by fuzz/build.sh). One process per
# target at a time: execs/s are those of one core.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
seconds="${1:-300}"
shift || true
build="${FUZZ_BUILD_DIR:-$root/build-fuzz}"
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
  targets=(gguf_fuzz safetensors_fuzz llama2c_fuzz hf_tokenizer_fuzz chat_template_fuzz
           openai_request_fuzz batch_line_fuzz http_request_fuzz sse_fuzz)
fi
bash "$root/fuzz/build.sh" "$build" >/dev/null

printf '%-20s %10s %9s %7s %7s %7s %8s  %s\n' target execs exec/s cov ft corpus rss_mb findings
failed=0
for t in "${targets[@]}"; do
  log="$build/fuzz-work/$t.log"
  mkdir -p "$build/fuzz-work"
  status=0
  bash "$root/fuzz/run.sh" "$build" "$t" "$seconds" >"$log" 2>&1 || status=$?
  # libFuzzer's last status line: "#<runs><TAB>DONE   cov: N ft: N corp: N/<size> ..."
  done_line=$(grep -E '^#[0-9]+[[:space:]]+(DONE|pulse|NEW|REDUCE|INITED)' "$log" | tail -1 || true)
  field() { echo "$done_line" | sed -n "s/.* $1: *\([0-9]*\).*/\1/p"; }
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log")
  corpus=$(echo "$done_line" | sed -n 's/.* corp: *\([0-9]*\).*/\1/p')
  findings=$(grep -o 'run.sh: .* finding: .*' "$log" | sed 's/run.sh: [^ ]* finding: //' || true)
  if [[ $status -ne 0 ]]; then
    failed=1
    findings="${findings:-exit $status, see $log}"
  fi
  printf '%-20s %10s %9s %7s %7s %7s %8s  %s\n' "$t" "${execs:-?}" "${rate:-?}" \
    "$(field cov)" "$(field ft)" "${corpus:-?}" "${rss:-?}" "${findings:-none}"
done
echo "logs: $build/fuzz-work/<target>.log"
exit $failed
