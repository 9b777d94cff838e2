#!/usr/bin/env bash
# The issue-6 benchmark: `rapide serve` on synth100m Q8_0 driven by `rapide bench`.
#   1. 32 concurrent streaming clients, ~200-token prompts, outputs 10-400 tokens: through
#      HTTP, then the same workload on the in-process engine (HTTP / in-process ratio);
#   2. one request alone (200-token prompt, 128 output tokens): TTFT and TPOT.
# llama.cpp's figures on this machine (../shared/design/PERF.md): 48 output tok/s with
# -np 32; one request TTFT 417 ms, TPOT 11.0 ms.
#
#   bench/serve.sh
#
# Environment: BUILD_DIR, MODEL_DIR (bench/common.sh), WORK (scratch, /tmp/rapide-bench-serve), REQUESTS (96),
# THREADS (0 = physical cores).
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
work="${WORK:-/tmp/rapide-bench-serve}"
requests="${REQUESTS:-96}"
threads="${THREADS:-0}"
bench_build rapide
synth="$(synth_model q8_0)"
mkdir -p "$work"
thread_flags=()
if [[ "$threads" != 0 ]]; then thread_flags=(-t "$threads"); fi

server_pid=""
cleanup() { if [[ -n "$server_pid" ]]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi; }
trap cleanup EXIT

start_server "$work/serve.log" -m "$synth" "${thread_flags[@]}"
url="http://127.0.0.1:$port"

load=(--workload random --input-len 190-210 --output-len 10-400 --num-requests "$requests"
      --concurrency 32 --seed 7 -m "$synth" -q)
run() {
  echo "+ $*"
  "$@"
}
echo "== 1. 32 concurrent streams (synth100m Q8_0)"
run "$rapide" bench --url "$url" "${load[@]}" --output "$work/http.json"
run "$rapide" bench --engine "${thread_flags[@]}" "${load[@]}" --output "$work/engine.json"
echo "== 2. one request alone (200-token prompt, 128 output tokens)"
run "$rapide" bench --url "$url" --workload random --input-len 200 --output-len 128 \
  --num-requests 8 --concurrency 1 --seed 8 -m "$synth" -q --output "$work/single.json"

python3 - "$work" <<'EOF'
import json, sys
work = sys.argv[1]
def summary(name):
    with open(f"{work}/{name}.json") as f:
        doc = json.load(f)
    runs = doc["runs"] if "runs" in doc else [doc]
    return runs[0]["summary"]
http, engine, single = summary("http"), summary("engine"), summary("single")
def tok(s): return s["output_throughput"]
print()
print(f"32 streams: HTTP {tok(http):.1f} output tok/s, in-process {tok(engine):.1f}: "
      f"HTTP = {100 * tok(http) / tok(engine):.1f} % of in-process (target >= 90 %)")
print(f"            vs llama.cpp's 48 tok/s: {tok(http) / 48:.1f}x (target >= 10x); "
      f"TTFT p50 {http['ttft_s']['p50'] * 1e3:.0f} ms, TPOT p50 {http['tpot_s']['p50'] * 1e3:.1f} ms")
print(f"one request: TTFT p50 {single['ttft_s']['p50'] * 1e3:.0f} ms (target <= 250), "
      f"TPOT p50 {single['tpot_s']['p50'] * 1e3:.2f} ms (target <= 7)")
EOF
