#!/usr/bin/env bash
# Issue 21: tensor and pipeline parallelism over Open MPI on this machine, and the calibrated
# on-paper model for N nodes (bench/distributed_model.py, docs/distributed.md).
#
#   1. synth100m Q8_0, one process with 2 threads vs mpirun -np 2 rapide-mpi ... --tp 2 (1
#      thread per rank) vs --pp 2 (1 thread per rank), total cores held equal: prefill and
#      decode tok/s, seconds in MPI calls, idle (bubble) fraction, weights resident per
#      rank. Greedy, the same prompt; a batch of 8 sequences decoding together (rapide bench
#      in-process is not MPI-aware, so `rapide run` measures one sequence and
#      bench/engine_workload is not used).
#   2. MPI latency, bandwidth and all-reduce time on loopback (bench_mpi_link).
#   3. The model's predictions for 1-8 nodes at loopback / 10 / 100 / 400 Gb/s, from those.
#
#   4. Prefill/decode disaggregation under interference (see the section).
#
# Environment: MODEL (default synth_model q8_0), TOKENS (decode tokens, 128), REPEAT (3),
# SECTIONS (all, or disagg for section 4 alone), DISAGG_* (section 4).
set -euo pipefail
source "$(dirname "$0")/common.sh"
# Every run uses rapide-mpi, the binary linked with Open MPI (rapide has no ranks): alone it
# is one process, under mpirun one rank each, so the comparisons are of one binary.
rapide="$build/apps/rapide/rapide-mpi"
bench_build rapide-mpi bench_mpi_link
model="${MODEL:-$(synth_model q8_0)}"
tokens="${TOKENS:-128}"
repeat="${REPEAT:-3}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun=(mpirun -np 2 --allow-run-as-root --oversubscribe)
prompt="$(printf 'The quick brown fox jumps over the lazy dog and keeps running. %.0s' $(seq 1 16))"
log=$(mktemp -t rapide-distributed-XXXXXX)
trap 'rm -f "$log"' EXIT

# figures LABEL CMD...: runs CMD REPEAT times, prints the median prefill/decode tok/s and the
# parallel summary of the median run.
figures() {
  local label=$1
  shift
  local runs=()
  for i in $(seq 1 "$repeat"); do
    "$@" -m "$model" -p "$prompt" -n "$tokens" --temp 0 --ignore-eos --no-print-prompt \
      >/dev/null 2>"$log"
    local line
    line=$(grep 'prompt tokens:' "$log")
    local prefill decode
    prefill=$(echo "$line" | sed -n 's/.*prefill: \([0-9.]*\) tok\/s.*/\1/p')
    decode=$(echo "$line" | sed -n 's/.*decode: \([0-9.]*\) tok\/s.*/\1/p')
    local extra
    extra=$(grep -E '^(tensor parallel|pipeline|tensor x pipeline):|(pipeline|tensor-parallel|tensor x pipeline) rank [0-9]+:' "$log" |
      sed 's/^\[[^]]*\] //' | paste -sd';' || true)
    local weights
    # rank 0's load line, then each follower's "rank R of N: X MiB of weights" line.
    weights=$( (grep -o 'loaded .*MiB of weights' "$log" | grep -o '[0-9.]* MiB' | head -1
      grep -o 'rank [0-9]* of [0-9]*: [0-9.]* MiB' "$log" | grep -o '[0-9.]* MiB' || true) |
      paste -sd/)
    runs+=("$decode|$prefill|$extra|$weights")
  done
  local median
  median=$(printf '%s\n' "${runs[@]}" | sort -t'|' -k1 -g | sed -n "$(((repeat + 1) / 2))p")
  IFS='|' read -r decode prefill extra weights <<<"$median"
  printf '%-28s decode %7s tok/s  prefill %7s tok/s  weights per rank: %s\n' "$label" "$decode" \
    "$prefill" "$weights"
  [[ -n "$extra" ]] && echo "    $extra"
  echo "    + $*"
  last_decode=$decode
  last_prefill=$prefill
}

if [[ "${SECTIONS:-all}" == all ]]; then
echo "== synth100m ($model), $tokens greedy tokens after a $(echo "$prompt" | wc -w)-word prompt, median of $repeat"
figures "1 process, 2 threads" "$rapide" run -t 2
one_decode=$last_decode
one_prefill=$last_prefill
figures "--tp 2 (2 ranks x 1 thread)" "${mpirun[@]}" "$rapide" run -t 1 --tp 2
figures "--pp 2 (2 ranks x 1 thread)" "${mpirun[@]}" "$rapide" run -t 1 --pp 2

echo
echo "== MPI on loopback (bench_mpi_link)"
link=$("${mpirun[@]}" "$build/bench/bench_mpi_link")
echo "$link"
latency=$(echo "$link" | python3 -c 'import json,sys; print(json.load(sys.stdin)["latency_s"])')
bandwidth=$(echo "$link" | python3 -c 'import json,sys; print(json.load(sys.stdin)["bandwidth_bytes_per_s"])')

echo
echo "== On paper (bench/distributed_model.py), calibrated: TPOT $(python3 -c "print(f'{1/$one_decode:.4f}')") s, prefill $one_prefill tok/s"
python3 "$root/bench/distributed_model.py" --tpot-s "$(python3 -c "print(1/$one_decode)")" \
  --prefill-tok-s "$one_prefill" --latency-s "$latency" --bandwidth "$bandwidth" \
  --dim 768 --layers 12 --kv-dim 256 --vocab 32000
fi

# 4. Prefill/decode disaggregation under interference: DISAGG_USERS streaming chat users
#    (short prompts, DISAGG_CHAT_TOKENS tokens each) plus a ~2,000-token prompt every
#    DISAGG_LONG_EVERY seconds, for DISAGG_SECONDS; colocated `serve -t 2` vs mpirun -np 2
#    `serve --disaggregate -t 1` (1 prefill rank + 1 decode rank). Cores held equal: 2.
echo
echo "== Disaggregation under interference ($model): ${DISAGG_USERS:-4} chat users + a long prompt every ${DISAGG_LONG_EVERY:-4} s, ${DISAGG_SECONDS:-40} s"
interference() {
  local label=$1
  shift
  local server_log
  server_log=$(mktemp -t rapide-disagg-XXXXXX)
  start_server "$server_log" -m "$model" --served-model-name m "$@"
  local result
  result=$(python3 "$root/bench/disagg_load.py" --port "$port" --users "${DISAGG_USERS:-4}" \
    --seconds "${DISAGG_SECONDS:-40}" --long-every "${DISAGG_LONG_EVERY:-4}" \
    --long-words "${DISAGG_LONG_WORDS:-1200}" --chat-tokens "${DISAGG_CHAT_TOKENS:-48}")
  kill -TERM "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  rm -f "$server_log"
  echo "$result" | python3 -c "
import json, sys
r = json.load(sys.stdin)
print(f\"{'$label':<34} chat TPOT p50 {r['chat_tpot_p50_ms']:6.1f} ms  p99 {r['chat_tpot_p99_ms']:6.1f} ms  \"
      f\"(gap p99 {r['chat_itl_p99_ms']:.1f} ms, TTFT p50 {r['chat_ttft_p50_ms']:.0f} ms, {r['chat_requests']} requests)\")
print(f\"{'':<34} long prompts ({r['long_prompt_tokens']:.0f} tokens, {r['long_prompts']}): TTFT p50 \"
      f\"{r['long_ttft_p50_ms']:.0f} ms  max {r['long_ttft_max_ms']:.0f} ms;  {r['tokens_per_s']:.1f} tok/s in all;  \"
      f\"KV moved {r['kv_bytes_moved'] / 1048576:.1f} MiB\")"
  echo "    + ${server_launcher[*]:-} rapide-mpi serve -m $model $*"
  last_interference=$result
}
server_launcher=()
interference "colocated, 1 process x 2 threads" -t 2
colocated=$last_interference
server_launcher=("${mpirun[@]}")
interference "disaggregated, 2 ranks x 1 thread" -t 1 --disaggregate
disaggregated=$last_interference
# The chat prompts (under 64 tokens) prefilled on the decode rank, the long ones sent.
interference "  the same, --disagg-min-prompt 64" -t 1 --disaggregate --disagg-min-prompt 64
server_launcher=()
for result in "$disaggregated" "$last_interference"; do
  python3 -c "
import json
a, b = json.loads('''$colocated'''), json.loads('''$result''')
print(f\"chat TPOT p99: {a['chat_tpot_p99_ms'] / max(b['chat_tpot_p99_ms'], 1e-9):.2f}x better disaggregated \"
      f\"(target >= 2x); long-prompt TTFT p50 x{b['long_ttft_p50_ms'] / max(a['long_ttft_p50_ms'], 1e-9):.2f}; \"
      f\"throughput x{b['tokens_per_s'] / max(a['tokens_per_s'], 1e-9):.2f}\")"
done
