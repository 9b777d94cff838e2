#!/usr/bin/env python3
"""Soak load for `rapide serve` (driven by bench/soak.sh): for DURATION seconds, WORKERS
clients send a mix of well-formed streaming and whole requests, streams hung up mid-way,
oversized bodies, malformed JSON and malformed HTTP, while another thread tampers with the
KV offload directory (truncates, corrupts, deletes files, puts FIFOs and directories in their
place). Prints requests served, outcomes by kind, and the server's RSS after warm-up and at
the end; exits 1 if the server died, answered a 5xx, or its RSS grew.

usage: soak.py PORT SERVER_PID OFFLOAD_DIR DURATION_S [WORKERS]
"""
import collections
import http.client
import json
import os
import random
import socket
import stat
import sys
import threading
import time

PORT, PID, OFFLOAD, DURATION = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
WORKERS = int(sys.argv[5]) if len(sys.argv) > 5 else 8
MAX_BODY = 65536  # soak.sh starts the server with --max-body 65536
# RSS may settle during warm-up (allocator arenas, caches filling); after it, growth beyond
# this much is a leak.
WARMUP_FRACTION = 0.25
GROWTH_LIMIT_KIB = 16 * 1024

outcomes = collections.Counter()
lock = threading.Lock()
stop = threading.Event()
# Shared story openings: prompts repeat their prefixes, so the prefix cache fills, evicts to
# the offload directory and loads back from it (where the tampering bites).
PREFIXES = ["Once upon a time, there was a little girl named Lily. She loved to play",
            "One day, a big dog went to the park with his friend the cat. They",
            "Tom had a red ball. He liked to throw it very high. One day"]


def count(kind):
    with lock:
        outcomes[kind] += 1


def rss_kib():
    with open(f"/proc/{PID}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def request(method, path, body=None, headers=None, timeout=60):
    conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def classify(status, payload):
    if status == 200:
        return "ok"
    try:
        code = json.loads(payload)["error"].get("code") or "?"
    except (ValueError, KeyError, TypeError, AttributeError):
        code = "?"
    return f"{status} {code}"


def prompt(rng):
    return rng.choice(PREFIXES) + " " + " ".join(rng.choice(["and", "the", "sun", "was", "happy"])
                                                 for _ in range(rng.randint(0, 20)))


def well_formed(rng):
    stream = rng.random() < 0.6
    if rng.random() < 0.5:
        path, body = "/v1/completions", {"prompt": prompt(rng)}
    else:
        path, body = "/v1/chat/completions", {"messages": [{"role": "user", "content": prompt(rng)}]}
    body.update(max_tokens=rng.randint(1, 48), temperature=rng.choice([0, 0.8]), stream=stream,
                n=rng.choice([1, 1, 2]))
    status, payload = request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    if status == 200 and stream and not payload.rstrip().endswith(b"data: [DONE]"):
        return "stream without [DONE]"
    return ("stream " if stream else "whole ") + classify(status, payload)


def hang_up(rng):
    """Starts a stream and closes the socket after a few bytes (or before reading any)."""
    body = json.dumps({"prompt": prompt(rng), "max_tokens": 200, "stream": True}).encode()
    head = (f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", PORT), timeout=30) as s:
        s.sendall(head + body)
        if rng.random() < 0.7:
            s.recv(rng.randint(1, 2048))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    return "hang-up"


def oversized(rng):
    body = json.dumps({"prompt": "x" * (MAX_BODY + rng.randint(1, 4 * MAX_BODY))})
    try:
        status, payload = request("POST", "/v1/completions", body,
                                  {"Content-Type": "application/json"})
    except (ConnectionError, socket.timeout, http.client.HTTPException):
        return "oversized: closed"  # refused while the client was still sending
    return "oversized " + classify(status, payload)


MALFORMED = [
    b"{", b"", b"null", b"[]", b'{"prompt": 5}', b'{"prompt": "x", "temperature": 1e400}',
    b'{"prompt": "x", "max_tokens": -1}', b'{"messages": "hi"}', b'{"prompt": "x", "n": 100000}',
    b'{"prompt": "x", "logprobs": 99}', b'{"prompt": "\xff\xfe"}', b'{"prompt": [[-1]]}',
    b'{"prompt": "x", "stop": [' + b",".join([b'"s"'] * 5000) + b"]}",
    b'{"messages": [' + b"[" * 5000 + b"]" * 5000 + b"]}",
]


def malformed(rng):
    body = rng.choice(MALFORMED)
    if rng.random() < 0.3:  # a random byte flipped somewhere
        b = bytearray(body or b"{}")
        b[rng.randrange(len(b))] = rng.randrange(256)
        body = bytes(b)
    path = rng.choice(["/v1/completions", "/v1/chat/completions"])
    status, payload = request("POST", path, body, {"Content-Type": "application/json"})
    return "malformed " + classify(status, payload)


BAD_HTTP = [b"GARBAGE\r\n\r\n", b"GET / HTTP/9.9\r\n\r\n", b"GET /health HTTP/1.1\r\nHost\r\n\r\n",
            b"POST /v1/completions HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
            b"POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            b"GET /health HTTP/1.1\r\nX: " + b"a" * 70000 + b"\r\n\r\n"]


def bad_http(rng):
    with socket.create_connection(("127.0.0.1", PORT), timeout=30) as s:
        try:
            s.sendall(rng.choice(BAD_HTTP))
            answer = s.recv(64)
        except (ConnectionError, socket.timeout):
            return "bad http: closed"
    status = answer.split(b" ", 2)[1].decode(errors="replace") if answer.count(b" ") >= 1 else ""
    return f"bad http {status or 'closed'}"


KINDS = [(well_formed, 50), (hang_up, 15), (oversized, 5), (malformed, 20), (bad_http, 10)]


def worker(seed):
    rng = random.Random(seed)
    funcs, weights = zip(*KINDS)
    while not stop.is_set():
        f = rng.choices(funcs, weights)[0]
        try:
            count(f(rng))
        except (ConnectionError, socket.timeout, http.client.HTTPException, OSError) as e:
            count(f"{f.__name__}: {type(e).__name__}")


def tamper(seed):
    """Every ~0.2 s does one bad thing to one offloaded block file."""
    rng = random.Random(seed)
    while not stop.wait(0.2):
        try:
            files = [os.path.join(OFFLOAD, f) for f in os.listdir(OFFLOAD)]
            files = [f for f in files if os.path.isfile(f) and not f.endswith(".tmp")]
            if not files:
                continue
            f = rng.choice(files)
            action = rng.choice(["truncate", "flip", "garbage", "delete", "fifo", "dir", "grow"])
            if action == "truncate":
                os.truncate(f, rng.randrange(max(1, os.path.getsize(f))))
            elif action == "flip":
                with open(f, "r+b") as fh:
                    size = os.path.getsize(f)
                    if size:
                        fh.seek(rng.randrange(size))
                        fh.write(bytes([rng.randrange(256)]))
            elif action == "garbage":
                with open(f, "wb") as fh:
                    fh.write(os.urandom(rng.randint(0, 8192)))
            elif action == "grow":
                with open(f, "ab") as fh:
                    fh.write(b"\0" * rng.randint(1, 1 << 20))
            elif action == "delete":
                os.unlink(f)
            elif action in ("fifo", "dir"):
                os.unlink(f)
                (os.mkfifo if action == "fifo" else os.mkdir)(f)
            count(f"tamper {action}")
        except OSError:
            pass  # the server renamed or removed the file meanwhile


def main():
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(WORKERS)]
    threads.append(threading.Thread(target=tamper, args=(1000,)))
    start = time.time()
    for t in threads:
        t.start()
    rss_start = None
    rss_peak = 0
    while time.time() - start < DURATION:
        time.sleep(1)
        if not os.path.exists(f"/proc/{PID}"):
            break
        rss = rss_kib()
        rss_peak = max(rss_peak, rss)
        if rss_start is None and time.time() - start >= WARMUP_FRACTION * DURATION:
            rss_start = rss
    stop.set()
    for t in threads:
        t.join()
    alive = os.path.exists(f"/proc/{PID}")
    try:
        health = request("GET", "/health", timeout=10)[0] if alive else 0
    except OSError:
        health = 0
    rss_end = rss_kib() if alive else 0
    served = sum(n for k, n in outcomes.items() if k.startswith(("stream ok", "whole ok")))
    total = sum(n for k, n in outcomes.items() if not k.startswith("tamper"))
    print(f"soak: {DURATION:.0f} s, {WORKERS} clients: {total} requests, {served} served "
          f"({served / max(1e-9, time.time() - start):.1f}/s)")
    for kind, n in sorted(outcomes.items()):
        print(f"  {n:7d}  {kind}")
    print(f"server RSS: {rss_start or 0} KiB after warm-up, {rss_end} KiB at the end, "
          f"peak {rss_peak} KiB")
    failures = []
    if not alive or health != 200:
        failures.append(f"server not alive at the end (/health {health})")
    server_errors = {k: n for k, n in outcomes.items() if any(
        part.startswith("5") and len(part) == 3 for part in k.split())}
    if server_errors:
        failures.append(f"5xx answers: {server_errors}")
    if alive and rss_start and rss_end - rss_start > GROWTH_LIMIT_KIB:
        failures.append(f"RSS grew by {rss_end - rss_start} KiB after warm-up")
    for f in failures:
        print("soak: FAIL:", f)
    if not failures:
        print("soak: no crash, no 5xx, no RSS growth")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
