#!/usr/bin/env bash
# Installs dependencies, builds, and starts the main job on the default model.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
model="${RAPIDE_MODEL:-../shared/models/stories260K/stories260K.gguf}"
exec ./build/apps/rapide/rapide run -m "$model" -p "Once upon a time" -n 128 "$@"
