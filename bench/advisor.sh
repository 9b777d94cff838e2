#!/usr/bin/env bash
# rapide advise (issue 17): the scenario suite on synth100m, each workload with one bottleneck
# built in. For every scenario the advisor runs the workload in-process, must name the
# bottleneck first, and with --verify reruns the same workload with its lever on (A/B on the
# same seed and texts) and reports predicted vs measured effect. Prints one table:
#   scenario | expected lever | named first | metric | A measured | B predicted | B measured |
#   measured/predicted change | verdict
# Figures come from a shared, noisy machine: the A/B pairs run back to back.
#
#   bench/advisor.sh              THREADS=2 by default; WORK=/tmp/rapide-bench-advise
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
bench_build rapide
threads="${THREADS:-2}"
f16="$(synth_model f16)"
q8="$(synth_model q8_0)"
work="${WORK:-/tmp/rapide-bench-advise}"
rm -rf "$work"
mkdir -p "$work"

# scenario NAME EXPECTED MODEL FLAGS...: rapide advise --verify --json into $work/NAME.json
scenario() {
  local name="$1" expected="$2" model="$3"
  shift 3
  local cmd=("$rapide" advise -q --json --verify -m "$model" -t "$threads" --seed 7 "$@")
  echo "+ ${cmd[*]}" | tee -a "$work/commands" >&2
  "${cmd[@]}" >"$work/$name.json" 2>"$work/$name.log" || echo "  failed: see $work/$name.log" >&2
  echo "$expected" >"$work/$name.expected"
}

# A system prompt with a timestamp in front (question 2's failure signal).
python3 - "$work/timestamp.jsonl" <<'PY'
import json, sys
story = ("You are a helpful assistant for a library. Answer in two sentences, cite the shelf, "
         "never invent a book. ") * 8
with open(sys.argv[1], "w") as f:
    for i in range(16):
        f.write(json.dumps({"prompt": f"Now: 2026-11-29T10:04:{10 + i:02d}Z\n{story}Q{i}?",
                            "output_len": 8}) + "\n")
PY

scenario f16-batch1 quantize "$f16" --workload random --input-len 32 --output-len 32 \
  --num-requests 4 --concurrency 1
scenario prefix-off prefix-cache "$q8" --workload shared-prefix --prefix-len 400 --input-len 16 \
  --output-len 8 --num-requests 8 --concurrency 1 --prefix-cache off
scenario timestamp static-content-first "$q8" --workload jsonl --dataset "$work/timestamp.jsonl" \
  --num-requests 16 --concurrency 1
scenario static continuous-batching "$q8" --workload random --input-len 32 --output-len 4-160 \
  --num-requests 24 --concurrency 8 --batching static
scenario contiguous paged-kv "$q8" --workload random --input-len 64 --output-len 32 \
  --num-requests 32 --concurrency 16 --kv-layout contiguous --kv-memory 96MiB
scenario block-size kv-block-size "$q8" --workload random --input-len 64 --output-len 32 \
  --num-requests 32 --concurrency 16 --kv-block-size 512 --kv-memory 48MiB
scenario one-user speculative "$q8" --workload random --input-len 32 --output-len 128 \
  --num-requests 3 --concurrency 1
scenario long-prompts prefill-chunk "$q8" --workload random --input-len 16@0.7+1000@0.3 \
  --output-len 32-96 --num-requests 16 --concurrency 4
scenario preemption kv-memory "$q8" --workload random --input-len 32 --output-len 200 \
  --num-requests 16 --concurrency 8 --kv-memory 12MiB
scenario offline offline-batch "$q8" --workload random --input-len 32 --output-len 32 \
  --num-requests 32 --rate inf
scenario healthy "" "$q8" --workload random --input-len 32 --output-len 16-48 \
  --num-requests 24 --concurrency 4

python3 - "$work" <<'PY'
import glob, json, os, sys
work = sys.argv[1]
rows = []
print(f"{'scenario':<13} {'expected':<22} {'named first':<22} {'metric':<24} {'A meas.':>9} "
      f"{'B pred.':>9} {'B meas.':>9} {'meas/pred':>9}  verdict")
for path in sorted(glob.glob(f"{work}/*.expected"), key=os.path.getmtime):
    name = os.path.basename(path)[:-9]
    expected = open(path).read().strip()
    try:
        advice = json.load(open(f"{work}/{name}.json"))
    except (OSError, ValueError):
        print(f"{name:<13} {expected:<22} {'(failed)':<22}")
        continue
    first = advice.get("headline", "") if not advice["healthy"] else ""
    mark = "" if first == expected else "  <-- WRONG"
    ver = [v for v in advice.get("verification", []) if v["lever"] == first]
    if not ver:
        print(f"{name:<13} {expected or 'nothing':<22} {(first or 'nothing'):<22}{mark}")
        continue
    v = ver[0]
    pb = v["measured_before"] * v["predicted_after"] / v["predicted_before"] if v["predicted_before"] else v["predicted_after"]
    metric = f"{v['metric']} ({v['unit']})" if v["unit"] else v["metric"]
    print(f"{name:<13} {expected:<22} {first:<22} {metric:<24} {v['measured_before']:>9.2f} "
          f"{pb:>9.2f} {v['measured_after']:>9.2f} {100 * v['effect_over_prediction']:>8.0f}%  "
          f"{v['verdict']}{'; ' + v['note'] if v['note'] else ''}{mark}")
PY
echo "(per-scenario advice: $work/NAME.json; commands: $work/commands)"
