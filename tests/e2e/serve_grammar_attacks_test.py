#!/usr/bin/env python3
"""Structured-output grammars cannot stall the engine (issue 53, rows N1 and N2).

Each attack goes to a real `rapide serve` on the 32000-token Llama-2 vocabulary (where a mask
walks a 57507-node trie) while a plain 10-token completion runs; the plain one must finish
within a bound, and the attack must get a 400 naming its construct (refused at admission by
the cost model) or fail on the per-token work limit. `rapide batch` refuses the same lines.
Before the fix: the victim took 14 s next to pattern (.*){10000} (31 s in the red-team run),
and a 5000-optional-property schema cost 66-115 s of CPU before its 400 (148 s in batch).

usage: serve_grammar_attacks_test.py RAPIDE_BINARY SHARED_DIR
"""
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from attack_bodies import anyof_tree, optional_properties, schema  # noqa: E402
from checks import check, report  # noqa: E402
from require_shared import require_shared, shared_dir  # noqa: E402
from serve_fixture import RapideServer  # noqa: E402

BINARY, SHARED = sys.argv[1], shared_dir(sys.argv[2])
MODEL_PATH = "models/llama2-tiny-random/llama-2-tiny-random.gguf"

# The victim shares every engine step with the attack. A step may spend at most the
# per-token work limit on the attack's grammar (1.23 M matcher steps for this vocabulary,
# 0.07-0.2 s on the 2-core CI machine), and an attack fails at the first token over it, so
# the 10-token victim waits at most a few such steps. 5 s leaves 2.5x for a busy machine and
# is a third of what the victim took before the fix (14 s).
VICTIM_BOUND_S = 5.0
# Admission is linear in the schema's size: the 150 KB schema is refused in milliseconds;
# 3 s leaves room for a busy machine (it took 66 s before).
ADMISSION_BOUND_S = 3.0


def post(port, body, timeout=120):
    """(status, parsed body or text, seconds)."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions",
                                     json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
    start = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            status, text = r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode()
    except OSError as e:  # timed out, reset
        return None, str(e), time.monotonic() - start
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = text
    return status, parsed, time.monotonic() - start


# name -> (request fields, what a refusal at admission must name; None: admitted, may fail
# on the per-token limit while generating).
ATTACKS = {
    "guided_regex (.*){2000}": ({"guided_regex": "(.*){2000}"}, "repetition '([^\\n]*){2000}'"),
    "pattern (.*){10000}": (schema({"type": "string", "pattern": "(.*){10000}"}),
                            "'pattern' '(.*){10000}'"),
    "(x?){10000}x{10000}": ({"guided_regex": "(x?){10000}x{10000}"},
                            "repetition '(\"x\"?){10000}'"),
    "anyOf tree of 2^16 leaves": (schema(anyof_tree(16)), "65536 alternatives"),
    "5000 optional properties": (schema(optional_properties(5000)), "5000 optional properties"),
    # Not in the issue: nested repetitions multiply (8000 ways from 60 elements).
    "nested ((x?){20}){20}){20}": ({"grammar": 'root ::= ((("x"?){20}){20}){20}'},
                                   "consecutive parts that can match the empty string"),
    # Inside the static limits but costly per token: 250 nullable copies of .* (~2 M steps
    # per mask here), and (.+){2000}, whose live stacks grow with every byte generated.
    "(.*){250}": ({"guided_regex": "(.*){250}"}, None),
    "(.+){2000}": ({"guided_regex": "(.+){2000}"}, None),
}

VICTIM = {"prompt": "Once upon a time", "max_tokens": 10, "temperature": 0, "ignore_eos": True}


def attack_alongside_victim(server, name, fields, named):
    result = {}

    def attack():
        result["attack"] = post(server.port, {"prompt": "x", "max_tokens": 30, **fields})

    thread = threading.Thread(target=attack)
    thread.start()
    time.sleep(0.02)  # the attack is sent (an admitted one fails within its first tokens)
    status, body, seconds = post(server.port, VICTIM)
    thread.join()
    check(status == 200 and body["usage"]["completion_tokens"] == 10 and
          seconds < VICTIM_BOUND_S,
          f"{name}: the 10-token victim took {seconds:.2f} s (bound {VICTIM_BOUND_S} s)")
    a_status, a_body, a_seconds = result["attack"]
    message = a_body.get("error", {}).get("message", "") if isinstance(a_body, dict) else a_body
    if named is not None:
        check(a_status == 400 and named in message and a_seconds < ADMISSION_BOUND_S,
              f"{name}: refused at admission in {a_seconds:.2f} s: {a_status} {message[:200]}")
    else:
        # Either it fits the per-token limit all along, or it ends on it with a 400 that says
        # so; never a 5xx, never a hang.
        over = a_status == 400 and "per-token limit" in message
        check(a_status == 200 or over, f"{name}: {a_status} in {a_seconds:.2f} s {message[:160]}")


def batch_refuses_the_same_lines():
    lines = [{"custom_id": "plain", "method": "POST", "url": "/v1/completions",
              "body": {"prompt": "Once", "max_tokens": 5, "temperature": 0}},
             {"custom_id": "optional", "method": "POST", "url": "/v1/completions",
              "body": {"prompt": "x", "max_tokens": 5, **schema(optional_properties(5000))}},
             {"custom_id": "regex", "method": "POST", "url": "/v1/completions",
              "body": {"prompt": "x", "max_tokens": 5, "guided_regex": "(.*){2000}"}}]
    with tempfile.TemporaryDirectory() as tmp:
        src, out = os.path.join(tmp, "in.jsonl"), os.path.join(tmp, "out.jsonl")
        with open(src, "w") as f:
            f.write("".join(json.dumps(line) + "\n" for line in lines))
        start = time.monotonic()
        run = subprocess.run([BINARY, "batch", "-m", os.path.join(SHARED, MODEL_PATH), "-i", src,
                              "-o", out, "--progress", "off"], capture_output=True, text=True)
        seconds = time.monotonic() - start
        records = {}
        for path in (out, os.path.join(tmp, "out.errors.jsonl")):  # answers, failed lines
            if os.path.exists(path):
                for line in open(path):
                    r = json.loads(line)
                    if "custom_id" in r:
                        records[r["custom_id"]] = r
    # Model load and the plain line take about a second; the old 5000-property line alone
    # took 148 s.
    check(seconds < 15, f"rapide batch took {seconds:.1f} s (exit {run.returncode})")
    check(records.get("plain", {}).get("response", {}).get("status_code") == 200,
          "batch: the plain line is answered")
    for cid, named in [("optional", "5000 optional properties"), ("regex", "repetition")]:
        r = records.get(cid, {})
        message = (r.get("error") or {}).get("message", "")
        check(named in message and (r.get("response") or {}).get("status_code") == 400,
              f"batch: line '{cid}' refused naming '{named}': {message[:200]}")


def main():
    require_shared(SHARED, MODEL_PATH)
    with RapideServer(BINARY, ["-m", os.path.join(SHARED, MODEL_PATH)]) as server:
        status, _, seconds = post(server.port, VICTIM)
        print(f"unloaded victim: {status} in {seconds:.3f} s")
        for name, (fields, named) in ATTACKS.items():
            attack_alongside_victim(server, name, fields, named)
        status, body, _ = post(server.port, VICTIM)
        check(status == 200, "the server still answers after the attacks")
    batch_refuses_the_same_lines()
    return report()


if __name__ == "__main__":
    sys.exit(main())
