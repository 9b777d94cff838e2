#!/usr/bin/env bash
# Speculative decoding (issue 15), n-gram proposer: TPOT with speculation on vs off, paired in
# time (off and on alternate, ROUNDS rounds, medians of the within-round ratios).
#   A. synth100m F16, one stream, 256 greedy tokens (a random model's greedy text loops, so
#      prompt lookup finds it): --spec ngram with auto and with 4 guesses; then the same
#      weights as Q4_0 as a draft model (auto, and 4 guesses with --draft-p-min 0);
#   B. TinyStories-656K F16 on input-grounded prompts (a story, then its beginning again);
#   C. bad guesses: synth100m F16 sampled at temperature 1.2 (little repeats), auto must
#      notice and stop (TPOT >= 0.95x of off);
#   D. 32 concurrent streams on synth100m Q8_0 through `rapide bench --engine`, auto:
#      aggregate output throughput on vs off (>= 0.95x).
#
#   bench/speculative.sh            ROUNDS=3 THREADS=2 by default
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
bench_build rapide
rounds="${ROUNDS:-3}"
threads="${THREADS:-2}"
f16="$(synth_model f16)"
q8="$(synth_model q8_0)"
q4="$(synth_model q4_0)"
tiny="$shared/models/tinystories-656k/TinyStories-656K-F16.gguf"
work="${WORK:-/tmp/rapide-bench-spec}"
rm -rf "$work"  # results of an earlier run would mix into the medians
mkdir -p "$work"

story="Once upon a time, there was a little girl named Lily. She loved to play with her toys. \
One day, she saw a big red ball in the park. She wanted to play with it, but it was too high. \
She asked her mom for help. Her mom smiled and gave her the ball. Lily was very happy. \
Once upon a time, there was a little girl named Lily. She loved"

# run LABEL MODEL PROMPT TOKENS EXTRA...: one `rapide run`, its figure lines kept in $work/LABEL
run() {
  local label="$1" model="$2" prompt="$3" n="$4"
  shift 4
  local cmd=("$rapide" run -m "$model" -p "$prompt" -n "$n" -t "$threads" --ignore-eos
             --no-print-prompt "$@")
  echo "+ ${cmd[*]}" >>"$work/commands"
  "${cmd[@]}" 2>&1 >/dev/null | grep -E "TPOT|speculation" >>"$work/$label"
}

: >"$work/commands"
for r in $(seq 1 "$rounds"); do
  echo "round $r of $rounds" >&2
  run a_off "$f16" "Once upon a time there was" 256 --temp 0 --spec off
  run a_auto "$f16" "Once upon a time there was" 256 --temp 0 --spec ngram --spec-tokens auto
  run a_k4 "$f16" "Once upon a time there was" 256 --temp 0 --spec ngram --spec-tokens 4
  run a_draft "$f16" "Once upon a time there was" 256 --temp 0 --draft-model "$q4"
  run a_draft4 "$f16" "Once upon a time there was" 256 --temp 0 --draft-model "$q4" \
    --spec-tokens 4 --draft-p-min 0
  run b_off "$tiny" "$story" 200 --temp 0 --spec off
  run b_auto "$tiny" "$story" 200 --temp 0 --spec ngram --spec-tokens auto
  run c_off "$f16" "Once upon a time there was" 128 --temp 1.2 --top-k 0 --top-p 1 --min-p 0 \
    --seed "$r" --spec off
  run c_auto "$f16" "Once upon a time there was" 128 --temp 1.2 --top-k 0 --top-p 1 --min-p 0 \
    --seed "$r" --spec ngram --spec-tokens auto
done

load=(--workload random --input-len 190-210 --output-len 10-400 --num-requests 64
      --concurrency 32 --seed 7 -m "$q8" -q -t "$threads")
for r in $(seq 1 "$rounds"); do
  for mode in off auto; do
    flags=(--spec off)
    [[ "$mode" == auto ]] && flags=(--spec ngram --spec-tokens auto)
    cmd=("$rapide" bench --engine "${load[@]}" "${flags[@]}" --output "$work/d_${mode}_$r.json")
    echo "+ ${cmd[*]}" >>"$work/commands"
    "${cmd[@]}" >/dev/null 2>&1
  done
done

echo "== commands"
sort -u "$work/commands"
python3 - "$work" "$rounds" <<'PY'
import json, re, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
def runs(label):
    out = []
    lines = open(f"{work}/{label}").read().splitlines()
    for line in lines:
        m = re.search(r"TPOT: ([0-9.]+) ms", line)
        if m: out.append({"tpot": float(m.group(1))})
        s = re.search(r"speculation: (\d+) guesses verified, (\d+) accepted \(([0-9.]+) %\), "
                      r"([0-9.]+) accepted per verification, (\d+) steps for (\d+) tokens, "
                      r"last k (\d+)", line)
        if s and out:
            out[-1].update(acc=float(s.group(3)), mean=float(s.group(4)), steps=int(s.group(5)),
                           tokens=int(s.group(6)), k=int(s.group(7)))
    return out
def ratio(off, on):  # TPOT speedup per round, median
    return statistics.median(o["tpot"] / n["tpot"] for o, n in zip(runs(off), runs(on)))
def spec_line(label):
    r = runs(label)
    return (f"acceptance {statistics.median(x['acc'] for x in r):.1f} %, "
            f"{statistics.median(x['mean'] for x in r):.2f} accepted per verification, "
            f"{statistics.median(x['tokens'] / x['steps'] for x in r):.2f} tokens per step, "
            f"last k {r[-1]['k']}")
def tpot(label): return statistics.median(x["tpot"] for x in runs(label))
print()
print(f"A. synth100m F16, 256 greedy tokens: TPOT off {tpot('a_off'):.2f} ms")
print(f"   ngram auto: {tpot('a_auto'):.2f} ms = {ratio('a_off', 'a_auto'):.2f}x lower; {spec_line('a_auto')}")
print(f"   ngram k=4:  {tpot('a_k4'):.2f} ms = {ratio('a_off', 'a_k4'):.2f}x lower; {spec_line('a_k4')}")
print(f"   draft Q4_0 auto: {tpot('a_draft'):.2f} ms = {ratio('a_off', 'a_draft'):.2f}x lower; {spec_line('a_draft')}")
print(f"   draft Q4_0 k=4, p-min 0: {tpot('a_draft4'):.2f} ms = {ratio('a_off', 'a_draft4'):.2f}x lower; {spec_line('a_draft4')}")
print(f"B. TinyStories-656K, input-grounded: TPOT off {tpot('b_off'):.3f} ms, auto {tpot('b_auto'):.3f} ms "
      f"= {ratio('b_off', 'b_auto'):.2f}x lower; {spec_line('b_auto')}")
print(f"C. bad guesses (synth100m, temperature 1.2): TPOT off {tpot('c_off'):.2f} ms, auto "
      f"{tpot('c_auto'):.2f} ms: auto at {1 / ratio('c_off', 'c_auto'):.2f}x of off's TPOT "
      f"(target <= 1.05); {spec_line('c_auto')}")
def tput(name):
    doc = json.load(open(f"{work}/{name}.json"))
    run = doc["runs"][0] if "runs" in doc else doc
    return run["summary"]["output_throughput"]
pairs = [tput(f"d_auto_{r}") / tput(f"d_off_{r}") for r in range(1, rounds + 1)]
print(f"D. 32 streams, synth100m Q8_0: output throughput auto / off = {statistics.median(pairs):.2f}x "
      f"(rounds: {', '.join(f'{p:.2f}' for p in pairs)}; target >= 0.95)")
PY
