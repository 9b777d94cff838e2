#!/usr/bin/env bash
# Runs one libFuzzer target for a bounded time, starting from its committed seed corpus.
#
#   bash fuzz/run.sh BUILD_DIR TARGET SECONDS [WORK_DIR] [libFuzzer options...]
#
# The seeds (fuzz/corpus/TARGET, plus tests/data/formats for GGUF and ../shared/chat-templates
# for chat templates) are only read: inputs the
# fuzzer finds go to WORK_DIR/corpus (default BUILD_DIR/fuzz-work/TARGET, kept between runs
# so a long run continues where the last one stopped) and a crashing input to WORK_DIR as
# crash-*, timeout-* or oom-*. Exit status 0: the time ran out without a finding; otherwise
# libFuzzer's, after printing how to reproduce.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$1"
target="$2"
seconds="$3"
work="${4:-$build/fuzz-work/$target}"
shift 4 2>/dev/null || shift $#
binary="$build/fuzz/$target"
[[ -x "$binary" ]] || { echo "run.sh: $binary is not built (bash fuzz/build.sh)" >&2; exit 2; }

seeds=("$root/fuzz/corpus/$target")
[[ "$target" == gguf_fuzz ]] && seeds+=("$root/tests/data/formats")
# The real chat templates of ../shared, read in place (never copied here), when present.
shared="${RAPIDE_SHARED_DIR:-$root/../shared}"
if [[ "$target" == chat_template_fuzz && -d "$shared/chat-templates" ]]; then
  seeds+=("$shared/chat-templates")
fi
mkdir -p "$work/corpus"
# -timeout: one input taking 10 s is a finding (a hang); -rss_limit_mb: so is 2 GB of memory.
set +e
"$binary" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
  -print_final_stats=1 -artifact_prefix="$work/" "$@" "$work/corpus" "${seeds[@]}" 2>&1
status=$?
set -e
if [[ $status -ne 0 ]]; then
  for f in "$work"/crash-* "$work"/timeout-* "$work"/oom-* "$work"/leak-*; do
    [[ -e "$f" ]] || continue
    echo "run.sh: $target finding: $f (reproduce: $binary $f)"
    # The input itself, so a finding on a machine whose files are gone (CI) can be rebuilt:
    # base64 -d <<< '...' > input.
    echo "run.sh: $(wc -c < "$f") bytes, base64 (first 3 KiB): $(head -c 3072 "$f" | base64 -w0)"
  done
fi
exit $status
