#!/usr/bin/env bash
# Weight quantization methods side by side on the real models (TinyStories-656K F16 and
# stories260K): for each weight type x method (rtn, awq, gptq) x --act-quant (int8, off) x
# KV type, the file size, the perplexity and its increase over the F16/F32 original, and
# decode / prefill tok/s. One table per model, then the share of round-to-nearest's
# perplexity increase that the best calibrated method removes at 4 bits.
#
#   bash bench/quantization.sh [--threads N] [--build DIR] [--ctx 128]
#
# Texts (two different ones, so calibration never sees the scored text):
#   calibration: the 12 greedy continuations in ../shared/reference/greedy/*.txt
#                (model-generated TinyStories-style text, ~3.8k tokens), concatenated
#   perplexity:  ../shared/reference/text/stories-eval.txt (hand-written, ~800 tokens),
#                llama.cpp's method with --ctx windows (128: the text holds 6 of them)
# KV types: f16, plus q8_0 / q4_0 when `rapide perplexity --help` lists them.
# Speed depends on the type and --act-quant, not on the method (same layout, same kernels):
# it is measured once per (type, act-quant) with bench_speed_report (prompt 128, 64 decode
# steps, median of 3) and repeated on each method's row.
#
# Environment: see bench/common.sh (--build DIR is BUILD_DIR=DIR).
set -euo pipefail
threads=2
ctx=128
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) threads="$2"; shift 2 ;;
    --build) export BUILD_DIR="$2"; shift 2 ;;
    --ctx) ctx="$2"; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
bench_build rapide bench_speed_report

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
calibration="$work/calibration.txt"
cat "$shared"/reference/greedy/*.txt > "$calibration"
eval_text="$shared/reference/text/stories-eval.txt"

kv_types=(f16)
if "$rapide" perplexity --help 2>&1 | grep -q -- '--kv-type'; then
  for kv in q8_0 q4_0; do
    if "$rapide" perplexity --help 2>&1 | grep -A2 -- '--kv-type' | grep -q "$kv"; then
      kv_types+=("$kv")
    fi
  done
fi

# ppl MODEL ACT KV: the perplexity figure.
ppl() {
  local kv_flag=()
  if [ "$3" != f16 ] || [ ${#kv_types[@]} -gt 1 ]; then kv_flag=(--kv-type "$3"); fi
  "$rapide" perplexity -m "$1" -f "$eval_text" --ctx "$ctx" -t "$threads" --act-quant "$2" \
    "${kv_flag[@]}" 2>&1 | sed -n 's/^PPL = \([0-9.]*\).*/\1/p'
}

declare -A speed_cache
# speed MODEL KEY ACT: sets d and f (decode, prefill tok/s), measured once per KEY.
speed() {
  if [ -z "${speed_cache[$2]:-}" ]; then
    local report
    report="$("$build/bench/bench_speed_report" "$1" --threads "$threads" --prompt 128 \
      --decode 64 --repeats 3 --act-quant "$3")"
    speed_cache[$2]="$(sed -n 's/^decode batch 1: \([0-9.]*\) tok\/s.*/\1/p' <<<"$report") \
$(sed -n 's/^prefill [0-9]* tokens: \([0-9.]*\) tok\/s.*/\1/p' <<<"$report")"
  fi
  read -r d f <<<"${speed_cache[$2]}"
}

row() {  # type method act kv size_kib ppl base decode prefill
  awk -v t="$1" -v m="$2" -v a="$3" -v k="$4" -v s="$5" -v p="$6" -v b="$7" -v d="$8" -v f="$9" \
    'BEGIN { printf "| %-7s | %-6s | %-4s | %-4s | %8.1f | %8.4f | %+8.4f (%+6.2f %%) | %8.0f | %8.0f |\n",
             t, m, a, k, s, p, p - b, 100 * (p - b) / b, d, f }'
}

summary=()
for model in "$shared/models/tinystories-656k/TinyStories-656K-F16.gguf" "$stories"; do
  name="$(basename "$model" .gguf)"
  declare -A base=()
  for kv in "${kv_types[@]}"; do base[$kv]="$(ppl "$model" int8 "$kv")"; done
  echo
  echo "== $name: perplexity of stories-eval.txt (ctx $ctx), calibration on reference/greedy/*.txt"
  echo "| type    | method | act  | kv   | size KiB | PPL      | increase over original | decode/s | prefill/s |"
  echo "|---------|--------|------|------|----------|----------|------------------------|----------|-----------|"
  size=$(( $(stat -c %s "$model") / 1024 ))
  speed "$model" "$name-orig-int8" int8
  for kv in "${kv_types[@]}"; do
    row original - - "$kv" "$size" "${base[$kv]}" "${base[$kv]}" "$d" "$f"
  done
  for type in q8_0 q4_0 q4_1 iq4_nl; do
    declare -A inc=()
    for method in rtn awq gptq; do
      out="$work/$name-$type-$method.gguf"
      "$rapide" quantize "$model" "$out" --type "$type" --method "$method" \
        --calibration "$calibration" -t "$threads" >/dev/null 2>&1
      size="$(awk -v b="$(stat -c %s "$out")" 'BEGIN { printf "%.1f", b / 1024 }')"
      for act in int8 off; do
        speed "$out" "$name-$type-$act" "$act"
        for kv in "${kv_types[@]}"; do
          p="$(ppl "$out" "$act" "$kv")"
          row "$type" "$method" "$act" "$kv" "$size" "$p" "${base[$kv]}" "$d" "$f"
          if [ "$act" = int8 ] && [ "$kv" = f16 ]; then
            inc[$method]="$(awk -v p="$p" -v b="${base[f16]}" 'BEGIN { print p - b }')"
          fi
        done
      done
    done
    if [ "$type" != q8_0 ]; then
      summary+=("$(awk -v n="$name" -v t="$type" -v r="${inc[rtn]}" -v a="${inc[awq]}" \
        -v g="${inc[gptq]}" 'BEGIN {
          best = a < g ? a : g; which = a < g ? "awq" : "gptq";
          printf "%-22s %-7s rtn %+.4f  awq %+.4f  gptq %+.4f  -> %s removes %.0f %% of the increase",
                 n, t, r, a, g, which, (r > 0 ? 100 * (r - best) / r : 0) }')")
    fi
  done
done
echo
echo "== 4-bit: share of round-to-nearest's perplexity increase removed (act int8, kv f16; target >= 40 %)"
printf '%s\n' "${summary[@]}"
