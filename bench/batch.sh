#!/usr/bin/env bash
# The issue-8 benchmark: `rapide batch` throughput on 500 requests vs
#   (a) the same requests one at a time through the Engine (`rapide batch --in-flight 1`), and
#   (b) `rapide serve` driven at saturation by `rapide bench` (closed loop, CONCURRENCY users),
#       once with the server's default engine flags and once with the batch's.
# on synth100m Q8_0 and stories260K.
#
#   bench/batch.sh                 # both models
#   MODELS=stories260K bench/batch.sh
#
# Environment: BUILD_DIR, MODEL_DIR (bench/common.sh), WORK (scratch, /tmp/rapide-bench-batch), REQUESTS (500),
# SEQ_REQUESTS (the one-at-a-time run takes the first N requests, 60; tok/s is compared),
# CONCURRENCY (256), THREADS (0 = physical cores), OUT_SYNTH / OUT_STORIES (output tokens
# per request, 32 / 64), PREAMBLE_WORDS (words of the instruction every request starts with,
# 150; 0 = none), ROUNDS (3: the four modes run back to back this many times; each ratio is
# taken within a round and the median reported, since this VM's speed drifts between minutes).
# Throughput is generated tokens per second of the run itself (model loading excluded for
# every mode), with fixed output lengths (ignore_eos), greedy sampling.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
work="${WORK:-/tmp/rapide-bench-batch}"
requests="${REQUESTS:-500}"
seq_requests="${SEQ_REQUESTS:-60}"
concurrency="${CONCURRENCY:-256}"
threads="${THREADS:-0}"
rounds="${ROUNDS:-3}"
bench_build rapide
mkdir -p "$work"
thread_flags=()
if [[ "$threads" != 0 ]]; then thread_flags=(-t "$threads"); fi

# Requests that look like offline work: one instruction template (PREAMBLE_WORDS words) for
# every request, 20 documents, a different question on each, so requests sharing the
# instruction and a document can reuse their KV through the prefix cache.
make_inputs() {  # NAME OUT_TOKENS
  python3 - "$work/$1" "$requests" "$2" "${PREAMBLE_WORDS:-150}" <<'PY'
import json, random, sys
prefix, count, out_tokens, preamble_words = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(8)
words = ("the a little girl boy dog cat park tree sun day happy sad big small red blue ran "
         "jumped played found lost saw wanted said went home friend ball toy bird garden").split()
preamble = " ".join(rng.choice(words) for _ in range(preamble_words))
preamble = f"Instructions: {preamble}\n" if preamble_words else ""
docs = [" ".join(rng.choice(words) for _ in range(60)) for _ in range(20)]
with open(prefix + ".requests.jsonl", "w") as batch, open(prefix + ".dataset.jsonl", "w") as ds:
    for i in range(count):
        prompt = preamble + (f"Document: {docs[rng.randrange(len(docs))]}\nQuestion {i}: what did the "
                  f"{rng.choice(words)} do with the {rng.choice(words)}?\nAnswer:")
        body = {"prompt": prompt, "max_tokens": out_tokens, "temperature": 0.0,
                "ignore_eos": True}
        batch.write(json.dumps({"custom_id": f"q{i}", "method": "POST",
                                "url": "/v1/completions", "body": body}) + "\n")
        ds.write(json.dumps({"prompt": prompt, "max_tokens": out_tokens}) + "\n")
PY
}

# Prints generated tok/s from `rapide batch`'s summary line.
batch_tok_s() { sed -n 's/.*generated [0-9]* tokens, \([0-9.]*\) tok\/s.*/\1/p' "$1" | tail -1; }

# Runs `rapide serve` with the given flags, drives it with `rapide bench`, prints tok/s.
serve_tok_s() {  # MODEL NAME LABEL serve-flags...
  local model="$1" name="$2" label="$3"
  shift 3
  local log="$work/$name.serve-$label.log"
  "$rapide" serve -m "$model" --host 127.0.0.1 --port 0 "${thread_flags[@]}" "$@" >"$log" 2>&1 &
  local pid=$!
  local port=""
  for _ in $(seq 1 600); do
    port="$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log" | head -1)"
    if [[ -n "$port" ]] && curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1; then break; fi
    sleep 0.2
  done
  local cmd=("$rapide" bench --url "http://127.0.0.1:$port" --workload jsonl
             --dataset "$work/$name.dataset.jsonl" --num-requests "$requests"
             --concurrency "$concurrency" --temperature 0 --timeout 3600 -q
             --output "$work/$name.bench-$label.json")
  echo "+ $rapide serve -m $model ${thread_flags[*]} $* &  ${cmd[*]}" >&2
  "${cmd[@]}" >"$work/$name.bench-$label.log" 2>&1
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  python3 - "$work/$name.bench-$label.json" <<'PY'
import json, sys
summary = json.load(open(sys.argv[1]))["runs"][0]["summary"]
assert summary["failed"] == 0, summary
print(f"{summary['output_throughput']:.1f}")
PY
}

run_model() {  # MODEL NAME OUT_TOKENS
  local model="$1" name="$2"
  make_inputs "$name" "$3"
  local inp="$work/$name.requests.jsonl"
  head -n "$seq_requests" "$inp" >"$work/$name.seq.jsonl"

  local batch_cmd=("$rapide" batch -m "$model" -i "$inp" -o "$work/$name.batch.out.jsonl"
                   "${thread_flags[@]}" --progress lines)
  local seq_cmd=("$rapide" batch -m "$model" -i "$work/$name.seq.jsonl"
                 -o "$work/$name.seq.out.jsonl" "${thread_flags[@]}" --in-flight 1
                 --max-seqs 1 --order input --progress off)
  echo "+ ${batch_cmd[*]}"
  echo "+ ${seq_cmd[*]}"
  # Rounds of the four modes back to back: this VM's speed drifts between minutes, so each
  # ratio is taken within a round and the median of the rounds is reported.
  local results=()
  for round in $(seq 1 "$rounds"); do
    rm -f "$work/$name".{batch,seq}.out*.jsonl
    "${batch_cmd[@]}" 2>"$work/$name.batch.log"
    if [[ "$round" == 1 ]]; then
      grep -E "engine:|batch:.*in flight|batch done" "$work/$name.batch.log" | sed 's/^/  /'
    fi
    local batch seq serve_default serve_tuned
    batch="$(batch_tok_s "$work/$name.batch.log")"
    "${seq_cmd[@]}" 2>"$work/$name.seq.log"
    seq="$(batch_tok_s "$work/$name.seq.log")"
    serve_default="$(serve_tok_s "$model" "$name" default)"
    serve_tuned="$(serve_tok_s "$model" "$name" batchflags --max-seqs 256 --max-batch-tokens 4096 \
      --prefill-chunk 1024 --kv-memory 2GiB --max-queue 65536)"
    echo "  round $round: batch $batch, one at a time $seq, serve $serve_default (defaults), $serve_tuned (batch's flags) tok/s"
    results+=("$batch,$seq,$serve_default,$serve_tuned")
  done

  python3 - "$name" "$requests" "$seq_requests" "$concurrency" "${results[@]}" <<'PY'
import statistics, sys
name, n, nseq, conc = sys.argv[1:5]
rounds = [tuple(map(float, r.split(","))) for r in sys.argv[5:]]
def col(i): return [r[i] for r in rounds]
def ratio(i): return [r[0] / r[i] for r in rounds]
def fmt(xs): return ", ".join(f"{x:.2f}" for x in xs)
med = statistics.median
print(f"\n{name}: {n} requests, generated tok/s (median of {len(rounds)} rounds; ratios within each round)")
print(f"  rapide batch                                   {med(col(0)):9.1f}")
print(f"  one at a time through the Engine (first {nseq:>4}) {med(col(1)):9.1f}   batch = {med(ratio(1)):5.2f}x  ({fmt(ratio(1))})")
print(f"  rapide serve + rapide bench, {conc} users (serve defaults) {med(col(2)):9.1f}   batch = {med(ratio(2)):5.2f}x  ({fmt(ratio(2))})")
print(f"  rapide serve + rapide bench, {conc} users (batch's flags)  {med(col(3)):9.1f}   batch = {med(ratio(3)):5.2f}x  ({fmt(ratio(3))})")
PY
}

for m in ${MODELS:-synth100m stories260K}; do
  case "$m" in
    synth100m)
      synth="$(synth_model q8_0)"
      run_model "$synth" synth100m "${OUT_SYNTH:-32}"
      ;;
    stories260K) run_model "$stories" stories260K "${OUT_STORIES:-64}" ;;
    *) echo "unknown model $m (synth100m, stories260K)" >&2; exit 2 ;;
  esac
done
