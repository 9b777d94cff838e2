#!/usr/bin/env python3
"""Everyday-use endpoints and logs of `rapide serve` (issue 20), against a real server.

usage: serve_everyday_test.py RAPIDE_BINARY SHARED_DIR

* /tokenize and /detokenize in llama.cpp's and vLLM's shapes; the ids must equal llama.cpp's
  own for the Llama-2 vocabulary (shared/tokenizer-tests, an independent oracle).
* /v1/embeddings: OpenAI's shape, unit vectors, a batched input equal to itself alone, token
  ids equal to their text, --pooling mean differing from last.
* /v1/models: max_model_len, parameters, file size (= the file's size on disk), weight type,
  and no absolute path of the model.
* GET / redirects to /dashboard, a page linking /health and /metrics; CORS is off by default, and with
  --allowed-origins a preflight gets 204 with the allow headers, other origins get nothing.
* The request log, parsed from a real run in both formats: one line per request with every
  field the issue lists, 4xx lines with their error message, no prompt text unless
  --log-prompts, and the periodic engine line while busy.
"""
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from checks import check, report  # noqa: E402
from require_shared import require_shared, shared_dir  # noqa: E402
from serve_fixture import RapideServer  # noqa: E402

BINARY, SHARED = sys.argv[1], shared_dir(sys.argv[2])
MODEL = os.path.join(SHARED, "models/llama2-tiny-random/llama-2-tiny-random.gguf")
VOCAB_TESTS = os.path.join(SHARED, "tokenizer-tests/ggml-vocab-llama-spm.gguf")
SECRET_PROMPT = "my secret prompt about zebras"


class FileLoggedServer(RapideServer):
    """A server started with --log-file: its log is read from that file."""

    def __init__(self, binary, args, log_file):
        super().__init__(binary, args + ["--log-file", log_file])
        self.log_file = log_file

    def log(self):
        if not os.path.exists(self.log_file):
            return ""
        with open(self.log_file, errors="replace") as f:
            return f.read()


def llama_cpp_ids(text):
    """llama.cpp's ids for `text` from its own vocabulary test vectors (no BOS)."""
    with open(VOCAB_TESTS + ".inp", encoding="utf-8") as f:
        inputs = f.read().split("\n__ggml_vocab_test__\n")
    with open(VOCAB_TESTS + ".out", encoding="utf-8") as f:
        outputs = f.read().split("\n")
    return [int(t) for t in outputs[inputs.index(text)].split()]


def check_tokenizer_endpoints(server):
    expected = llama_cpp_ids("Hello world")
    status, _, body = server.curl("/tokenize", {"content": "Hello world"})
    check(status == 200 and json.loads(body)["tokens"] == expected,
          f"llama.cpp shape: /tokenize content gives llama.cpp's ids {expected}: {body}")
    status, _, body = server.curl("/tokenize", {"prompt": "Hello world"})
    answer = json.loads(body)
    check(status == 200 and answer["tokens"] == [1] + expected and answer["count"] == 3
          and answer["max_model_len"] > 0,
          f"vLLM shape: /tokenize prompt adds BOS, count and max_model_len: {body}")
    _, _, body = server.curl("/tokenize", {"content": "Hello world", "with_pieces": True})
    pieces = json.loads(body)["tokens"]
    check([p["id"] for p in pieces] == expected and "".join(p["piece"] for p in pieces) == " Hello world",
          f"with_pieces gives id and piece per token: {body}")
    status, _, body = server.curl("/detokenize", {"tokens": expected})
    answer = json.loads(body)
    check(status == 200 and answer["content"] == "Hello world" and answer["prompt"] == "Hello world",
          f"/detokenize answers content (llama.cpp) and prompt (vLLM): {body}")
    status, _, body = server.curl("/detokenize", {"tokens": [99999999]})
    check(status == 400 and "outside the vocabulary" in body, f"a bad id is a 400: {body}")
    status, _, body = server.curl("/tokenize", {"nothing": 1})
    check(status == 400 and "content" in body, f"no text is a 400 naming the field: {body}")
    status, _, _ = server.curl("/tokenize", method="GET")
    check(status == 405, "GET /tokenize is a 405")


def norm(v):
    return sum(x * x for x in v) ** 0.5


def embed(server, body):
    status, _, text = server.curl("/v1/embeddings", body)
    return status, (json.loads(text) if status == 200 else text)


def check_embeddings(server):
    """Returns the vector of "Hello world" (last or mean pooling, as the server runs)."""
    status, one = embed(server, {"model": "m", "input": "Hello world"})
    check(status == 200 and one["object"] == "list" and one["data"][0]["object"] == "embedding"
          and one["data"][0]["index"] == 0 and one["model"] == "m", f"OpenAI shape: {one}")
    if status != 200:
        return []
    vector = one["data"][0]["embedding"]
    check(len(vector) > 0 and abs(norm(vector) - 1.0) < 1e-4, f"L2-normalised: {norm(vector)}")
    check(one["usage"]["prompt_tokens"] == 3 and one["usage"]["total_tokens"] == 3,
          f"usage counts BOS + 2 tokens: {one['usage']}")
    _, many = embed(server, {"input": ["a different text entirely", "Hello world"]})
    check(len(many["data"]) == 2 and [d["index"] for d in many["data"]] == [0, 1],
          "a list of strings gives one vector each, in order")
    batched = many["data"][1]["embedding"]
    check(max(abs(a - b) for a, b in zip(batched, vector)) < 1e-4,
          "an input batched with another gets the vector it gets alone")
    check(max(abs(a - b) for a, b in zip(many["data"][0]["embedding"], vector)) > 1e-3,
          "different texts give different vectors")
    ids = [1] + llama_cpp_ids("Hello world")
    _, by_ids = embed(server, {"input": ids})
    check(max(abs(a - b) for a, b in zip(by_ids["data"][0]["embedding"], vector)) < 1e-5,
          "token ids give the same vector as their text")
    status, text = embed(server, {"input": []})
    check(status == 400 and "input" in text, f"an empty input is a 400: {text}")
    status, text = embed(server, {"input": "x", "model": "other"})
    check(status == 404, f"another model's name is a 404: {status}")
    return vector


def check_models(server):
    status, _, body = server.curl("/v1/models")
    model = json.loads(body)["data"][0]
    check(status == 200 and model["max_model_len"] > 0, f"max_model_len: {body}")
    check(model.get("file_size") == os.path.getsize(MODEL), f"file_size is the file's size: {body}")
    check(model.get("weight_type") == "f16", f"weight_type of an F16 GGUF is f16: {body}")
    check(isinstance(model.get("parameters"), int) and model["parameters"] > 0, f"parameters: {body}")
    check(os.path.dirname(MODEL) not in body and "llama-2-tiny-random.gguf" in body,
          f"the file name, not its absolute path: {body}")


def check_index_and_cors(server, cors_on):
    status, headers, _ = server.curl("/")
    check(status == 302 and headers.get("location") == "/dashboard",
          f"GET / redirects to /dashboard: {status} {headers}")
    status, headers, body = server.curl("/dashboard")
    check(status == 200 and headers.get("content-type", "").startswith("text/html")
          and 'href="/metrics"' in body and 'href="/health"' in body,
          "GET /dashboard is an HTML page linking /metrics and /health")
    origin = "https://app.example.com"
    status, headers, _ = server.curl("/v1/models", method="OPTIONS",
                                     headers=[f"Origin: {origin}",
                                              "Access-Control-Request-Method: POST"])
    if cors_on:
        check(status == 204 and headers.get("access-control-allow-origin") == origin
              and "POST" in headers.get("access-control-allow-methods", "")
              and "authorization" in headers.get("access-control-allow-headers", "").lower(),
              f"an allowed origin's preflight is a 204 with the allow headers: {status} {headers}")
        _, headers, _ = server.curl("/v1/models", headers=[f"Origin: {origin}"])
        check(headers.get("access-control-allow-origin") == origin,
              "an allowed origin's response carries Access-Control-Allow-Origin")
        _, headers, _ = server.curl("/v1/models", headers=["Origin: https://evil.example"])
        check("access-control-allow-origin" not in headers, "another origin gets no CORS header")
    else:
        check(status == 405 and "access-control-allow-origin" not in headers,
              f"CORS is off by default: no preflight answer ({status})")


def generate(server, stream=False):
    return server.curl("/v1/completions", {"model": "m", "prompt": SECRET_PROMPT, "max_tokens": 8,
                                           "temperature": 0, "ignore_eos": True, "stream": stream})


TEXT_LINE = re.compile(
    r"^\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3}) I\] request (\S+) (127\.0\.0\.1:\d+) "
    r"(POST|GET|OPTIONS) (\S+) (\d{3})(.*)$")


def text_request_lines(log):
    return [m for m in map(TEXT_LINE.match, log.splitlines()) if m]


def check_text_log(tmp):
    """Returns the server's (last-token pooled) embedding of "Hello world"."""
    log_file = os.path.join(tmp, "text.log")
    with FileLoggedServer(BINARY, ["-m", MODEL, "--served-model-name", "m", "--allowed-origins", "https://app.example.com",
                                   "--log-stats-interval", "0.05"], log_file) as server:
        check_tokenizer_endpoints(server)
        check_models(server)
        last = check_embeddings(server)
        check_index_and_cors(server, cors_on=True)
        status, headers, _ = generate(server)
        check(status == 200 and headers.get("x-request-id", "").startswith("req-"),
              "a response carries its X-Request-Id")
        request_id = headers.get("x-request-id")
        generate(server, stream=True)
        server.curl("/v1/completions", {"model": "m", "prompt": "x", "temperature": -3})
        server.curl("/v1/completions", {"model": "m", "prompt": "y"},
                    headers=["X-Request-Id: my-trace-42"])
        time.sleep(0.5)  # a few ticks of --log-stats-interval after the work
        log = server.log()
    lines = text_request_lines(log)
    ours = [m for m in lines if m.group(2) == request_id]
    check(len(ours) == 1, f"one line for request {request_id}:\n{log[-3000:]}")
    if ours:
        rest = ours[0].group(7)
        check(ours[0].group(5) == "/v1/completions" and ours[0].group(6) == "200",
              "the line names route and status")
        for field in (r"prompt_tokens=\d+", r"completion_tokens=8", r"ttft=[\d.]+s",
                      r"tpot=[\d.]+s", r"e2e=[\d.]+s", r"finish=length"):
            check(re.search(field, rest) is not None, f"the line has {field}: {rest}")
    streamed = [m for m in lines if m.group(5) == "/v1/completions" and "completion_tokens=8" in m.group(7)]
    check(len(streamed) == 2, "the streamed request has its line with its tokens too")
    bad = [m for m in lines if m.group(6) == "400" and m.group(5) == "/v1/completions"]
    check(len(bad) == 1 and "error=" in bad[0].group(7) and "temperature" in bad[0].group(7),
          f"a 400 is logged with its error message: {[m.group(0) for m in bad]}")
    check(any(m.group(2) == "my-trace-42" for m in lines), "the client's X-Request-Id is the id logged")
    check(SECRET_PROMPT not in log, "no prompt text in the log without --log-prompts")
    check(re.search(r"engine: prompt [\d.]+ tok/s, generation [\d.]+ tok/s, running \d+, "
                    r"queued \d+, KV [\d.]+% used, prefix-cache hit rate ([\d.]+%|off)", log)
          is not None, "the periodic engine line appears while busy")
    check(not any(m.group(5) == "/health" for m in lines), "health probes are not logged at info")
    return last


def check_json_log(tmp, last):
    log_file = os.path.join(tmp, "json.log")
    with FileLoggedServer(BINARY, ["-m", MODEL, "--served-model-name", "m", "--pooling", "mean",
                                   "--log-format", "json", "--log-prompts",
                                   "--log-stats-interval", "0.05"], log_file) as server:
        check_index_and_cors(server, cors_on=False)
        mean = check_embeddings(server)
        check(last and mean and max(abs(a - b) for a, b in zip(last, mean)) > 1e-3,
              "--pooling mean gives another vector than last")
        status, _, _ = generate(server)
        check(status == 200, "generation works with the JSON log")
        time.sleep(0.5)
        log = server.log()
    records = []
    for line in log.splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            check(False, f"every line of the JSON log parses: {line}")
    check(all(re.match(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}$", r.get("time", ""))
              and r.get("level") for r in records), "every JSON line has a date-time and a level")
    requests = [r for r in records if r.get("event") == "request" and r.get("route") == "/v1/completions"]
    check(len(requests) == 1, f"one JSON request record: {requests}")
    if requests:
        r = requests[0]
        for key in ("request_id", "client", "status", "prompt_tokens", "completion_tokens",
                    "ttft_s", "tpot_s", "e2e_s", "finish_reason"):
            check(key in r, f"the JSON record has {key}")
        check(r.get("prompt") == SECRET_PROMPT, "--log-prompts puts the prompt in the record")
    check(any(r.get("event") == "engine_stats" and "generation_tokens_per_s" in r for r in records),
          "the periodic engine record appears in JSON too")


def main():
    require_shared(SHARED, "models/llama2-tiny-random/llama-2-tiny-random.gguf",
                   "tokenizer-tests/ggml-vocab-llama-spm.gguf.inp")
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        last = check_text_log(tmp)
        check_json_log(tmp, last)
    return report()


if __name__ == "__main__":
    sys.exit(main())
