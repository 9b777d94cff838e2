#!/usr/bin/env python3
"""End-to-end test of `rapide serve` over real HTTP with curl, on stories260K.

usage: serve_curl_test.py RAPIDE_BINARY SHARED_DIR
Covers completions, chat, streaming (== non-streamed for the same seed), n, logprobs, stop,
errors (400 / 401 / 404 / 405 / 413), a client disconnect freeing its KV (via /metrics),
and the SIGTERM drain (running request completes, exit status 0).
"""
import json
import os
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from checks import check, report  # noqa: E402
from require_shared import require_shared, shared_dir  # noqa: E402
from serve_fixture import RapideServer, sse_events  # noqa: E402

BINARY, SHARED = sys.argv[1], shared_dir(sys.argv[2])
MODEL = os.path.join(SHARED, "models/stories260K/stories260K.gguf")
KEY = "sk-e2e-secret"



def expect_error(server, path, body, status, param=None, key=KEY, **kw):
    got, headers, text = server.curl(path, body, key=key, **kw)
    try:
        error = json.loads(text)["error"]
        shaped = all(k in error for k in ("message", "type", "param", "code"))
    except (ValueError, KeyError, TypeError):
        error, shaped = {}, False
    ok = got == status and shaped and (param is None or error.get("param") == param)
    check(ok, f"{path} {json.dumps(body)[:60] if body is not None else ''} -> {status}"
              f" (got {got}: {text[:200]})")
    return headers


def stream_text(events, chat):
    text = {}
    for e in events:
        for c in e.get("choices", []):
            piece = c["delta"].get("content", "") if chat else c["text"]
            text[c["index"]] = text.get(c["index"], "") + (piece or "")
    return text


def test_basics(s):
    status, _, body = s.curl("/health")
    check(status == 200 and json.loads(body)["status"] == "ready", "/health ready")
    status, _, body = s.curl("/v1/models", key=KEY)
    models = json.loads(body)
    check(status == 200 and models["data"][0]["id"] == "stories260K", f"/v1/models: {body[:120]}")

    greedy = {"model": "stories260K", "prompt": "Once upon a time", "max_tokens": 24,
              "temperature": 0}
    status, _, body = s.curl("/v1/completions", greedy, key=KEY)
    r = json.loads(body)
    text = r["choices"][0]["text"]
    check(status == 200 and text.startswith(", there was a little girl named Lily"),
          f"greedy completion matches the reference: {text!r}")
    u = r["usage"]
    check(u["prompt_tokens"] > 0 and u["completion_tokens"] == 24 and
          u["total_tokens"] == u["prompt_tokens"] + 24 and r["object"] == "text_completion"
          and r["choices"][0]["finish_reason"] == "length", f"usage and shape: {u}")

    # Streamed == non-streamed for the same seed (sampled, not greedy).
    sampled = {"prompt": "The cat", "max_tokens": 40, "temperature": 0.9, "seed": 1234}
    _, _, body = s.curl("/v1/completions", sampled, key=KEY)
    whole = json.loads(body)["choices"][0]["text"]
    status, headers, body = s.curl("/v1/completions",
                                   dict(sampled, stream=True,
                                        stream_options={"include_usage": True}), key=KEY)
    events, done = sse_events(body)
    check(status == 200 and headers.get("content-type", "").startswith("text/event-stream")
          and done, "stream is SSE ending with [DONE]")
    check(stream_text(events, False).get(0) == whole, "streamed completion == non-streamed")
    check(events[-1]["choices"] == [] and events[-1]["usage"]["completion_tokens"] > 0 and
          all(e["usage"] is None for e in events[:-1]), "include_usage: last chunk has usage")
    check(events[-2]["choices"][0]["finish_reason"] in ("stop", "length"), "finish_reason sent")

    chat = {"model": "stories260K", "messages": [{"role": "user", "content": "Tell a story"}],
            "max_completion_tokens": 30, "temperature": 0.7, "seed": 7}
    status, _, body = s.curl("/v1/chat/completions", chat, key=KEY)
    r = json.loads(body)
    msg = r["choices"][0]["message"]
    check(status == 200 and r["object"] == "chat.completion" and msg["role"] == "assistant"
          and "usage" in r, f"chat completion: {body[:160]}")
    status, _, body = s.curl("/v1/chat/completions", dict(chat, stream=True), key=KEY)
    events, done = sse_events(body)
    check(done and events[0]["choices"][0]["delta"].get("role") == "assistant" and
          events[0]["object"] == "chat.completion.chunk", "chat stream opens with the role")
    check(stream_text(events, True).get(0) == msg["content"], "streamed chat == non-streamed")

    # n choices, logprobs, stop strings, logit_bias.
    status, _, body = s.curl("/v1/completions", {"prompt": "Lily", "n": 3, "max_tokens": 8,
                                                 "temperature": 1.0, "seed": 5}, key=KEY)
    r = json.loads(body)
    check(status == 200 and sorted(c["index"] for c in r["choices"]) == [0, 1, 2] and
          0 < r["usage"]["completion_tokens"] <= 24 and len({c["text"] for c in r["choices"]}) > 1,
          f"n=3 distinct choices: {r.get('usage')}")
    status, _, body = s.curl("/v1/completions", dict(greedy, logprobs=2, max_tokens=5), key=KEY)
    lp = json.loads(body)["choices"][0]["logprobs"]
    check(status == 200 and len(lp["tokens"]) == 5 and len(lp["top_logprobs"][0]) == 2 and
          all(x <= 0 for x in lp["token_logprobs"]), f"completion logprobs: {lp}")
    status, _, body = s.curl("/v1/chat/completions",
                             dict(chat, logprobs=True, top_logprobs=3, max_completion_tokens=4),
                             key=KEY)
    content = json.loads(body)["choices"][0]["logprobs"]["content"]
    check(status == 200 and len(content) >= 1 and len(content[0]["top_logprobs"]) == 3 and
          "bytes" in content[0], "chat logprobs shape")
    status, _, body = s.curl("/v1/completions", dict(greedy, stop=[" girl"]), key=KEY)
    c = json.loads(body)["choices"][0]
    # vLLM's stop_reason names the string that matched; null when none did.
    check(c["text"] == ", there was a little" and c["finish_reason"] == "stop" and
          c["stop_reason"] == " girl", f"stop string: {c}")
    status, _, body = s.curl("/v1/completions", dict(greedy, stop="Lily", stream=True), key=KEY)
    events, _ = sse_events(body)
    check(stream_text(events, False).get(0) == ", there was a little girl named ",
          "stop string while streaming")
    last = [e["choices"][0] for e in events if e["choices"] and e["choices"][0]["finish_reason"]]
    check(len(last) == 1 and last[0]["stop_reason"] == "Lily", f"streamed stop_reason: {last}")
    status, _, body = s.curl("/v1/completions", dict(greedy, max_tokens=3), key=KEY)
    c = json.loads(body)["choices"][0]
    check(c["finish_reason"] == "length" and c["stop_reason"] is None, f"no stop_reason: {c}")


def test_errors(s):
    expect_error(s, "/v1/completions", None, 400, raw="{not json")
    expect_error(s, "/v1/completions", {"prompt": "x", "temperature": "hot"}, 400, "temperature")
    expect_error(s, "/v1/completions", {"prompt": "x", "top_p": 1.5}, 400, "top_p")
    expect_error(s, "/v1/completions", {"max_tokens": 3}, 400, "prompt")
    expect_error(s, "/v1/completions", {"prompt": "x", "n": 0}, 400, "n")
    expect_error(s, "/v1/completions", {"prompt": list(range(5, 605))}, 400, "prompt")
    _, _, body = s.curl("/v1/models", key=KEY)
    context = json.loads(body)["data"][0]["max_model_len"]
    _, _, body = s.curl("/v1/completions", {"prompt": [5] * (context + 1)}, key=KEY)
    check(json.loads(body)["error"]["code"] == "context_length_exceeded",
          f"prompt longer than the context: {body}")
    expect_error(s, "/v1/chat/completions", {"messages": []}, 400, "messages")
    expect_error(s, "/v1/completions", {"prompt": "x", "model": "gpt-4"}, 404, "model")
    expect_error(s, "/v1/nothing", {"prompt": "x"}, 404)
    headers = expect_error(s, "/v1/completions", None, 405, method="GET")
    check(headers.get("allow") == "POST", "405 names the allowed method")
    expect_error(s, "/v1/completions", {"prompt": "x"}, 401, key=None)
    headers = expect_error(s, "/v1/models", None, 401, key="wrong")
    check("bearer" in headers.get("www-authenticate", "").lower(), "401 asks for a Bearer key")
    big = json.dumps({"prompt": "x" * (300 * 1024)})
    expect_error(s, "/v1/completions", None, 413, raw=big)
    status, _, _ = s.curl("/health")
    check(status == 200, "server fine after the errors")


def test_disconnect_frees_kv(s):
    # Enough work that the request is surely still running when the client goes: stories260K
    # decodes ~10k tok/s here, so one 450-token stream could finish before the hang-up.
    n_choices = 32
    body = json.dumps({"prompt": "Once upon a time", "max_tokens": 1500, "ignore_eos": True,
                       "stream": True, "temperature": 0, "n": n_choices})
    aborted_before = s.metrics().get("rapide_engine_requests_aborted_total", 0)
    proc = subprocess.Popen(["curl", "-sS", "-N", "-H", f"Authorization: Bearer {KEY}",
                             "-H", "Content-Type: application/json", "-d", body,
                             s.url("/v1/completions")], stdout=subprocess.PIPE)
    proc.stdout.readline()  # the first chunk arrived: the request is running
    m = s.metrics()
    check(m["rapide_running_sequences"] >= 1 and m["rapide_kv_blocks_used"] > 0,
          f"running with KV held: {m['rapide_kv_blocks_used']} blocks")
    proc.kill()
    proc.wait()
    start = time.time()
    while time.time() - start < 5:
        m = s.metrics()
        if m["rapide_running_sequences"] == 0 and m["rapide_kv_blocks_used"] == 0:
            break
        time.sleep(0.02)
    check(m["rapide_kv_blocks_used"] == 0 and m["rapide_running_sequences"] == 0 and
          m["rapide_engine_requests_aborted_total"] >= aborted_before + 1,
          f"disconnect aborted the request and freed its KV in {time.time() - start:.3f} s")
    check(m.get('rapide_requests_total{endpoint="completions",status="499"}', 0) >= 1,
          "/metrics counts the disconnect as status 499")
    check(m["rapide_time_to_first_token_seconds_count"] > 0 and
          m["rapide_generation_tokens_total"] > 0, "/metrics histograms and counters")


def test_sigterm_drain():
    with RapideServer(BINARY, ["-m", MODEL, "--drain-timeout", "30"]) as s:
        result = {}

        def long_request():
            result["r"] = s.curl("/v1/completions", {"prompt": "Once upon a time",
                                                     "max_tokens": 300, "ignore_eos": True,
                                                     "temperature": 0}, timeout=120)

        t = threading.Thread(target=long_request)
        t.start()
        deadline = time.time() + 10
        while time.time() < deadline and s.metrics()["rapide_running_sequences"] < 1:
            time.sleep(0.01)
        s.proc.send_signal(signal.SIGTERM)
        t.join()
        code = s.proc.wait(timeout=60)
        status, _, body = result["r"]
        check(status == 200 and json.loads(body)["usage"]["completion_tokens"] == 300,
              "the running request completed during the drain")
        check(code == 0, f"SIGTERM drain exits 0 (got {code})")
        check("draining" in s.log(), "the log says it drained")


def main():
    require_shared(SHARED, "models/stories260K/stories260K.gguf")
    with RapideServer(BINARY, ["-m", MODEL, "--api-key", KEY, "--max-body", "256KiB"]) as s:
        try:
            test_basics(s)
            test_errors(s)
            test_disconnect_frees_kv(s)
        except Exception:
            print(s.log()[-4000:])
            raise
    test_sigterm_drain()
    return report()


if __name__ == "__main__":
    sys.exit(main())
