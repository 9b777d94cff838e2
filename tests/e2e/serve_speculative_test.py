#!/usr/bin/env python3
"""End-to-end test of the per-request "speculative" field, over HTTP with curl and in
`rapide batch` lines, on stories260K served with --spec ngram.

usage: serve_speculative_test.py RAPIDE_BINARY SHARED_DIR
A request may turn speculation off (no guesses verified for it, /metrics says so) or choose
its own k; greedy text is the same either way. Asking for a proposer the server does not run
("draft" without --draft-model) or more guesses than it allows is a 400 naming "speculative",
on both routes and as a batch line's error.
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from checks import check, report  # noqa: E402
from require_shared import require_shared, shared_dir  # noqa: E402
from serve_fixture import RapideServer  # noqa: E402

BINARY, SHARED = sys.argv[1], shared_dir(sys.argv[2])
MODEL = os.path.join(SHARED, "models/stories260K/stories260K.gguf")
# A story, then its beginning again: the n-gram proposer finds the copy.
PROMPT = ("Once upon a time, there was a little girl named Lily. She loved to play. "
          "Once upon a time, there was a little girl named Lily. She")
GREEDY = {"prompt": PROMPT, "max_tokens": 48, "temperature": 0}
MESSAGES = [{"role": "user", "content": "hi"}]


def proposed(s):
    return s.metrics().get("rapide_spec_proposed_tokens_total", 0)


# A 48-token completion takes well under a second: a stuck engine fails the check after this
# long instead of after curl's 60 s (issue 53: an off-by-one in the accepted count once hung
# speculative requests at 0 % CPU).
REQUEST_TIMEOUT = 20


def completion(s, body):
    status, _, text = s.curl("/v1/completions", body, timeout=REQUEST_TIMEOUT)
    check(status == 200, f"completion {json.dumps(body.get('speculative'))} -> 200 ({text[:200]})")
    return json.loads(text)["choices"][0]["text"] if status == 200 else None


def refused(s, path, body, words):
    status, _, text = s.curl(path, body, timeout=REQUEST_TIMEOUT)
    try:
        error = json.loads(text)["error"]
    except (ValueError, KeyError):
        error = {}
    check(status == 400 and error.get("param") == "speculative" and
          words in error.get("message", ""),
          f"{path} speculative={json.dumps(body['speculative'])} -> 400 naming '{words}' "
          f"(got {status}: {text[:200]})")


def test_server(s):
    before = proposed(s)
    served = completion(s, GREEDY)
    after_default = proposed(s)
    check(after_default > before, f"the server's ngram speculation guessed ({before} -> "
                                  f"{after_default} proposed)")
    off = completion(s, dict(GREEDY, speculative={"mode": "off"}))
    check(proposed(s) == after_default, "mode off: no guess verified for the request")
    check(off == served, "mode off: the same greedy text")
    two = completion(s, dict(GREEDY, speculative={"mode": "ngram", "tokens": 2}))
    check(two == served, "tokens 2: the same greedy text")
    auto = completion(s, dict(GREEDY, speculative={"tokens": "auto"}))
    check(auto == served, "tokens auto: the same greedy text")
    status, _, text = s.curl("/v1/chat/completions",
                             {"messages": MESSAGES, "max_tokens": 8,
                              "speculative": {"mode": "off"}}, timeout=REQUEST_TIMEOUT)
    check(status == 200, f"chat with speculative off -> 200 ({text[:200]})")

    for path, body in (("/v1/completions", {"prompt": "x"}),
                       ("/v1/chat/completions", {"messages": MESSAGES})):
        refused(s, path, dict(body, speculative={"mode": "draft"}), "no draft model is loaded")
        refused(s, path, dict(body, speculative={"tokens": 9}), "limit of 8")
        refused(s, path, dict(body, speculative={"mode": "medusa"}), "speculative.mode")
        refused(s, path, dict(body, speculative="ngram"), "must be an object")


def test_batch():
    with tempfile.TemporaryDirectory() as d:
        lines = [
            {"custom_id": "off", "method": "POST", "url": "/v1/completions",
             "body": dict(GREEDY, speculative={"mode": "off"})},
            {"custom_id": "k2", "method": "POST", "url": "/v1/completions",
             "body": dict(GREEDY, speculative={"tokens": 2})},
            {"custom_id": "draft", "method": "POST", "url": "/v1/completions",
             "body": dict(GREEDY, speculative={"mode": "draft"})},
        ]
        inp, out = os.path.join(d, "in.jsonl"), os.path.join(d, "out.jsonl")
        errs = os.path.join(d, "errors.jsonl")
        with open(inp, "w") as f:
            f.write("".join(json.dumps(line) + "\n" for line in lines))
        try:
            run = subprocess.run([BINARY, "batch", "-m", MODEL, "-i", inp, "-o", out,
                                  "--errors", errs, "--spec", "ngram", "--spec-tokens", "4",
                                  "--progress", "off"],
                                 capture_output=True, text=True, timeout=6 * REQUEST_TIMEOUT)
        except subprocess.TimeoutExpired:
            check(False, f"rapide batch ended within {6 * REQUEST_TIMEOUT} s")
            return
        check(run.returncode == 0, f"rapide batch ran ({run.stderr[-300:]})")
        texts = {}
        with open(out) as f:
            for line in f:
                r = json.loads(line)
                texts[r["custom_id"]] = r["response"]["body"]["choices"][0]["text"]
        check(texts.get("off") is not None and texts.get("off") == texts.get("k2"),
              "batch: off and k=2 lines give the same greedy text")
        errors = ""
        if os.path.exists(errs):
            with open(errs) as f:
                errors = f.read()
        check("no draft model is loaded" in errors,
              f"batch: the draft line is refused with the reason ({errors[:200]})")
        check("draft" not in texts, "batch: the draft line produced no result")


def main():
    require_shared(MODEL)
    with RapideServer(BINARY, ["-m", MODEL, "--spec", "ngram", "--spec-tokens", "4"]) as s:
        test_server(s)
    test_batch()
    return report()


if __name__ == "__main__":
    sys.exit(main())
