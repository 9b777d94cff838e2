#!/usr/bin/env bash
# Smaller models by training (issue 22): structured pruning and knowledge distillation on the CPU.
#   A. TinyStories-656K F16 (real weights): perplexity of reference/text/stories-eval.txt
#      (ctx 128, as bench/quantization.sh), size, decode and prefill tok/s of
#        - the original,
#        - 30 % of FFN channels pruned (kept width rounded to a multiple of 16: 384 -> 272),
#          without and with healing (distillation from the unpruned model),
#        - two distilled students of about half the parameters: a fresh smaller shape, and the
#          teacher pruned to one layer (the student initialised from the teacher's weights);
#      training data: the calibration text (reference/greedy/*.txt, never the eval text) and
#      sequences the teacher samples itself (--generate).
#   B. the students as speculative drafts for TinyStories-656K (greedy, 200 tokens, ROUNDS
#      rounds paired in time with --spec off): acceptance rate and TPOT change, with rapide's
#      automatic guess count and with 1 or 2 guesses forced (--draft-p-min 0: every guess
#      checked; with 1 guess the acceptance is the per-token greedy agreement).
#   C. synth100m F16: the same 30 % FFN pruning (no healing: random weights), decode tok/s.
# Training throughput and wall time are printed for every training run.
#
#   bench/pruning_distillation.sh      HEAL_STEPS=200 DISTILL_STEPS=2500 GENERATE=2048 ROUNDS=3 THREADS=2
# Environment: see bench/common.sh.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
bench_build rapide bench_speed_report
threads="${THREADS:-2}"
rounds="${ROUNDS:-3}"
heal_steps="${HEAL_STEPS:-200}"
distill_steps="${DISTILL_STEPS:-2500}"
generate="${GENERATE:-2048}"
ctx=128
tiny="$shared/models/tinystories-656k/TinyStories-656K-F16.gguf"
eval_text="$shared/reference/text/stories-eval.txt"
work="${WORK:-/tmp/rapide-bench-pruning-distillation}"
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

rows=()
row() {  # name size_kib ppl base decode prefill
  rows+=("$(awk -v n="$1" -v s="$2" -v p="$3" -v b="$4" -v d="$5" -v f="$6" 'BEGIN {
    printf "| %-34s | %8.1f | %8.4f | %+7.2f %% | %8.0f | %8.0f |", n, s, p, 100 * (p - b) / b, d, f }')")
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

# Two students of about half the parameters: a fresh one of a smaller shape, and the teacher
# pruned to one layer (half its heads and FFN channels) then distilled.
student_shape="dim=96,layers=2,heads=6,kv_heads=3,ffn=160"
# Teacher samples at temperature 0.6: closer to the greedy path a draft has to predict.
distill=(--generate "$generate" --generate-temperature 0.6 --lr 3e-3 --min-lr 3e-4 --warmup 30
         --temperature 1 -t "$threads")
logged "$rapide" distill --teacher "$tiny" --student-shape "$student_shape" --data "$calibration" \
  --steps "$distill_steps" "${distill[@]}" -o "$work/student.gguf" >"$work/student.log" 2>&1
read -r d f <<<"$(speed "$work/student.gguf")"
row "student: fresh (dim 96, ffn 160)" "$(kib "$work/student.gguf")" "$(ppl "$work/student.gguf")" \
  "$base" "$d" "$f"
logged "$rapide" prune -m "$tiny" --calibration "$calibration" --layers 1 --ffn 0.5 --heads 0.5 \
  --heal-steps "$distill_steps" "${distill[@]}" -o "$work/student2.gguf" >"$work/student2.log" 2>&1
read -r d f <<<"$(speed "$work/student2.gguf")"
row "student: teacher pruned to 1 layer" "$(kib "$work/student2.gguf")" \
  "$(ppl "$work/student2.gguf")" "$base" "$d" "$f"

echo "== B. the students as speculative drafts" >&2
for r in $(seq 1 "$rounds"); do
  for mode in off auto k1 k2; do
    for s in student student2; do
      flags=(--spec off)
      [[ "$mode" == auto ]] && flags=(--draft-model "$work/$s.gguf")
      [[ "$mode" == k1 ]] && flags=(--draft-model "$work/$s.gguf" --spec-tokens 1 --draft-p-min 0)
      [[ "$mode" == k2 ]] && flags=(--draft-model "$work/$s.gguf" --spec-tokens 2 --draft-p-min 0)
      [[ "$mode" == off && "$s" == student2 ]] && continue
      label="$mode"
      [[ "$mode" != off ]] && label="${mode}_$s"
      logged "$rapide" run -m "$tiny" -p "Once upon a time" -n 200 -t "$threads" --temp 0 \
        --ignore-eos --no-print-prompt "${flags[@]}" 2>&1 >/dev/null | grep -E "TPOT|speculation" \
        >>"$work/spec_$label" || true
    done
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
echo "| model                              | size KiB | PPL      | vs orig   | decode/s | prefill/s |"
echo "|------------------------------------|----------|----------|-----------|----------|-----------|"
printf '%s\n' "${rows[@]}"
echo "pruning: $(grep '^pruned:' "$work/pruned.log")"
for log in healed student student2; do
  echo "$log: $(grep -E '^(heal|distill): [0-9]+ steps' "$work/$log.log")"
  grep -E '^(pruned|wrote)' "$work/$log.log" | sed 's/^/  /'
done
echo
echo "== B. students as draft for TinyStories-656K (greedy, 200 tokens, $rounds rounds)"
python3 - "$work" <<'PY'
import re, statistics, sys
work = sys.argv[1]
def read(label):
    text = open(f"{work}/spec_{label}").read()
    tpot = [float(x) for x in re.findall(r"TPOT: ([0-9.]+) ms", text)]
    acc = [float(x) for x in re.findall(r"accepted \(([0-9.]+) %\)", text)]
    return tpot, acc
off, _ = read("off")
print(f"--spec off: TPOT {statistics.median(off):.3f} ms")
for s in ("student", "student2"):
    for mode in ("auto", "k1", "k2"):
        tpot, acc = read(f"{mode}_{s}")
        ratio = statistics.median(d / o for o, d in zip(off, tpot))
        what = {"auto": "auto (rapide decides)", "k1": "1 guess, --draft-p-min 0",
                "k2": "2 guesses, --draft-p-min 0"}[mode]
        print(f"{s:8s} {what:27s}: acceptance {statistics.median(acc):5.1f} %, "
              f"TPOT {statistics.median(tpot):.3f} ms (x{ratio:.2f} of off, paired median)")
PY
echo
echo "== C. synth100m F16, FFN -30 %: $(grep '^pruned:' "$work/synth-pruned.log")"
awk -v a="$sd0" -v b="$sd1" -v c="$sf0" -v e="$sf1" 'BEGIN {
  printf "decode %.1f -> %.1f tok/s (x%.2f), prefill %.1f -> %.1f tok/s (x%.2f)\n", a, b, b / a, c, e, e / c }'
