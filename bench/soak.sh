#!/usr/bin/env bash
# Bounded soak of `rapide serve` (issue 18): stories260K with a small KV budget and an offload
# directory, under bench/soak.py's mixed load (streams, hang-ups, oversized and malformed
# requests, malformed HTTP) while the offload directory is tampered with. Prints requests
# served, outcomes by kind and the server's RSS after warm-up and at the end; then stops the
# server with SIGTERM. Exit status 1 on a crash, a 5xx, RSS growth or an unclean exit.
#
#   bench/soak.sh [SECONDS]        (default 120)
#
# Environment: BUILD_DIR (bench/common.sh), WORK (scratch, /tmp/rapide-soak), WORKERS (8),
# RAPIDE (the binary to soak, e.g. an ASan build: build-asan/apps/rapide/rapide).
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
seconds="${1:-120}"
work="${WORK:-/tmp/rapide-soak}"
if [[ -z "${RAPIDE:-}" ]]; then bench_build rapide; else rapide="$RAPIDE"; fi
rm -rf "$work"
mkdir -p "$work/offload"

server_pid=""
cleanup() { if [[ -n "$server_pid" ]]; then kill -9 "$server_pid" 2>/dev/null || true; fi; }
trap cleanup EXIT

# 2 MiB of KV (~1,500 tokens of stories260K) and no RAM tier: finished prompts' blocks are
# evicted to the directory all the time and loaded back when a prefix repeats.
start_server "$work/serve.log" -m "$stories" -t 2 --kv-memory 2MiB \
  --kv-offload-dir "$work/offload" --kv-offload-size 64MiB --max-body 65536

status=0
python3 "$root/bench/soak.py" "$port" "$server_pid" "$work/offload" "$seconds" "${WORKERS:-8}" ||
  status=1
echo "offload directory at the end: $(find "$work/offload" -type f | wc -l) files," \
  "$(du -sk "$work/offload" | cut -f1) KiB"
kill -TERM "$server_pid" 2>/dev/null || true
set +e
wait "$server_pid"
exit_code=$?
set -e
server_pid=""
echo "server exit status after SIGTERM: $exit_code"
[[ $exit_code -eq 0 ]] || status=1
echo "server log: $work/serve.log: $(grep -c ' W\] ' "$work/serve.log" || true) warnings" \
  "($(grep -c 'failed its checks' "$work/serve.log" || true) offloaded blocks refused by their" \
  "checks), $(grep -c ' E\] ' "$work/serve.log" || true) errors"
exit $status
