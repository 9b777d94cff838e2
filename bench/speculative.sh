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
#   S. pair A sampled (temperature 0.8, no truncation, seed = round): the Q4_0 draft samples
#      its guesses and the target accepts with min(1, p/q); TPOT off vs on (auto, k = 4,
#      k = 8), acceptance, mean accepted length, k, and the speedup the measured acceptance
#      predicts (E(alpha, k) = (1 - alpha^(k+1)) / (1 - alpha) tokens per step at the
#      measured step cost) next to the measured one; then with rapide run's default
#      truncation (llama.cpp's top-k 40 / top-p 0.95 / min-p 0.05), k = 4;
#   E. pair A, 32 concurrent streams at temperature 0.8, draft with auto: aggregate output
#      throughput on vs off (>= 0.95x);
#   L. with LLAMA_BIN=DIR (llama.cpp's build/bin), the peer on pair A in the same rounds:
#      llama-speculative --draft-max 8 -t 2, greedy (--temp 0) and its default sampling, and
#      llama-bench's plain F16 decode; skipped when LLAMA_BIN is unset.
#
#   bench/speculative.sh            ROUNDS=3 THREADS=2 by default
#   LLAMA_BIN=/work/llama-bin/build/bin bench/speculative.sh   (LLAMA_THREADS: the peer's -t,
#   THREADS by default; ggml's spinning thread barrier collapses on an oversubscribed
#   machine, where -t 1 is the fair figure)
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
bench_build rapide
rounds="${ROUNDS:-3}"
threads="${THREADS:-2}"
llama_threads="${LLAMA_THREADS:-$threads}"
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
  pure=(--temp 0.8 --top-k 0 --top-p 1 --min-p 0 --seed "$r")
  run s_off "$f16" "Once upon a time there was" 256 "${pure[@]}" --spec off
  run s_auto "$f16" "Once upon a time there was" 256 "${pure[@]}" --draft-model "$q4"
  run s_k4 "$f16" "Once upon a time there was" 256 "${pure[@]}" --draft-model "$q4" \
    --spec-tokens 4
  run s_k8 "$f16" "Once upon a time there was" 256 "${pure[@]}" --draft-model "$q4" \
    --spec-tokens 8
  # rapide run's default truncation (llama.cpp's: top-k 40, top-p 0.95, min-p 0.05).
  run t_off "$f16" "Once upon a time there was" 256 --temp 0.8 --seed "$r" --spec off
  run t_k4 "$f16" "Once upon a time there was" 256 --temp 0.8 --seed "$r" --draft-model "$q4" \
    --spec-tokens 4
  if [[ -n "${LLAMA_BIN:-}" ]]; then
    # The peer in the same minutes: its speculative decode (greedy, then its default
    # sampling: temperature 0.8, top-k 40, top-p 0.95, min-p 0.05) and its plain decode.
    for mode in greedy sampled; do
      temp=()
      [[ "$mode" == greedy ]] && temp=(--temp 0)
      cmd=("$LLAMA_BIN/llama-speculative" -m "$f16" -md "$q4" --draft-max 8 -t "$llama_threads"
           -td "$llama_threads" -n 256 -s "$r" -p "Once upon a time there was" "${temp[@]}")
      echo "+ ${cmd[*]}" >>"$work/commands"
      "${cmd[@]}" >"$work/l_${mode}_$r.log" 2>&1 || echo "llama-speculative failed" >&2
    done
    cmd=("$LLAMA_BIN/llama-bench" -m "$f16" -t "$llama_threads" -p 0 -n 256 -r 1 -o csv)
    echo "+ ${cmd[*]}" >>"$work/commands"
    "${cmd[@]}" >"$work/l_plain_$r.csv" 2>/dev/null || echo "llama-bench failed" >&2
  fi
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

# E: pair A, 32 streams, sampled, draft with auto vs off.
load_a=(--workload random --input-len 190-210 --output-len 64-128 --num-requests 32
        --concurrency 32 --seed 7 --temperature 0.8 -m "$f16" -q -t "$threads")
for r in $(seq 1 "$rounds"); do
  for mode in off auto; do
    flags=(--spec off)
    [[ "$mode" == auto ]] && flags=(--draft-model "$q4" --spec-tokens auto)
    cmd=("$rapide" bench --engine "${load_a[@]}" "${flags[@]}" --output "$work/e_${mode}_$r.json")
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
    lines = open(f"{work}/{label}", errors="replace").read().splitlines()
    for line in lines:
        m = re.search(r"TPOT: ([0-9.]+) ms", line)
        if m: out.append({"tpot": float(m.group(1))})
        s = re.search(r"speculation: (\d+) guesses verified, (\d+) accepted \(([0-9.]+) %\), "
                      r"([0-9.]+) accepted per verification, (\d+) steps for (\d+) tokens, "
                      r"last k (\d+), auto off (\d+) times, auto predicted ([0-9.]+)x", line)
        if s and out:
            out[-1].update(acc=float(s.group(3)), mean=float(s.group(4)), steps=int(s.group(5)),
                           tokens=int(s.group(6)), k=int(s.group(7)),
                           predicted=float(s.group(9)))
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
def expected(alpha, k):  # tokens per verification step, geometric acceptance
    return k + 1.0 if alpha >= 1 else (1 - alpha ** (k + 1)) / (1 - alpha)
def predicted(off, on, k):
    # The measured acceptance's E(alpha, k) tokens per step, at the measured cost of a step
    # (TPOT_on * tokens / steps) against a plain step (TPOT_off).
    vals = []
    for o, n in zip(runs(off), runs(on)):
        step = n["tpot"] * n["tokens"] / n["steps"]
        vals.append(expected(n["acc"] / 100, k) * o["tpot"] / step)
    return statistics.median(vals)
print(f"S. pair A sampled (temperature 0.8, no truncation, seeds 1..{rounds}): TPOT off {tpot('s_off'):.2f} ms")
for label, k in (("s_auto", None), ("s_k4", 4), ("s_k8", 8), ("t_k4", 4)):
    if label == "t_k4":
        print(f"   with top-k 40 / top-p 0.95 / min-p 0.05: TPOT off {tpot('t_off'):.2f} ms")
    off = "t_off" if label == "t_k4" else "s_off"
    measured = ratio(off, label)
    pred = (statistics.median(x["predicted"] for x in runs(label)) if k is None
            else predicted(off, label, k))
    print(f"   draft Q4_0 {'auto' if k is None else f'k={k}'}: {tpot(label):.2f} ms = "
          f"{measured:.2f}x lower, predicted {pred:.2f}x ({100 * measured / pred:.0f} % of it; "
          f"auto: the engine's own last prediction); {spec_line(label)}")
pairs = [tput(f"e_auto_{r}") / tput(f"e_off_{r}") for r in range(1, rounds + 1)]
print(f"E. 32 streams, pair A sampled, draft auto: output throughput auto / off = "
      f"{statistics.median(pairs):.2f}x (off {statistics.median(tput(f'e_off_{r}') for r in range(1, rounds + 1)):.1f} tok/s; "
      f"rounds: {', '.join(f'{p:.2f}' for p in pairs)}; target >= 0.95)")
import glob, os
if glob.glob(f"{work}/l_greedy_*.log"):
    def peer(mode):
        acc, speed = [], []
        for f in sorted(glob.glob(f"{work}/l_{mode}_*.log")):
            text = open(f, errors="replace").read()
            a = re.search(r"accept\s*=\s*([0-9.]+)%", text)
            v = re.findall(r"decoded\s+\d+ tokens in\s+[0-9.]+ seconds, speed:\s+([0-9.]+) t/s", text)
            if a: acc.append(float(a.group(1)))
            if v: speed.append(float(v[-1]))
        return (statistics.median(acc) if acc else float("nan"),
                statistics.median(speed) if speed else float("nan"))
    plain = []
    for f in sorted(glob.glob(f"{work}/l_plain_*.csv")):
        rows = list(__import__("csv").DictReader(open(f)))
        plain += [float(r["avg_ts"]) for r in rows if r.get("avg_ts")]
    rapide_off = 1000 / tpot("a_off")
    print(f"L. llama.cpp on pair A, same rounds: plain F16 decode "
          f"{statistics.median(plain) if plain else float('nan'):.1f} tok/s (rapide off: {rapide_off:.1f} tok/s)")
    for mode, on in (("greedy", "a_draft4"), ("sampled", "t_k4"), ("sampled", "s_k8")):
        acc, speed = peer(mode)
        print(f"   llama-speculative {mode}: acceptance {acc:.1f} %, {speed:.1f} tok/s; rapide "
              f"{on}: {1000 / tpot(on):.1f} tok/s (acceptance "
              f"{statistics.median(x['acc'] for x in runs(on)):.1f} %)")
PY
