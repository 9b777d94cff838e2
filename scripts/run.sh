#!/usr/bin/env bash
# Installs dependencies, builds the `rapide` binary alone and starts the main job: `rapide
# serve`, the OpenAI-compatible server on http://127.0.0.1:8080/v1. Without RAPIDE_MODEL it
# serves the built-in demo model (random weights, no files needed); RAPIDE_MODEL=path serves a
# GGUF / llama2.c / HF model. Extra arguments go to `rapide serve` (e.g. --port 9000 --api-key
# KEY).
#
# Only the binary's target is built, not the tests, benchmarks or fuzzers (issue 51: on a
# fresh clone the first answer should cost about half a full build); build.sh prints the step
# count first and ninja's [n/N] lines follow. scripts/test.sh builds everything.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh --target rapide
args=()
if [ -n "${RAPIDE_MODEL:-}" ]; then args+=(--model "$RAPIDE_MODEL"); fi
exec ./build/apps/rapide/rapide serve "${args[@]}" "$@"
