#!/usr/bin/env python3
"""What one request may cost `rapide serve` (issue 18, items 8, 9 and 10): heavy parsing does
not stall other connections, requests beyond the caps are refused with a 400 up front, and a
streaming client that stops reading is cut off instead of growing the server's memory.

usage: serve_limits_test.py RAPIDE_BINARY SHARED_DIR
Covers a 4 MiB prompt (/health keeps answering while it is parsed and tokenized), too many
or too long stop strings, too many stop token ids, n x max_tokens x logprobs beyond the
response budget, and a client that never reads its stream (--max-pending-bytes).
"""
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
from serve_fixture import RapideServer  # noqa: E402

BINARY, SHARED = sys.argv[1], shared_dir(sys.argv[2])
MODEL = os.path.join(SHARED, "models/stories260K/stories260K.gguf")


def post_raw(port, path, body, results, key):
    """POSTs `body` on a fresh connection; stores (status line, time sent, time answered)."""
    data = body.encode()
    head = (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", port), timeout=120) as sock:
        sock.sendall(head + data)
        results[key + "_sent"] = time.monotonic()
        answer = b""
        while b"\r\n" not in answer:
            piece = sock.recv(4096)
            if not piece:
                break
            answer += piece
        results[key + "_answered"] = time.monotonic()
        results[key] = answer.split(b"\r\n", 1)[0].decode(errors="replace")


def test_big_prompt_does_not_stall(s):
    # Before the fix the body was parsed and tokenized on the io thread (one here), so every
    # other connection waited for it.
    prompt = "Once upon a time there was a little dog. " * (4 * 1024 * 1024 // 42)
    body = json.dumps({"prompt": prompt, "max_tokens": 1})
    results = {}
    big = threading.Thread(target=post_raw, args=(s.port, "/v1/completions", body, results, "big"))
    big.start()
    while "big_sent" not in results and big.is_alive():
        time.sleep(0.001)
    health = []
    while big.is_alive():
        start = time.monotonic()
        status, _, _ = s.curl("/health", timeout=30)
        health.append((start, time.monotonic(), status))
    big.join()
    answered = results.get("big_answered", 0)
    during = [h for h in health if h[1] < answered]
    big_seconds = answered - results.get("big_sent", answered)
    worst = max((end - start for start, end, _ in health), default=0)
    check(results.get("big", "").startswith("HTTP/1.1 400"),
          f"the 4 MiB prompt is refused (longer than the context): {results.get('big')!r}")
    check(len(during) >= 1 and all(status == 200 for _, _, status in during) and
          worst < max(0.5 * big_seconds, 0.05),
          f"/health answered {len(during)} times while the 4 MiB request took "
          f"{big_seconds:.2f} s (slowest {worst:.3f} s)")


def expect_400(s, body, what, needle):
    status, _, text = s.curl("/v1/completions", body=body)
    check(status == 400 and needle in text, f"{what} -> 400 naming {needle!r} "
                                            f"(got {status}: {text[:200]})")


def test_caps(s):
    base = {"prompt": "Once upon a time", "max_tokens": 4}
    # 250k stop strings took other clients' requests from 0.14 s to 53 s.
    expect_400(s, dict(base, stop=[f"s{i}" for i in range(65)]), "65 stop strings",
               "stop must hold at most 64 strings")
    expect_400(s, dict(base, stop=["x" * 1025]), "a 1025-byte stop string", "at most 1024 bytes")
    expect_400(s, dict(base, stop_token_ids=[1] * 1025), "1025 stop token ids",
               "stop_token_ids must hold at most 1024")
    # n=128, logprobs 20 and max_tokens 2000 built a 1.41 GB response.
    expect_400(s, dict(base, n=128, logprobs=20, max_tokens=2000), "n=128 x logprobs 20",
               "response_too_large")
    status, _, text = s.curl("/v1/completions", body=dict(
        base, n=4, logprobs=5, stop=[f"s{i}" for i in range(64)], stop_token_ids=[1] * 1024))
    check(status == 200, f"requests within every cap still run (got {status}: {text[:200]})")


def test_unread_stream(s):
    # A client that sends a streaming request and never reads: before the fix the server
    # kept every token for it (+110 MB in 40 s for one connection).
    before = s.metrics()
    body = json.dumps({"prompt": "Once upon a time", "max_tokens": 480, "ignore_eos": True,
                       "n": 32, "logprobs": 5, "stream": True}).encode()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: a tiny window
    try:
        sock.connect(("127.0.0.1", s.port))
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                     b"application/json\r\nContent-Length: " + str(len(body)).encode() +
                     b"\r\n\r\n" + body)
        deadline = time.time() + 60
        while time.time() < deadline:
            m = s.metrics()
            aborted = m.get("rapide_engine_requests_aborted_total", 0) - \
                before.get("rapide_engine_requests_aborted_total", 0)
            if aborted >= 1 and m["rapide_kv_blocks_used"] == 0:
                break
            time.sleep(0.1)
        check(aborted >= 1 and m["rapide_kv_blocks_used"] == 0 and
              m.get('rapide_requests_total{endpoint="completions",status="499"}', 0) >= 1,
              f"a stream nobody reads is aborted past --max-pending-bytes and its KV freed "
              f"({aborted:.0f} aborted, {m['rapide_kv_blocks_used']:.0f} KV blocks used)")
    finally:
        sock.close()
    status, _, _ = s.curl("/health")
    check(status == 200, "server fine after the unread stream")


def main():
    require_shared(SHARED, "models/stories260K/stories260K.gguf")
    with RapideServer(BINARY, ["-m", MODEL, "--max-body", "8MiB",
                               "--max-pending-bytes", "256KiB"]) as s:
        try:
            test_caps(s)
            test_unread_stream(s)
            test_big_prompt_does_not_stall(s)
        except Exception:
            print(s.log()[-4000:])
            raise
    return report()


if __name__ == "__main__":
    sys.exit(main())
