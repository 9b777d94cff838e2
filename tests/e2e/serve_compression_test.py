#!/usr/bin/env python3
"""End-to-end test of the "compression" request field (issue 24) over HTTP, on
TinyStories-656K served with stories260K as --compressor-model (another vocabulary).

usage: serve_compression_test.py RAPIDE_BINARY SHARED_DIR
Both routes compress the <context>-marked passages of the prompt before admission: usage
reports the original and compressed prompt tokens, the compression time and whether it was
applied; the instructions and question are kept verbatim (checked through the served prompt
length: /tokenize of the expected untouched parts); a request whose compression cannot pay is
served uncompressed and says why; malformed fields are 400s naming "compression".
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from checks import check, report  # noqa: E402
from require_shared import require_shared, shared_dir  # noqa: E402
from serve_fixture import RapideServer  # noqa: E402

BINARY, SHARED = sys.argv[1], shared_dir(sys.argv[2])
MODEL = os.path.join(SHARED, "models/tinystories-656k/TinyStories-656K-F16.gguf")
SCORER = os.path.join(SHARED, "models/stories260K/stories260K.gguf")
TEXT = os.path.join(SHARED, "reference/text/stories-eval.txt")
QUESTION = "Ben put the big blocks at the bottom, and Lily put the"


def context():
    with open(TEXT) as f:
        return f.read().strip()


def usage_of(s, path, body):
    status, _, text = s.curl(path, body)
    check(status == 200, f"{path} with compression -> 200 ({text[:300]})")
    if status != 200:
        return {}
    return json.loads(text).get("usage", {})


def test_completions(s):
    prompt = f"Finish the sentence.\n<context>{context()}</context>\n{QUESTION}"
    forced = {"ratio": 0.5, "force": True}
    u = usage_of(s, "/v1/completions",
                 {"prompt": prompt, "max_tokens": 4, "temperature": 0, "compression": forced})
    c = u.get("compression", {})
    check(c.get("applied") is True, f"completions: compression applied ({c})")
    original, compressed = c.get("original_prompt_tokens", 0), c.get("compressed_prompt_tokens")
    check(compressed == u.get("prompt_tokens"),
          f"usage.prompt_tokens is the compressed prompt's ({u.get('prompt_tokens')} vs {c})")
    check(0.35 * original <= compressed <= 0.8 * original,
          f"ratio 0.5 of the context: {original} -> {compressed} prompt tokens")
    check(c.get("compression_ms", -1) > 0, f"compression time reported ({c})")
    check(c.get("passages") == 5 and 0 < c.get("kept_passages", 0) <= 5, f"passages ({c})")
    # The uncompressed prompt, tags stripped, has the original length.
    plain = prompt.replace("<context>", "").replace("</context>", "")
    status, _, text = s.curl("/tokenize", {"prompt": plain})
    count = json.loads(text).get("count") if status == 200 else None
    check(count is None or abs(count - original) <= 2,
          f"original_prompt_tokens {original} matches /tokenize of the plain prompt ({count})")
    # Greedy decoding of the same request twice: the same compression, the same answer.
    body = {"prompt": prompt, "max_tokens": 8, "temperature": 0, "compression": forced}
    a = s.curl("/v1/completions", body)[2]
    b = s.curl("/v1/completions", body)[2]
    check(json.loads(a)["choices"][0]["text"] == json.loads(b)["choices"][0]["text"],
          "compressed greedy answers are deterministic")


def test_chat(s):
    messages = [{"role": "system", "content": "You finish sentences."},
                {"role": "user", "content": f"<context>{context()}</context>"},
                {"role": "user", "content": QUESTION}]
    u = usage_of(s, "/v1/chat/completions",
                 {"messages": messages, "max_tokens": 4,
                  "compression": {"ratio": 0.3, "force": True}})
    c = u.get("compression", {})
    check(c.get("applied") is True and
          c.get("compressed_prompt_tokens", 1e9) < 0.6 * c.get("original_prompt_tokens", 0),
          f"chat: the context message is compressed ({c})")


def test_switch_off(s):
    # Without force, a context this short cannot pay for its scoring passes... or can: either
    # way the usage says which, and a refusal carries the estimate.
    prompt = f"<context>{context()}</context>\n{QUESTION}"
    c = usage_of(s, "/v1/completions", {"prompt": prompt, "max_tokens": 1,
                                         "compression": {"ratio": 0.5}}).get("compression", {})
    check("estimated_scoring_ms" in c and "estimated_saved_prefill_ms" in c,
          f"the cost estimate is reported ({c})")
    if not c.get("applied"):
        check("would cost" in c.get("reason", ""), f"switched off with the reason ({c})")
    # A context too small to score passes through untouched.
    tiny = usage_of(s, "/v1/completions",
                    {"prompt": "<context>Tim ran.</context> Why?", "max_tokens": 1,
                     "compression": {"ratio": 0.5, "force": True}}).get("compression", {})
    check(tiny.get("applied") is False and
          tiny.get("original_prompt_tokens") == tiny.get("compressed_prompt_tokens"),
          f"a tiny context passes through ({tiny})")
    # No field: the prompt is served as sent, and usage has no compression entry.
    status, _, text = s.curl("/v1/completions", {"prompt": "Once upon a time", "max_tokens": 1})
    check(status == 200 and "compression" not in json.loads(text)["usage"],
          "no field, no usage.compression")


def test_errors(s):
    for path, body in (("/v1/completions", {"prompt": "<context>a</context> q"}),
                       ("/v1/chat/completions", {"messages": [{"role": "user", "content": "q"}]})):
        for field, words in (({"ratio": 0}, "(0, 1]"), ({"ratio": 1.5}, "(0, 1]"),
                             ({"ratio": "half"}, "number"), ({}, "ratio"),
                             ("0.5", "must be an object"), ({"ratio": 0.5, "question": 3}, "string"),
                             ({"ratio": 0.5, "force": "yes"}, "boolean"),
                             ({"ratio": 0.5, "budget": 9}, "no field 'budget'")):
            status, _, text = s.curl(path, dict(body, compression=field))
            try:
                error = json.loads(text)["error"]
            except (ValueError, KeyError):
                error = {}
            check(status == 400 and error.get("param") == "compression" and
                  words in error.get("message", ""),
                  f"{path} compression={json.dumps(field)} -> 400 naming '{words}' "
                  f"(got {status}: {text[:200]})")
    for prompt, words in (("<context>open", "never closed"), (["a", "b"], "one string")):
        status, _, text = s.curl("/v1/completions",
                                 {"prompt": prompt, "compression": {"ratio": 0.5}})
        check(status == 400 and words in text, f"prompt {prompt!r} -> 400 '{words}' ({text[:200]})")


def main():
    require_shared(MODEL)
    require_shared(SCORER)
    require_shared(TEXT)
    with RapideServer(BINARY, ["-m", MODEL, "--compressor-model", SCORER, "--ctx-size", "2048",
                               "-t", "1"]) as s:
        test_completions(s)
        test_chat(s)
        test_switch_off(s)
        test_errors(s)
    return report()


if __name__ == "__main__":
    sys.exit(main())
