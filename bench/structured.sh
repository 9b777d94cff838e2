#!/usr/bin/env bash
# The cost of structured output (issue 19):
#   A. per-token mask time on the 32000-token Llama-2 vocabulary (bench_grammar_mask: a JSON
#      Schema response walked token by token; target: median <= 50 us);
#   B. TPOT with a JSON Schema response_format vs free generation, 1 and 32 concurrent streams
#      on synth100m Q8_0 through `rapide bench --engine` (target: <= 10 % slower at 32),
#      paired in time: free and schema alternate, ROUNDS rounds, medians of the per-round
#      ratios. Forced length (ignore_eos + min_tokens) keeps free requests at their length; a
#      constrained request also ends when its JSON is complete, so TPOT (per token) is the
#      figure compared, not throughput.
#
#   bench/structured.sh            ROUNDS=3 THREADS=2 by default
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
bench_build rapide bench_grammar_mask
rounds="${ROUNDS:-3}"
threads="${THREADS:-2}"
q8="$(synth_model q8_0)"
vocab="$shared/models/llama2-tiny-random/llama-2-tiny-random.gguf"
work="${WORK:-/tmp/rapide-bench-structured}"
rm -rf "$work"
mkdir -p "$work"

cat >"$work/format.json" <<'JSON'
{"type": "json_schema", "json_schema": {"name": "article", "strict": true, "schema": {
  "type": "object",
  "properties": {"title": {"type": "string"}, "year": {"type": "integer", "minimum": 1900},
                 "tags": {"type": "array", "items": {"enum": ["news", "sport", "tech"]}},
                 "body": {"type": "string"}},
  "required": ["title", "year", "tags", "body"]}}}
JSON

echo "== A. mask time per token"
cmd=("$build/bench/bench_grammar_mask" --model "$vocab")
echo "+ ${cmd[*]}"
"${cmd[@]}"

: >"$work/commands"
for r in $(seq 1 "$rounds"); do
  echo "round $r of $rounds" >&2
  for streams in 1 32; do
    n=$((streams == 1 ? 4 : 64))
    for mode in free schema; do
      flags=()
      [[ "$mode" == schema ]] && flags=(--response-format "@$work/format.json")
      cmd=("$rapide" bench --engine -m "$q8" -t "$threads" -q --workload random
           --input-len 60-80 --output-len 128 --num-requests "$n" --concurrency "$streams"
           --temperature 1 --seed "$r" "${flags[@]}" --output "$work/${mode}_${streams}_$r.json")
      echo "+ ${cmd[*]}" >>"$work/commands"
      "${cmd[@]}" >/dev/null 2>&1
    done
  done
done

echo
echo "== B. TPOT, JSON Schema vs free (synth100m Q8_0)"
sort -u "$work/commands" | sed 's/--seed [0-9]*/--seed R/' | sort -u
python3 - "$work" "$rounds" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
def summary(name):
    doc = json.load(open(f"{work}/{name}.json"))
    return doc["runs"][0]["summary"]
for streams in (1, 32):
    free = [summary(f"free_{streams}_{r}") for r in range(1, rounds + 1)]
    schema = [summary(f"schema_{streams}_{r}") for r in range(1, rounds + 1)]
    ratios = [s["tpot_s"]["mean"] / f["tpot_s"]["mean"] for f, s in zip(free, schema)]
    print(f"{streams:>2} streams: TPOT free {statistics.median(f['tpot_s']['mean'] for f in free) * 1e3:.2f} ms, "
          f"schema {statistics.median(s['tpot_s']['mean'] for s in schema) * 1e3:.2f} ms "
          f"-> schema/free {statistics.median(ratios):.3f}x (rounds: {', '.join(f'{x:.3f}' for x in ratios)}); "
          f"schema output tokens per request {statistics.median(s['output_tokens'] / max(1, s['completed']) for s in schema):.0f}, "
          f"failed {sum(s['failed'] for s in schema)}")
print("target: <= 1.10x at 32 streams")
PY
