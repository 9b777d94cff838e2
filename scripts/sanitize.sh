#!/usr/bin/env bash
# AddressSanitizer + UBSan build (GCC, -DRAPIDE_SANITIZE=ON) of the rapide binary and the
# tests of the modules that take untrusted input or own memory, run with ctest: the labels
# serve, api, batch, kv and formats (e2e included; the 2 x 500-stream load test is left out,
# it measures capacity, not correctness). CI runs it after scripts/test.sh.
#
#   bash scripts/sanitize.sh [extra ctest args...]      (BUILD_DIR, default build-asan)
#
# Every sanitizer report fails the run, also one from a `rapide serve` that an e2e test
# killed afterwards: reports are written to files (ASAN_OPTIONS=log_path) and checked at the
# end. Environment: SANITIZE_LABELS (ctest -L regex) to choose other labels, SANITIZE_TARGETS,
# CMAKE_ARGS, BUILD_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
build="${BUILD_DIR:-$root/build-asan}"
labels="${SANITIZE_LABELS:-^(serve|api|batch|kv|formats)$}"
bash scripts/install-deps.sh >/dev/null

# -O1: the sanitizers' checks dominate; -O3 would only lengthen the build.
# shellcheck disable=SC2086
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Sanitize \
  -DCMAKE_CXX_FLAGS_SANITIZE="-O1 -g1" -DCMAKE_C_FLAGS_SANITIZE="-O1" \
  -DRAPIDE_SANITIZE=ON -DRAPIDE_BUILD_BENCH=OFF ${CMAKE_ARGS:-} >/dev/null
# The test binaries of those labels and the binary the e2e tests run, not the whole suite.
# SANITIZE_TARGETS (space-separated) builds fewer, with SANITIZE_LABELS or ctest args to match.
# shellcheck disable=SC2206
targets=(${SANITIZE_TARGETS:-rapide api_test serve_test batch_journal_test batch_runner_test
         kv_test kv_model_test formats_test})
start=$(date +%s)
cmake --build "$build" --parallel "$(nproc)" --target "${targets[@]}"
echo "sanitize.sh: build took $(($(date +%s) - start)) s"

reports="$build/sanitizer-reports"
rm -rf "$reports"
mkdir -p "$reports"
export ASAN_OPTIONS="log_path=$reports/asan:detect_leaks=1:abort_on_error=0"
export UBSAN_OPTIONS="log_path=$reports/ubsan:print_stacktrace=1:halt_on_error=1"
export LSAN_OPTIONS="suppressions=$root/scripts/lsan.supp"
cd "$build"
set +e
ctest --output-on-failure --parallel "$(nproc)" --timeout 900 -L "$labels" -LE '^load$' "$@"
status=$?
set -e
found=$(find "$reports" -type f | sort)
if [[ -n "$found" ]]; then
  for f in $found; do
    echo "=== sanitizer report $f"
    cat "$f"
  done
  echo "sanitize.sh: $(echo "$found" | wc -l) sanitizer report(s)"
  exit 1
fi
if [[ $status -ne 0 ]]; then
  echo "sanitize.sh: ctest failed (status $status) without a sanitizer report"
  exit "$status"
fi
echo "sanitize.sh: no sanitizer report, every test passed"
