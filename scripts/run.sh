#!/usr/bin/env bash
# Installs dependencies, builds, and starts the main job: `rapide serve`, the OpenAI-compatible
# server on http://127.0.0.1:8080/v1. Without RAPIDE_MODEL it serves the built-in demo model
# (random weights, no files needed); RAPIDE_MODEL=path serves a GGUF / llama2.c / HF model.
# Extra arguments go to `rapide serve` (e.g. --port 9000 --api-key KEY).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
args=()
if [ -n "${RAPIDE_MODEL:-}" ]; then args+=(--model "$RAPIDE_MODEL"); fi
exec ./build/apps/rapide/rapide serve "${args[@]}" "$@"
