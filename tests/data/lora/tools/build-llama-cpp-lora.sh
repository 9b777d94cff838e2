#!/usr/bin/env bash
# Builds llama.cpp, the peer engine, from a snapshot of its public repository, for side-by-side
# benchmarks on the same GGUF files. Never copy its code into the project.
#
#   bash build-llama-cpp.sh GIT_DIR OUT_DIR
#
# GIT_DIR: a bare git directory of ggerganov/llama.cpp (what the search tool's fetch returns).
# Large blobs may be missing from such a snapshot (some test vocabularies): they are skipped.
# Binaries land in OUT_DIR/build/bin.
set -euo pipefail
src=$1; out=$2
mkdir -p "$out"
git -C "$src" ls-tree -r -z HEAD | while IFS= read -r -d '' line; do
  meta=${line%%$'\t'*}; path=${line#*$'\t'}
  mode=${meta%% *}; rest=${meta#* }; type=${rest%% *}; sha=${rest#* }
  [ "$type" = blob ] || continue
  mkdir -p "$out/$(dirname "$path")"
  if [ "$mode" = 120000 ]; then
    ln -sfn "$(git -C "$src" cat-file -p "$sha")" "$out/$path"; continue
  fi
  git -C "$src" cat-file -p "$sha" > "$out/$path" 2>/dev/null || { rm -f "$out/$path"; continue; }
  if [ "$mode" = 100755 ]; then chmod +x "$out/$path"; fi
done
cmake -S "$out" -B "$out/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF > "$out/configure.log"
targets="llama llama-export-lora llama-simple"
cmake --build "$out/build" -j2 --target $targets > "$out/build.log"
echo "built: $out/build/bin ($targets)"
