#!/usr/bin/env bash
# The issue-23 benchmark: what an open dashboard costs `rapide serve`. 32 concurrent
# streaming clients (`rapide bench`, synth100m Q8_0) with and without a dashboard polling
# GET /dashboard/state once a second, as the page does. Paired A/B on one server: the pairs
# alternate their order (AB BA AB ...) so a drift of the shared machine falls on both sides;
# the figure is the median of the pairs' B/A throughput ratios (target: within 2 %).
#
# Also printed, since a shared machine's throughput drifts by more than 2 % between minutes:
# the server's CPU over 10 s idle with and without polling, and its CPU per output token in
# each run of the A/B.
#
# The poller is a Python loop on one keep-alive connection, not a browser: the browser's own
# CPU (charts drawn on this same machine) is not the server's cost and would blur the figure
# on a 2-core box.
#
#   bench/dashboard.sh
#
# Environment: BUILD_DIR, MODEL_DIR (bench/common.sh), WORK (scratch, /tmp/rapide-bench-dashboard),
# PAIRS (12), REQUESTS per run (32), POLL_PATH (/dashboard/state; /health gives the noise floor
# of the same A/B: a poll that costs the server nothing). The server runs on its default
# threads (physical cores).
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
work="${WORK:-/tmp/rapide-bench-dashboard}"
pairs="${PAIRS:-12}"
requests="${REQUESTS:-32}"
bench_build rapide
synth="$(synth_model q8_0)"
mkdir -p "$work"

server_pid=""
poller_pid=""
cleanup() {
  for pid in "$poller_pid" "$server_pid"; do
    if [[ -n "$pid" ]]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  done
}
trap cleanup EXIT

start_server "$work/serve.log" -m "$synth"
url="http://127.0.0.1:$port"

# What one open page does: the state every second (and the page's files once).
start_poller() {
  curl -sf "$url/dashboard" "$url/dashboard/app.js" "$url/dashboard/uplot.js" >/dev/null
  # One keep-alive connection, as the browser's fetch() keeps: a curl process per poll
  # would add a fork and exec a second to the machine (not the server's cost) and, on two
  # cores, stall one of the server's compute threads each time.
  python3 - "$port" "${POLL_PATH:-/dashboard/state}" <<'PY' &
import http.client, sys, time
conn = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]))
while True:
    conn.request("GET", sys.argv[2])
    conn.getresponse().read()
    time.sleep(1)
PY
  poller_pid=$!
  # Python's start-up (tens of ms of CPU) is not the page's cost: let it pass before the run.
  sleep 2
}
stop_poller() {
  kill "$poller_pid" 2>/dev/null || true
  wait "$poller_pid" 2>/dev/null || true
  poller_pid=""
}

load=(--workload random --input-len 190-210 --output-len 10-200 --num-requests "$requests"
      --concurrency 32 --seed 7 -m "$synth" -q)
server_ticks() {  # the server's utime + stime, in clock ticks
  awk '{ print $14 + $15 }' "/proc/$server_pid/stat"
}
# measure NAME: one run of the load, its summary in $work/NAME.json and the server's CPU
# ticks during it in $work/NAME.ticks.
measure() {
  echo "+ $rapide bench --url $url ${load[*]} --output $work/$1.json"
  local before
  before=$(server_ticks)
  "$rapide" bench --url "$url" "${load[@]}" --output "$work/$1.json" >/dev/null
  echo $(($(server_ticks) - before)) >"$work/$1.ticks"
}
# What an open dashboard costs the server, measured while it is idle (robust where the
# throughput A/B drowns in a shared machine's noise): the server's utime + stime over 10 s
# of polling once a second (the advisor refreshes as it would) against 10 s without.
python3 - "$server_pid" "$port" <<'PY'
import http.client, os, sys, time
pid, port, seconds = int(sys.argv[1]), int(sys.argv[2]), 10
def cpu():
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
before = cpu()
time.sleep(seconds)
idle = cpu() - before
conn = http.client.HTTPConnection("127.0.0.1", port)
before = cpu()
for _ in range(seconds):
    conn.request("GET", "/dashboard/state")
    conn.getresponse().read()
    time.sleep(1)
polled = cpu() - before
print(f"server CPU over {seconds} s: {idle * 1e3:.0f} ms idle, {polled * 1e3:.0f} ms with a "
      f"dashboard polling: {100 * (polled - idle) / seconds:.3f} % of one core "
      f"(the kernel counts in {1e3 / os.sysconf('SC_CLK_TCK'):.0f} ms ticks)")
PY
(( pairs > 0 )) || exit 0
# A warm-up run: page cache, allocator, the first advisor refresh.
measure warmup
for i in $(seq 1 "$pairs"); do
  if (( i % 2 )); then
    measure "off-$i"
    start_poller; measure "on-$i"; stop_poller
  else
    start_poller; measure "on-$i"; stop_poller
    measure "off-$i"
  fi
done

python3 - "$work" "$pairs" <<'PY'
import json, os, statistics, sys
work, pairs = sys.argv[1], int(sys.argv[2])
tick = 1 / os.sysconf("SC_CLK_TCK")
def summary(name):
    with open(f"{work}/{name}.json") as f:
        doc = json.load(f)
    runs = doc["runs"] if "runs" in doc else [doc]
    return runs[0]["summary"]
def tok(name):
    return summary(name)["output_throughput"]
def cpu_per_token(name):  # server CPU ms per output token: less sensitive to a busy machine
    with open(f"{work}/{name}.ticks") as f:
        return int(f.read()) * tick * 1e3 / summary(name)["output_tokens"]
ratios, cpu_ratios = [], []
print()
print("pair  no dashboard  dashboard open  ratio   server CPU ms/token off  on")
for i in range(1, pairs + 1):
    off, on = tok(f"off-{i}"), tok(f"on-{i}")
    cpu_off, cpu_on = cpu_per_token(f"off-{i}"), cpu_per_token(f"on-{i}")
    ratios.append(on / off)
    cpu_ratios.append(cpu_on / cpu_off)
    print(f"{i:>4}  {off:>9.1f} t/s  {on:>11.1f} t/s  {on / off:.3f}  "
          f"{cpu_off:>21.2f}  {cpu_on:.2f}")
median = statistics.median(ratios)
print(f"32 streams, output tok/s with a dashboard polling / without: median {median:.3f} "
      f"({100 * (median - 1):+.1f} %; target within 2 %); range {min(ratios):.3f}-{max(ratios):.3f}")
cpu_median = statistics.median(cpu_ratios)
print(f"server CPU per output token, with / without: median {cpu_median:.3f} "
      f"({100 * (cpu_median - 1):+.1f} %)")
PY
