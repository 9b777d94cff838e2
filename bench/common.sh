# Shared by the bench/*.sh scripts (sourced, not run): where things are, building what a
# script needs, and the synth100m models it measures (generated once, never committed).
#
# Environment: BUILD_DIR (default build, what scripts/build.sh makes), MODEL_DIR (default
# $BUILD_DIR/bench-models), SHARED_DIR (default ../shared), JOBS (ninja jobs, 2).

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"
models="${MODEL_DIR:-$build/bench-models}"
shared="${SHARED_DIR:-$(cd "$root/.." && pwd)/shared}"
rapide="$build/apps/rapide/rapide"
stories="$shared/models/stories260K/stories260K.gguf"

# bench_build TARGET...: configures $build when needed (Release by default) and builds the targets.
bench_build() {
  if [[ ! -f "$build/build.ninja" ]]; then cmake -S "$root" -B "$build" -G Ninja >/dev/null; fi
  ninja -C "$build" -j "${JOBS:-2}" "$@" >/dev/null
}

# synth_model TYPE [ARCH]: prints the path of synth100m in TYPE (f16, q8_0, q4_0), generating it
# with `rapide synth` (the Llama-2 vocabulary of the shared random model) the first time. ARCH
# (qwen3, gemma3, deepseek2; default llama) names that architecture's synth100m-sized model
# (`rapide synth --help`).
synth_model() {
  local arch="${2:-llama}"
  local file="$models/synth100m-$1.gguf"
  [[ "$arch" == llama ]] || file="$models/synth100m-$arch-$1.gguf"
  if [[ ! -f "$file" ]]; then
    bench_build rapide
    mkdir -p "$models"
    local vocab="$shared/models/llama2-tiny-random/llama-2-tiny-random.gguf"
    local args=(synth --shape synth100m --type "$1" --vocab-from "$vocab" -o "$file")
    [[ "$arch" == llama ]] || args=(synth --arch "$arch" "${args[@]:1}")
    echo "+ $rapide ${args[*]}" >&2
    "$rapide" "${args[@]}" >&2
  fi
  echo "$file"
}

# start_server LOG ARGS...: starts `$rapide serve --port 0 ARGS...` in the background, its
# output in LOG, and waits until /health answers; sets server_pid and port (the caller stops
# the server). Exits 1, printing the log, if it never does. With the array server_launcher
# set (e.g. mpirun -np 2 ...), the server runs under it and server_pid is the launcher's.
start_server() {
  local log="$1"
  shift
  ${server_launcher[@]+"${server_launcher[@]}"} "$rapide" serve --port 0 "$@" >"$log" 2>&1 &
  server_pid=$!
  port=""
  for _ in $(seq 1 300); do
    port="$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$log" | head -1 | sed 's/.*://')" || true
    [[ -n "$port" ]] && curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  echo "the server did not start:" >&2
  cat "$log" >&2
  exit 1
}
