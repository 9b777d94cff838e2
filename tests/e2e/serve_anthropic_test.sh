#!/usr/bin/env bash
# The official `@anthropic-ai/sdk` npm client against a real `rapide serve` on stories260K
# (POST /v1/messages, docs/anthropic-api.md).
# usage: serve_anthropic_test.sh RAPIDE_BINARY SHARED_DIR
# A missing prerequisite (the shared model, node or npm) follows tests/require_shared.py: it
# fails under CI and skips (exit 77) elsewhere. Installs the pinned client with npm ci.
set -euo pipefail
binary=$1
shared=${RAPIDE_SHARED_DIR:-$2}
here=$(cd "$(dirname "$0")" && pwd)
rule="$here/../require_shared.py"
python3 "$rule" e2e_serve_anthropic_client "$shared" models/stories260K/stories260K.gguf || exit $?
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  python3 "$rule" --missing e2e_serve_anthropic_client "node/npm not installed" || exit $?
fi
client="$here/anthropic_client"
want=$(node -p "require('$client/package.json').dependencies['@anthropic-ai/sdk']")
have=$(node -p "try { require('$client/node_modules/@anthropic-ai/sdk/package.json').version } catch { '' }")
if [ "$want" != "$have" ]; then
  (cd "$client" && npm ci --no-audit --no-fund --loglevel=error)
fi

log=$(mktemp -t rapide-anthropic-XXXXXX.log)
key="sk-ant-e2e"
"$binary" serve -m "$shared/models/stories260K/stories260K.gguf" --host 127.0.0.1 --port 0 \
  --api-key "$key" >"$log" 2>&1 &
pid=$!
cleanup() {
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  rm -f "$log"
}
trap cleanup EXIT

port=""
for _ in $(seq 600); do
  port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log" | head -1)
  if [ -n "$port" ] && curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1; then break; fi
  if ! kill -0 "$pid" 2>/dev/null; then cat "$log"; exit 1; fi
  sleep 0.1
done
if [ -z "$port" ]; then cat "$log"; exit 1; fi

RAPIDE_ROOT_URL="http://127.0.0.1:$port" RAPIDE_API_KEY="$key" node "$client/anthropic_test.mjs" ||
  { tail -50 "$log"; exit 1; }
