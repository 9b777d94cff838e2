#!/usr/bin/env python3
"""Endpoints whose work is bounded and does not stall generation (issue 53, N3, N4, N5).

usage: serve_bounded_endpoints_test.py RAPIDE_BINARY SHARED_DIR

One `rapide serve` on stories260K with a 16 MiB KV budget:
* GET /v1/engine/state: the bandwidth probe keeps the server's peak RSS (VmHWM) small (its
  1 GiB buffer took it from 20 MB to 1.07 GB), runs between engine steps without stalling a
  stream, and its figure is kept (the second request does not probe again).
* POST /v1/embeddings beyond OpenAI's caps: 400 too_many_inputs, too_many_tokens,
  context_length_exceeded in the server's error JSON.
* A 300,000-token embeddings request (the most allowed) that its client abandons: a stream
  and a small embeddings request are served promptly meanwhile, and the work stops once the
  client is gone (the engine's between-steps gauge empties, the server's CPU goes idle, the
  request is logged 499). Before, 100,000 inputs ran 402 s, 340 s after their client left.
* POST /tokenize with a 3.6 MB text: streams started while it is tokenized keep their pace
  (it used to stall them 4.5 s: it was tokenized on the io thread).
"""
import http.client
import json
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from checks import check, report  # noqa: E402
from require_shared import require_shared, shared_dir  # noqa: E402
from serve_fixture import RapideServer, status_kib  # noqa: E402

BINARY, SHARED = sys.argv[1], shared_dir(sys.argv[2])
MODEL = os.path.join(SHARED, "models/stories260K/stories260K.gguf")

# Bounds, for a busy 2-core CI machine:
# A stream's largest gap between tokens while other work runs. The engine runs one slice of
# between-steps work after each step: an embeddings pass of --max-batch-tokens (512) tokens
# takes ~11-30 ms on stories260K, the probe's largest slice (touching 64 MiB) ~10-30 ms; on
# this 2-core machine, busy with other builds, the worst gaps measured were 20-210 ms. 1 s is
# 30x a slice and far below the stalls before the fixes (1-3 s for the probe).
MAX_GAP = 1.0
# Streams beside a 3.6 MB /tokenize: it used to stall them for the whole tokenization (4.5 s;
# 6.3 s measured here), now it competes for the cores from a worker thread: a quarter of its
# time (at least MAX_GAP) is far from a stall yet not a bet on an idle machine.
TOKENIZE_GAP_SHARE = 0.25
# VmHWM's growth over the first /v1/engine/state: the 64 MiB probe buffer plus the stream's
# work (66 MiB measured; the 1 GiB probe added ~1050 MiB). A growth, not an absolute figure:
# under AddressSanitizer the server starts at ~560 MiB (its shadow memory) and grows 82 MiB.
MAX_HWM_GROWTH_KIB = 256 * 1024


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def stream_gaps(port, max_tokens, out=None):
    """Streams a greedy completion; returns the gaps between its events (the first one is the
    time to the first token) and stores them in out["gaps"] too."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    body = json.dumps({"prompt": "Once upon a time", "max_tokens": max_tokens,
                       "ignore_eos": True, "temperature": 0, "stream": True})
    start = time.monotonic()
    conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    times = [start]
    events = 0
    while True:
        line = resp.readline()
        if not line:
            break
        if line.startswith(b"data: "):
            times.append(time.monotonic())
            events += 1
            if line.strip() == b"data: [DONE]":
                break
    conn.close()
    gaps = [b - a for a, b in zip(times, times[1:])]
    if out is not None:
        out["gaps"] = gaps
        out["events"] = events
    return gaps


def send_raw(port, path, body):
    """Sends a POST on a fresh connection and returns the socket, unread."""
    data = body.encode()
    sock = socket.create_connection(("127.0.0.1", port), timeout=120)
    sock.sendall((f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  f"Content-Length: {len(data)}\r\n\r\n").encode() + data)
    return sock


def wait_metric(s, name, predicate, timeout):
    deadline = time.monotonic() + timeout
    while True:
        value = s.metrics().get(name, -1)
        if predicate(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.02)


def test_engine_state(s):
    pid = s.proc.pid
    before = status_kib(pid, "VmHWM")
    stream = {}
    victim = threading.Thread(target=stream_gaps, args=(s.port, 400, stream))
    victim.start()
    time.sleep(0.05)
    start = time.monotonic()
    status, _, text = s.curl("/v1/engine/state", timeout=60)
    first = time.monotonic() - start
    victim.join()
    hwm = status_kib(pid, "VmHWM")
    state = json.loads(text) if status == 200 else {}
    bandwidth = state.get("machine", {}).get("read_bandwidth", 0)
    check(status == 200 and bandwidth > 0,
          f"/v1/engine/state measured the read bandwidth ({bandwidth / 1e9:.1f} GB/s, "
          f"{first:.2f} s)")
    check(hwm - before < MAX_HWM_GROWTH_KIB,
          f"peak RSS stays small: {before / 1024:.0f} -> {hwm / 1024:.0f} MiB (growth bound "
          f"{MAX_HWM_GROWTH_KIB // 1024} MiB; the 1 GiB probe grew it by ~1050 MiB)")
    worst = max(stream.get("gaps", [99])[1:], default=99)
    check(stream.get("events", 0) >= 400 and worst < MAX_GAP,
          f"a stream during the probe keeps its pace: worst gap {worst * 1000:.0f} ms "
          f"(bound {MAX_GAP * 1000:.0f} ms)")
    start = time.monotonic()
    status, _, text = s.curl("/v1/engine/state", timeout=60)
    again = json.loads(text)["machine"]["read_bandwidth"] if status == 200 else -1
    check(again == bandwidth, f"the figure is kept: the second request reads the same "
                              f"({time.monotonic() - start:.2f} s)")


def expect_400(s, body, code):
    status, _, text = s.curl("/v1/embeddings", body=body, timeout=60)
    error = json.loads(text).get("error", {}) if text.startswith("{") else {}
    check(status == 400 and error.get("code") == code and error.get("param") == "input" and
          error.get("type") == "invalid_request_error",
          f"{code}: {status} {text[:160]}")


def test_embedding_caps(s, context):
    expect_400(s, {"input": ["h"] * 2049}, "too_many_inputs")
    expect_400(s, {"input": [[5] * 150] * 2000 + [[5]]}, "too_many_tokens")  # 300,001
    expect_400(s, {"input": [[5] * (context + 1)]}, "context_length_exceeded")
    status, _, text = s.curl("/v1/embeddings", body={"input": ["h"] * 2048}, timeout=60)
    check(status == 200 and len(json.loads(text)["data"]) == 2048,
          f"2048 inputs are within the cap ({status})")


def test_abandoned_embeddings(s):
    pid = s.proc.pid
    # 600 inputs of 500 tokens: 300,000 tokens, the most a request may hold; ~18 s of passes
    # (of ~30 ms each) here, so it is far from done when its client leaves.
    inputs = [[1 + (i * 7 + p) % 500 for p in range(500)] for i in range(600)]
    sock = send_raw(s.port, "/v1/embeddings", json.dumps({"input": inputs}))
    queued = wait_metric(s, "rapide_engine_background_tasks", lambda v: v >= 1, 30)
    check(queued >= 1, "the embeddings job runs between engine steps")
    # Meanwhile a stream and a small embeddings request are served promptly.
    stream = {}
    victim = threading.Thread(target=stream_gaps, args=(s.port, 200, stream))
    victim.start()
    start = time.monotonic()
    status, _, _ = s.curl("/v1/embeddings", body={"input": "Once upon a time"}, timeout=60)
    small = time.monotonic() - start
    victim.join()
    worst = max(stream.get("gaps", [99]), default=99)
    check(stream.get("events", 0) >= 200 and worst < MAX_GAP,
          f"a stream beside the large job keeps its pace: worst gap {worst * 1000:.0f} ms "
          f"(first token included; bound {MAX_GAP * 1000:.0f} ms)")
    check(status == 200 and small < 1.0,
          f"a small embeddings request beside it answers in {small:.2f} s (it used to wait for "
          f"the large one: 271-337 s)")
    still = s.metrics().get("rapide_engine_background_tasks", 0)
    sock.close()
    gone = time.monotonic()
    # The disconnect watch polls every 500 ms; the job stops at its next pass.
    left = wait_metric(s, "rapide_engine_background_tasks", lambda v: v == 0, 5)
    stopped = time.monotonic() - gone
    check(still >= 1 and left == 0 and stopped < 2.0,
          f"the abandoned job stops {stopped:.2f} s after its client left")
    cpu = cpu_seconds(pid)
    time.sleep(1.0)
    idle = cpu_seconds(pid) - cpu
    check(idle < 0.3, f"the server is idle after it: {idle:.2f} CPU s in the next second")
    m = s.metrics()
    check(m.get('rapide_requests_total{endpoint="embeddings",status="499"}', 0) >= 1 and
          "POST /v1/embeddings 499" in s.log(),
          "the abandoned request is logged and counted as 499")


def test_big_tokenize(s):
    content = "Once upon a time there was a little dog. " * (3_600_000 // 42)
    results = {}

    def tokenize():
        start = time.monotonic()
        status, _, text = s.curl("/tokenize", body={"content": content}, timeout=120)
        results["seconds"] = time.monotonic() - start
        results["status"] = status
        results["count"] = json.loads(text).get("count", 0) if status == 200 else 0
        results["done"] = time.monotonic()

    big = threading.Thread(target=tokenize)
    big.start()
    time.sleep(0.2)  # the body is sent and being tokenized
    gaps = []
    finished_during = 0
    while big.is_alive():
        g = stream_gaps(s.port, 64)
        if big.is_alive():
            finished_during += 1
        gaps += g
    big.join()
    worst = max(gaps, default=99)
    seconds = results.get("seconds", 0)
    bound = max(MAX_GAP, TOKENIZE_GAP_SHARE * seconds)
    check(results.get("status") == 200 and results.get("count", 0) > 100000,
          f"the 3.6 MB text is tokenized: {results.get('count')} tokens in {seconds:.1f} s")
    check(finished_during >= 1 and worst < bound,
          f"{finished_during} streams ran while it was tokenized; worst gap "
          f"{worst * 1000:.0f} ms, first tokens included (bound {bound * 1000:.0f} ms; it "
          f"stalled them 4.5 s)")


def main():
    require_shared(SHARED, "models/stories260K/stories260K.gguf")
    with RapideServer(BINARY, ["-m", MODEL, "--kv-memory", "16MiB"]) as s:
        try:
            # First: the peak RSS is read before anything else raises it.
            test_engine_state(s)
            _, _, models = s.curl("/v1/models")
            test_embedding_caps(s, json.loads(models)["data"][0]["max_model_len"])
            test_abandoned_embeddings(s)
            test_big_tokenize(s)
        except Exception:
            print(s.log()[-4000:])
            raise
    return report()


if __name__ == "__main__":
    sys.exit(main())
