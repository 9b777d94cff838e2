#!/usr/bin/env python3
"""GET /v1/engine/state and `rapide advise --url` against a real `rapide serve` on stories260K.

usage: advise_serve_test.py RAPIDE_BINARY SHARED_DIR
The state is behind the API key, records the requests just served (steps, requests, prefix
sharing), and `rapide advise --url` reads it and walks the six questions.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from checks import check, report  # noqa: E402
from require_shared import require_shared, shared_dir  # noqa: E402
from serve_fixture import RapideServer  # noqa: E402

BINARY, SHARED = sys.argv[1], shared_dir(sys.argv[2])
MODEL = os.path.join(SHARED, "models/stories260K/stories260K.gguf")
KEY = "sk-advise"


def main():
    require_shared(SHARED, "models/stories260K/stories260K.gguf")
    with RapideServer(BINARY, ["-m", MODEL, "--api-key", KEY, "--prefix-cache", "off"]) as s:
        try:
            system = "Once upon a time there was a little girl who liked to play. " * 6
            for i in range(6):
                status, _, body = s.curl("/v1/completions",
                                         {"prompt": system + f"Story {i}:", "max_tokens": 8},
                                         key=KEY)
                check(status == 200, f"completion {i}: {status} {body[:120]}")
            status, _, _ = s.curl("/v1/engine/state")
            check(status == 401, f"/v1/engine/state without the key is 401 (got {status})")
            status, _, body = s.curl("/v1/engine/state", key=KEY)
            check(status == 200, f"/v1/engine/state: {status} {body[:200]}")
            state = json.loads(body)
            check(state.get("kind") == "rapide.engine_state", "the state says what it is")
            check(len(state["requests"]) == 6, f"6 requests recorded, got {len(state['requests'])}")
            check(state["counters"]["steps"] > 0 and len(state["steps"]) > 0, "steps recorded")
            check(state["sharing"]["sharing_prompts"] == 5,
                  f"5 of 6 prompts share a prefix: {state['sharing']}")
            check(state["config"]["prefix_cache"] is False, "the switches are recorded")
            check(state["machine"]["read_bandwidth"] > 0, "the read bandwidth is measured")
            status, _, _ = s.curl("/v1/engine/state", key=KEY, method="POST")
            check(status == 405, f"POST /v1/engine/state is 405 (got {status})")
            out = subprocess.run([BINARY, "advise", "--url", s.url(""), "--api-key", KEY, "--json"],
                                 capture_output=True, text=True, timeout=120)
            check(out.returncode == 0, f"rapide advise --url exits 0: {out.stderr[-400:]}")
            advice = json.loads(out.stdout)
            check(advice.get("headline") == "prefix-cache",
                  f"the advisor names the prefix cache first: {advice.get('headline')}")
            out = subprocess.run([BINARY, "advise", "--url", s.url(""), "--api-key", "wrong"],
                                 capture_output=True, text=True, timeout=120)
            check(out.returncode != 0 and "401" in out.stderr,
                  f"a wrong key is a clear error: {out.returncode} {out.stderr[-200:]}")
        except Exception:
            print(s.log()[-4000:])
            raise
    return report()


if __name__ == "__main__":
    sys.exit(main())
