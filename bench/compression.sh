#!/usr/bin/env bash
# Compression by training (issue 22): structured pruning and knowledge distillation on the CPU.
#   A. TinyStories-656K F16 (real weights): perplexity of reference/text/stories-eval.txt
#      (ctx 128, as bench/quantization.sh), size, decode and prefill tok/s of
#        - the original,
#        - 30 % of FFN channels pruned (kept width rounded to a multiple of 16: 384 -> 272),
#          without and with healing (distillation from the unpruned model),
#        - a distilled student of about half the parameters;
#      training data: the calibration text (reference/greedy/*.txt, never the eval text) and
#      sequences the teacher samples itself (--generate).
#   B. the student as speculative draft for TinyStories-656K (greedy, 200 tokens, ROUNDS rounds
#      paired in time with --spec off): acceptance rate and TPOT change.
#   C. synth100m F16: the same 30 % FFN pruning (no healing: random weights), decode tok/s.
# Training throughput and wall time are printed for every training run.
#
#   bench/compression.sh      HEAL_STEPS=300 DISTILL_STEPS=600 GENERATE=512 ROUNDS=3 THREADS=2
# Environment: see bench/common.sh.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
bench_build rapide bench_speed_report
threads="${THREADS:-2}"
rounds="${ROUNDS:-3}"
heal_steps="${HEAL_STEPS:-300}"
distill_steps="${DISTILL_STEPS:-600}"
generate="${GENERATE:-512}"
ctx=128
tiny="$shared/models/tinystories-656k/TinyStories-656K-F16.gguf"
eval_text="$shared/reference/text/stories-eval.txt"
work="${WORK:-/tmp/rapide-bench-compression}"
rm -rf "$work"
mkdir -p "$work"
calibration="$work/calibration.txt"
cat "$shared"/reference/greedy/*.txt >"$calibration"
: >"$work/commands"

# logged CMD...: runs CMD, recording it in the command list.
logged() {
  echo "+ $*" >>"$work/commands"
  "$@"
}

ppl() {
  logged "$rapide" perplexity -m "$1" -f "$eval_text" --ctx "$ctx" -t "$threads" 2>&1 |
    sed -n 's/^PPL = \([0-9.]*\).*/\1/p'
}

# speed MODEL: "decode prefill" tok/s (batch 1 decode, 128-token prefill).
speed() {
  local report
  report="$(logged "$build/bench/bench_speed_report" "$1" --threads "$threads" --prompt 128 \
    --decode 64 --repeats 3)"
  echo "$(sed -n 's/^decode batch 1: \([0-9.]*\) tok\/s.*/\1/p' <<<"$report")" \
    "$(sed -n 's/^prefill [0-9]* tokens: \([0-9.]*\) tok\/s.*/\1/p' <<<"$report")"
}

kib() { awk -v b="$(stat -c %s "$1")" 'BEGIN { printf "%.1f", b / 1024 }'; }

# train_figures LOG: "tokens/s seconds" of the training summary line in LOG.
train_figures() { sed -n 's/^\(heal\|distill\): .* \([0-9]*\) tokens\/s, \([0-9.]*\) s$/\2 \3/p' "$1"; }

rows=()
row() {  # name size_kib ppl base decode prefill
  rows+=("$(awk -v n="$1" -v s="$2" -v p="$3" -v b="$4" -v d="$5" -v f="$6" 'BEGIN {
    printf "| %-30s | %8.1f | %8.4f | %+7.2f %% | %8.0f | %8.0f |", n, s, p, 100 * (p - b) / b, d, f }')")
}

echo "== A. TinyStories-656K: pruning and distillation" >&2
base="$(ppl "$tiny")"
read -r d f <<<"$(speed "$tiny")"
row "original F16" "$(kib "$tiny")" "$base" "$base" "$d" "$f"

prune=(prune -m "$tiny" --calibration "$calibration" --ffn 0.3 --multiple-of 16 -t "$threads")
logged "$rapide" "${prune[@]}" -o "$work/pruned.gguf" >"$work/pruned.log" 2>&1
read -r d f <<<"$(speed "$work/pruned.gguf")"
row "FFN -30 % (384->272)" "$(kib "$work/pruned.gguf")" "$(ppl "$work/pruned.gguf")" "$base" "$d" "$f"

logged "$rapide" "${prune[@]}" --heal-steps "$heal_steps" --generate "$generate" --lr 1e-3 \
  --min-lr 1e-4 --warmup 20 --temperature 1 -o "$work/healed.gguf" >"$work/healed.log" 2>&1
read -r d f <<<"$(speed "$work/healed.gguf")"
row "FFN -30 % + heal $heal_steps steps" "$(kib "$work/healed.gguf")" "$(ppl "$work/healed.gguf")" \
  "$base" "$d" "$f"
read -r heal_tps heal_s <<<"$(train_figures "$work/healed.log")"

student_shape="dim=96,layers=2,heads=6,kv_heads=3,ffn=160"
logged "$rapide" distill --teacher "$tiny" --student-shape "$student_shape" --data "$calibration" \
  --generate "$generate" --steps "$distill_steps" --lr 3e-3 --min-lr 3e-4 --warmup 30 \
  --temperature 1 -t "$threads" -o "$work/student.gguf" >"$work/student.log" 2>&1
read -r d f <<<"$(speed "$work/student.gguf")"
row "student ($student_shape)" "$(kib "$work/student.gguf")" "$(ppl "$work/student.gguf")" "$base" \
  "$d" "$f"
read -r distill_tps distill_s <<<"$(train_figures "$work/student.log")"
student_params="$(sed -n 's/^wrote .*: \([0-9.]*\) M parameters.*/\1/p' "$work/student.log")"

echo "== B. the student as speculative draft" >&2
story="Once upon a time"
for r in $(seq 1 "$rounds"); do
  for mode in off draft; do
    flags=(--spec off)
    [[ "$mode" == draft ]] && flags=(--draft-model "$work/student.gguf")
    logged "$rapide" run -m "$tiny" -p "$story" -n 200 -t "$threads" --temp 0 --ignore-eos \
      --no-print-prompt "${flags[@]}" 2>&1 >/dev/null | grep -E "TPOT|speculation" \
      >>"$work/spec_$mode" || true
  done
done

echo "== C. synth100m F16: pruning for speed" >&2
synth="$(synth_model f16)"
read -r sd0 sf0 <<<"$(speed "$synth")"
logged "$rapide" prune -m "$synth" --calibration "$calibration" --calibration-tokens 512 --ffn 0.3 \
  -t "$threads" -o "$work/synth-pruned.gguf" >"$work/synth-pruned.log" 2>&1
read -r sd1 sf1 <<<"$(speed "$work/synth-pruned.gguf")"

echo "== commands"
cat "$work/commands"
echo
echo "== A. TinyStories-656K F16: perplexity of stories-eval.txt (ctx $ctx), $threads threads"
echo "| model                          | size KiB | PPL      | vs orig   | decode/s | prefill/s |"
echo "|--------------------------------|----------|----------|-----------|----------|-----------|"
printf '%s\n' "${rows[@]}"
echo "pruning: $(grep '^pruned:' "$work/pruned.log")"
echo "healing: $heal_steps steps, ${heal_tps} tokens/s, ${heal_s} s"
echo "distillation: student ${student_params} M parameters, $distill_steps steps, ${distill_tps} tokens/s, ${distill_s} s"
echo
echo "== B. student as draft for TinyStories-656K (greedy, 200 tokens, $rounds rounds)"
python3 - "$work" <<'PY'
import re, statistics, sys
work = sys.argv[1]
def tpots(mode):
    return [float(m.group(1)) for m in re.finditer(r"TPOT: ([0-9.]+) ms", open(f"{work}/spec_{mode}").read())]
off, draft = tpots("off"), tpots("draft")
acc = [float(m.group(1)) for m in re.finditer(r"accepted \(([0-9.]+) %\)", open(f"{work}/spec_draft").read())]
ratios = [d / o for o, d in zip(off, draft)]
print(f"acceptance (greedy): {statistics.median(acc):.1f} % (median of {len(acc)}; target >= 60 %)")
print(f"TPOT off {statistics.median(off):.3f} ms, with draft {statistics.median(draft):.3f} ms: "
      f"x{statistics.median(ratios):.2f} (median of paired ratios)")
PY
echo
echo "== C. synth100m F16, FFN -30 %: $(grep '^pruned:' "$work/synth-pruned.log")"
awk -v a="$sd0" -v b="$sd1" -v c="$sf0" -v e="$sf1" 'BEGIN {
  printf "decode %.1f -> %.1f tok/s (x%.2f), prefill %.1f -> %.1f tok/s (x%.2f)\n", a, b, b / a, c, e, e / c }'
