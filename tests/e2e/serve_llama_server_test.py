#!/usr/bin/env python3
"""llama-server's native endpoints on `rapide serve` (issue 51), on stories260K.

usage: serve_llama_server_test.py RAPIDE_BINARY SHARED_DIR

The expectations come from llama.cpp's server README and its tests
(tools/server/tests/unit/test_completion.py, test_infill.py, which run this same
stories260K): "I believe the meaning of life is" evaluates 18 prompt tokens, n_predict 8
predicts 8 and stops with stop_type "limit"; the processed prompt reads "<s> " + prompt;
n_probs 10 gives 10 top_logprobs per token; a stream's last event has stop: true and the
timings. Greedy text is llama.cpp's own (shared/reference/greedy, llama-simple).
Each endpoint answered 404 before these routes existed.
"""
import json
import os
import re
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from checks import check, report  # noqa: E402
from require_shared import require_shared, shared_dir  # noqa: E402
from serve_fixture import RapideServer  # noqa: E402

BINARY, SHARED = sys.argv[1], shared_dir(sys.argv[2])
MODEL = os.path.join(SHARED, "models/stories260K/stories260K.gguf")
GREEDY = os.path.join(SHARED, "reference/greedy/stories260K__Once_upon_a_time.txt")
require_shared(SHARED, "models/stories260K/stories260K.gguf",
               "reference/greedy/stories260K__Once_upon_a_time.txt")
KEY = "sk-llama-e2e"
LIFE = "I believe the meaning of life is"


def post(s, path, body, key=KEY):
    status, headers, text = s.curl(path, body, key=key)
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


def native_events(payload):
    """llama-server's native stream: "data: {json}" events, no [DONE]."""
    events = []
    for block in payload.split("\n\n"):
        if not block:
            continue
        assert block.startswith("data: "), repr(block)
        data = block[len("data: "):]
        assert data != "[DONE]", "llama-server's /completion stream has no [DONE]"
        events.append(json.loads(data))
    return events


def error_names(body, words):
    msg = json.dumps(body).lower() if not isinstance(body, str) else body.lower()
    return all(w.lower() in msg for w in words)


def test_completion(s):
    # test_completion.py::test_completion, first case.
    status, body = post(s, "/completion", {"prompt": LIFE, "n_predict": 8})
    ok = status == 200 and isinstance(body, dict)
    check(ok, f"POST /completion -> 200 (got {status}: {str(body)[:200]})")
    if not ok:
        return
    t = body.get("timings", {})
    check(body.get("tokens_evaluated") == 18, f"tokens_evaluated 18 (got {body.get('tokens_evaluated')})")
    check(t.get("prompt_n", 0) + t.get("cache_n", 0) == 18 and body.get("tokens_cached") == t.get("cache_n"),
          f"timings.prompt_n + cache_n == 18 (got {t})")
    check(t.get("predicted_n") == 8 and body.get("tokens_predicted") == 8, f"predicted_n 8 (got {t})")
    check(body.get("truncated") is False, "truncated false")
    check(isinstance(body.get("has_new_line"), bool), "has_new_line is a bool")
    check(body.get("stop") is True and body.get("stop_type") == "limit"
          and body.get("stopping_word") == "", f"stop true, stop_type limit (got {body.get('stop_type')})")
    check(body.get("tokens") == [], "tokens empty without return_tokens")
    check(isinstance(body.get("content"), str) and len(body["content"]) > 0, "content is text")
    for k in ("prompt_ms", "prompt_per_second", "predicted_ms", "predicted_per_token_ms",
              "predicted_per_second"):
        check(isinstance(t.get(k), (int, float)) and t[k] >= 0, f"timings.{k} is a number")
    gs = body.get("generation_settings", {})
    check(gs.get("n_predict") == 8 and isinstance(gs.get("seed"), int),
          f"generation_settings.n_predict 8 and a seed (got {str(gs)[:200]})")
    check(body.get("model") == "stories260K", f"model is the alias (got {body.get('model')})")
    check(body.get("id_slot") == -1, "id_slot -1 by default")

    # return_tokens: the ids of the content.
    status, body = post(s, "/completion", {"prompt": LIFE, "n_predict": 8, "return_tokens": True,
                                           "temperature": 0})
    toks = body.get("tokens", []) if isinstance(body, dict) else []
    check(status == 200 and len(toks) == 8 and all(isinstance(x, int) for x in toks),
          f"return_tokens gives 8 ids (got {toks})")
    if status == 200:
        # After the prompt's ids they read as the content (alone, /detokenize would drop the
        # leading SentencePiece space).
        _, prompt = post(s, "/tokenize", {"content": LIFE, "add_special": True})
        _, detok = post(s, "/detokenize", {"tokens": prompt["tokens"] + toks})
        check(detok.get("content") == LIFE + body["content"],
              f"the tokens detokenize to the content ({detok} vs {body['content']!r})")


def test_greedy_and_stop(s):
    with open(GREEDY) as f:
        reference = f.read()
    prefix = "<s> Once upon a time"
    assert reference.startswith(prefix)
    continuation = reference[len(prefix):]
    status, body = post(s, "/completion", {"prompt": "Once upon a time", "n_predict": 24,
                                           "temperature": 0})
    ok = status == 200 and continuation.startswith(body.get("content", "\0")) and len(body["content"]) > 40
    check(ok, f"greedy (temperature 0) continues as llama.cpp does (got {str(body)[:200]})")
    check(status == 200 and body.get("prompt") == prefix,
          f"'prompt' is the processed prompt with BOS: {body.get('prompt') if status == 200 else ''!r}")
    # A stop word: the content ends before it; stop_type "word" names it.
    status, body = post(s, "/completion", {"prompt": "Once upon a time", "n_predict": 64,
                                           "temperature": 0, "stop": ["park"]})
    want = continuation[:continuation.index("park")]
    check(status == 200 and body.get("content") == want and body.get("stop_type") == "word"
          and body.get("stopping_word") == "park",
          f"stop ['park'] -> stop_type word, stopping_word park (got {str(body)[:240]})")
    # The same seed gives the same text; different seeds differ (test_completion.py).
    texts = []
    for seed in (1, 2, 3, 1):
        status, body = post(s, "/completion", {"prompt": LIFE, "n_predict": 24, "seed": seed,
                                               "temperature": 1.0})
        texts.append(body.get("content") if status == 200 else None)
    check(texts[0] == texts[3] and len(set(texts[:3])) == 3, f"seeds: same seed same text ({texts})")


def test_stream(s):
    body = {"prompt": LIFE, "n_predict": 8, "stream": True, "seed": 42}
    status, headers, payload = s.curl("/completion", body, key=KEY)
    check(status == 200 and headers.get("content-type", "").startswith("text/event-stream"),
          f"stream -> 200 text/event-stream (got {status} {headers.get('content-type')})")
    try:
        events = native_events(payload)
    except (AssertionError, ValueError) as e:
        check(False, f"native SSE stream parses: {e} {payload[:200]!r}")
        return
    content = ""
    final = None
    for e in events:
        check(isinstance(e.get("stop"), bool), "every event has a bool 'stop'")
        if e.get("stop"):
            final = e
        else:
            check(len(e.get("tokens", [])) > 0 and all(isinstance(x, int) for x in e["tokens"]),
                  "a token event carries its ids")
            content += e.get("content", "")
    check(final is not None and events[-1] is final, "the stream ends with a stop: true event")
    if final:
        check(final["timings"]["predicted_n"] == 8 and final["stop_type"] == "limit"
              and final["truncated"] is False and isinstance(final["has_new_line"], bool),
              f"final event: predicted_n 8, stop_type limit (got {str(final)[:200]})")
        check(final["generation_settings"]["n_predict"] == 8
              and final["generation_settings"]["seed"] == 42, "final event's generation_settings")
    _, whole = post(s, "/completion", {"prompt": LIFE, "n_predict": 8, "seed": 42})
    check(content == whole.get("content"), f"stream == non-stream ({content!r} vs {whole.get('content')!r})")


def test_prompt_shapes(s):
    # test_completion.py::test_completion_with_tokens_input
    _, tok = post(s, "/tokenize", {"content": LIFE, "add_special": True})
    tokens = tok["tokens"]
    base = {"temperature": 0, "n_predict": 8}
    status, one = post(s, "/completion", dict(base, prompt=tokens))
    check(status == 200 and isinstance(one.get("content"), str), "token-id prompt")
    status, both = post(s, "/completion", dict(base, prompt=[tokens, tokens]))
    check(status == 200 and isinstance(both, list) and len(both) == 2
          and both[0]["content"] == both[1]["content"] == one["content"]
          and [b["index"] for b in both] == [0, 1], f"two prompts -> a list of 2 (got {str(both)[:200]})")
    status, mixed = post(s, "/completion", dict(base, prompt=[tokens, LIFE]))
    check(status == 200 and isinstance(mixed, list) and len(mixed) == 2
          and mixed[0]["content"] == mixed[1]["content"], "ids and text prompts agree")
    status, seq = post(s, "/completion", dict(base, prompt=[1, 2, 3, 4, 5, 6, LIFE, 7, 8, 9, 10, LIFE]))
    check(status == 200 and isinstance(seq, dict) and isinstance(seq.get("content"), str),
          f"ids and strings mixed in one prompt (got {status})")
    # test_nocache_long_input_prompt: a prompt past the context (2048 here) is refused.
    status, body = post(s, "/completion", {"prompt": LIFE * 140, "temperature": 1.0})
    check(status == 400, f"a prompt past the context -> 400 (got {status})")


def test_fields(s):
    # test_completion.py::test_completion_response_fields
    fields = ["content", "generation_settings/n_predict", "prompt"]
    status, body = post(s, "/completion", {"prompt": LIFE, "n_predict": 32, "response_fields": fields})
    check(status == 200 and len(body) == 3 and body.get("generation_settings/n_predict") == 32
          and body.get("prompt") == "<s> " + LIFE and isinstance(body.get("content"), str),
          f"response_fields (got {str(body)[:200]})")
    # test_completion.py::test_n_probs
    status, body = post(s, "/completion", {"prompt": LIFE, "n_probs": 10, "temperature": 0,
                                           "n_predict": 5})
    probs = body.get("completion_probabilities", []) if status == 200 else []
    ok = len(probs) == 5
    for tok in probs:
        ok = ok and tok["id"] > 0 and isinstance(tok["token"], str) and tok["logprob"] <= 0
        ok = ok and isinstance(tok["bytes"], list) and len(tok["top_logprobs"]) == 10
        for p in tok["top_logprobs"]:
            ok = ok and p["id"] > 0 and isinstance(p["token"], str) and p["logprob"] <= 0
            ok = ok and isinstance(p["bytes"], list)
    check(ok, f"n_probs 10: 5 entries of 10 top_logprobs (got {str(probs)[:200]})")
    if probs:
        check(probs[0]["id"] == probs[0]["top_logprobs"][0]["id"], "greedy: the token is the top one")
    status, headers, payload = s.curl("/completion", {"prompt": LIFE, "n_probs": 10, "temperature": 0,
                                                      "n_predict": 5, "stream": True}, key=KEY)
    events = native_events(payload)
    ok = status == 200 and any(not e["stop"] for e in events)
    for e in events:
        if not e["stop"]:
            ok = ok and len(e.get("completion_probabilities", [])) == 1
            ok = ok and len(e["completion_probabilities"][0]["top_logprobs"]) == 10
    check(ok, "n_probs streamed: one entry per token event")


def test_params_and_errors(s):
    status, body = post(s, "/completion", {"prompt": LIFE, "n_predict": 4, "id_slot": 0,
                                           "cache_prompt": False})
    check(status == 200 and body.get("id_slot") == 0, "id_slot 0 accepted and echoed")
    status, body = post(s, "/completion", {"prompt": LIFE, "n_predict": 4, "slot_id": 0})
    check(status == 200, "slot_id (the old spelling) accepted")
    status, body = post(s, "/completion", {"prompt": LIFE, "id_slot": 100000})
    check(status == 400 and error_names(body, ["id_slot"]), f"id_slot past total_slots -> 400 ({body})")
    status, body = post(s, "/completion", {"prompt": LIFE, "mirostat": 2})
    check(status == 400 and error_names(body, ["mirostat"]), f"mirostat 2 -> 400 naming it ({body})")
    status, body = post(s, "/completion", {"prompt": LIFE, "mirostat": 0, "typical_p": 1.0,
                                           "n_predict": 2})
    check(status == 200, "samplers at their off values are accepted")
    status, body = post(s, "/completion", {"n_predict": 2})
    check(status == 400 and error_names(body, ["prompt"]), "no prompt -> 400")
    status, body = post(s, "/completion", {"prompt": LIFE, "n_predict": "x"})
    check(status == 400 and error_names(body, ["n_predict"]), "n_predict not a number -> 400")
    # n_predict -1 (the default) runs until the context (/props' n_ctx) is full.
    _, _, text = s.curl("/props", key=KEY)
    n_ctx = json.loads(text)["default_generation_settings"]["n_ctx"]
    status, body = post(s, "/completion", {"prompt": LIFE, "n_predict": -1, "ignore_eos": True,
                                           "temperature": 0})
    check(status == 200 and body.get("tokens_evaluated", 0) + body.get("tokens_predicted", 0) == n_ctx
          and body.get("stop_type") == "limit" and body.get("truncated") is True,
          f"n_predict -1: until the context is full (got {str(body)[:160]})")
    # llama-server's logit_bias: [[token, false]] bans the token.
    status, greedy = post(s, "/completion", {"prompt": LIFE, "n_predict": 1, "temperature": 0,
                                             "return_tokens": True})
    first = greedy["tokens"][0]
    status, body = post(s, "/completion", {"prompt": LIFE, "n_predict": 1, "temperature": 0,
                                           "return_tokens": True, "logit_bias": [[first, False]]})
    check(status == 200 and body["tokens"] and body["tokens"][0] != first,
          "logit_bias [[id, false]] bans the token")
    status, _ = post(s, "/completion", {"prompt": LIFE}, key="wrong")
    check(status == 401, "/completion is behind the API key")
    status, _, _ = s.curl("/completion", key=KEY)
    check(status == 405, "GET /completion -> 405")


def test_infill(s):
    req = {"input_prefix": "#include <cstdio>\n\nint main() {\n", "prompt": "    int n_threads = llama_",
           "input_suffix": "}\n"}
    # test_infill.py::test_invalid_input_extra_req
    for extra in ({}, {"filename": "ok"}, {"filename": 123}, {"filename": 123, "text": "abc"},
                  {"filename": 123, "text": 456}):
        status, body = post(s, "/infill", dict(req, input_extra=[extra]))
        check(status == 400 and "error" in body, f"/infill input_extra {extra} -> 400")
    # stories260K.gguf has no FIM tokens (llama.cpp's infill tests use stories260K-infill.gguf).
    status, body = post(s, "/infill", req)
    check(status == 400 and error_names(body, ["fill-in-the-middle", "FIM_PRE"]),
          f"/infill without FIM tokens -> 400 naming why (got {status}: {body})")


def test_props_slots_version(s):
    status, _, text = s.curl("/props", key=KEY)
    props = json.loads(text) if status == 200 else {}
    check(status == 200, f"GET /props -> 200 (got {status})")
    p = props.get("default_generation_settings", {}).get("params", {})
    check(abs(p.get("temperature", 0) - 0.8) < 1e-6 and p.get("top_k") == 40
          and abs(p.get("top_p", 0) - 0.95) < 1e-6 and abs(p.get("min_p", 0) - 0.05) < 1e-6
          and p.get("n_predict") == -1, f"/props defaults are llama-server's (got {str(p)[:200]})")
    check(isinstance(props.get("total_slots"), int) and props.get("total_slots", 0) >= 1, "total_slots")
    check(str(props.get("model_path", "")).endswith("stories260K.gguf"), "model_path")
    check(isinstance(props.get("chat_template"), str) and isinstance(props.get("build_info"), str),
          "chat_template and build_info")
    _, _, text = s.curl("/v1/models", key=KEY)
    max_len = json.loads(text)["data"][0]["max_model_len"]
    check(props.get("default_generation_settings", {}).get("n_ctx") == max_len,
          f"n_ctx is the served context ({max_len})")
    status, _, text = s.curl("/props", {}, key=KEY)
    check(status == 405, f"POST /props -> 405 (read-only, as llama-server without --props) ({status})")

    # /slots while a long request runs: one entry per slot, that request's busy.
    # A long request (until the context is full: about a second here), polled while it runs.
    slow = threading.Thread(target=post, args=(s, "/completion", {
        "prompt": LIFE, "n_predict": -1, "ignore_eos": True}))
    slow.start()
    busy_seen = False
    slots = []
    while slow.is_alive() and not busy_seen:
        status, _, text = s.curl("/slots", key=KEY)
        slots = json.loads(text) if status == 200 else []
        busy_seen = any(x.get("is_processing") for x in slots)
    slow.join()
    check(len(slots) == props.get("total_slots") and all("id" in x and "params" in x for x in slots),
          f"/slots: total_slots entries (got {len(slots)})")
    check(busy_seen, "/slots shows a running request as is_processing")
    busy = [x for x in slots if x.get("is_processing")]
    # The busy slot carries the request's counts: its prompt, tokens decoded so far and left.
    check(len(busy) == 1 and busy[0]["id_task"] >= 0 and busy[0]["n_prompt_tokens"] > 10
          and busy[0]["next_token"]["n_decoded"] >= 0
          and busy[0]["next_token"]["n_decoded"] + busy[0]["next_token"]["n_remain"]
          == busy[0]["n_ctx"] - busy[0]["n_prompt_tokens"],
          f"the busy slot's counts: {busy[0] if busy else None}")
    status, _, text = s.curl("/slots", key=KEY)
    check(status == 200 and not any(x["is_processing"] for x in json.loads(text)), "idle slots after")

    status, _, text = s.curl("/version", key=KEY)
    out = subprocess.run([BINARY, "--version"], capture_output=True, text=True).stdout
    want = re.match(r"rapide (\S+)\ncommit (\S+)", out)
    got = json.loads(text) if status == 200 else {}
    check(status == 200 and want and got.get("version") == want.group(1)
          and got.get("commit") == want.group(2), f"/version is `rapide --version`'s (got {text[:200]})")


def test_apply_template_rerank_metrics(s):
    messages = [{"role": "system", "content": "You are a storyteller."},
                {"role": "user", "content": "Tell me about a cat."}]
    status, body = post(s, "/apply-template", {"messages": messages})
    check(status == 200 and isinstance(body.get("prompt"), str)
          and "Tell me about a cat." in body["prompt"], f"/apply-template -> prompt (got {body})")
    if status == 200:
        # The same prompt /v1/chat/completions would run: /tokenize of the messages agrees.
        _, chat_tok = post(s, "/tokenize", {"messages": messages})
        _, done = post(s, "/completion", {"prompt": body["prompt"], "n_predict": 1})
        check(done.get("tokens_evaluated") == len(chat_tok["tokens"]),
              f"the template's text is the chat prompt ({done.get('tokens_evaluated')} vs {len(chat_tok['tokens'])})")
    status, body = post(s, "/apply-template", {"messages": "x"})
    check(status == 400, "/apply-template with bad messages -> 400")
    for path in ("/v1/rerank", "/rerank"):
        status, body = post(s, path, {"query": "What is panda?", "documents": ["hi", "it is a bear"]})
        check(status == 501 and error_names(body, ["rerank"]), f"{path} -> 501 naming why ({status} {body})")
    status, _, text = s.curl("/metrics")
    samples = [l for l in text.splitlines() if l and not l.startswith("#")]
    bad = [l for l in samples if not re.match(r'^[a-z0-9_:]+\{model_name="stories260K"[,}]', l)]
    check(status == 200 and len(samples) > 20 and not bad, f"every /metrics sample has model_name ({bad[:3]})")
    check(any('endpoint="completion",status="200"' in l for l in samples), "/completion counted in metrics")


def main():
    sections = [test_completion, test_greedy_and_stop, test_stream, test_prompt_shapes,
                test_fields, test_params_and_errors, test_infill, test_props_slots_version,
                test_apply_template_rerank_metrics]
    with RapideServer(BINARY, ["-m", MODEL, "--api-key", KEY]) as s:
        for section in sections:
            # One broken answer fails its section's check, and the next sections still run.
            try:
                section(s)
            except Exception as e:  # noqa: BLE001
                check(False, f"{section.__name__} raised {type(e).__name__}: {str(e)[:200]}")
    return report()


if __name__ == "__main__":
    sys.exit(main())
