#!/usr/bin/env python3
"""`--kv-memory auto`, the default (issue 51, "Start-up depends on the moment").

usage: serve_kv_auto_test.py RAPIDE_BINARY SHARED_DIR
The fixed 1 GiB default refused to start a 0.7 MiB model while other jobs held memory. Now a
server on stories260K without --kv-memory sizes its KV cache to every sequence at full
context, logs that choice with its numbers, and GET /v1/engine/state shows the same budget;
--max-seqs and -c change it; an explicit --kv-memory still wins and logs no auto line.
"""
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from checks import check, report  # noqa: E402
from require_shared import require_shared, shared_dir  # noqa: E402
from serve_fixture import RapideServer  # noqa: E402

BINARY, SHARED = sys.argv[1], shared_dir(sys.argv[2])
MODEL = os.path.join(SHARED, "models/stories260K/stories260K.gguf")
AUTO_LINE = re.compile(r"engine: kv memory auto: (.*)")


def state(server):
    status, _, body = server.curl("/v1/engine/state")
    check(status == 200, f"/v1/engine/state: {status}")
    return json.loads(body)


def kv_bytes(s):
    c = s["config"]
    return c["kv_total_blocks"] * c["kv_block_size"] * s["model"]["kv_bytes_per_token"]


def serve(args, expect):
    with RapideServer(BINARY, ["-m", MODEL, "-t", "1"] + args) as s:
        try:
            expect(s, state(s), AUTO_LINE.findall(s.log()))
            status, _, body = s.curl("/v1/completions", {"prompt": "Once upon", "max_tokens": 4})
            check(status == 200, f"{args}: a completion runs ({status} {body[:120]})")
        except Exception:
            print(s.log()[-4000:])
            raise


def default(s, st, lines):
    check(len(lines) == 1, f"one 'kv memory auto' line at start-up (got {lines})")
    context, seqs = st["model"]["max_context"], st["config"]["max_seqs"]
    per_token = st["model"]["kv_bytes_per_token"]
    blocks = -(-context // 16)
    check(st["config"]["kv_memory"] == "auto", f"kv_memory is auto ({st['config']['kv_memory']})")
    check(kv_bytes(st) == seqs * blocks * 16 * per_token,
          f"the budget holds {seqs} sequences of {context} positions: {kv_bytes(st)} bytes")
    check(kv_bytes(st) < 256 << 20, f"a tiny model gets a small budget, not 1 GiB ({kv_bytes(st)})")
    if lines:
        check(f"(context {context} x {seqs} sequences x {per_token} B/token; " in lines[0],
              f"the line names context, sequences and bytes per token: {lines[0]}")
        check(re.search(r"[\d.]+ [KMGT]iB available\)", lines[0]) is not None,
              f"the line names the memory available: {lines[0]}")
    print("default choice:", lines[0] if lines else None)


def smaller(s, st, lines):
    check(len(lines) == 1 and "(context 64 x 3 sequences x " in lines[0],
          f"-c 64 --max-seqs 3 in the line: {lines}")
    check(st["config"]["kv_total_blocks"] == 3 * 4,
          f"3 sequences x 4 blocks of 16 ({st['config']['kv_total_blocks']})")


def explicit(s, st, lines):
    check(lines == [], f"an explicit --kv-memory logs no auto line ({lines})")
    check(st["config"]["kv_memory"] == "3MiB", f"kv_memory is 3MiB ({st['config']['kv_memory']})")
    block = 16 * st["model"]["kv_bytes_per_token"]
    check(3 << 20 >= kv_bytes(st) > (3 << 20) - block, f"3 MiB of blocks ({kv_bytes(st)} bytes)")


def main():
    require_shared(SHARED, "models/stories260K/stories260K.gguf")
    serve([], default)
    serve(["-c", "64", "--max-seqs", "3"], smaller)
    serve(["--kv-memory", "3MiB"], explicit)
    return report()


if __name__ == "__main__":
    sys.exit(main())
