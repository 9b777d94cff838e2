#!/usr/bin/env python3
"""Bounded load test of `rapide serve` on stories260K, loopback only.

usage: serve_load_test.py RAPIDE_BINARY SHARED_DIR [--clients 500]
Runs two bursts of N concurrent streaming clients (greedy, varied prompts and lengths; every
tenth client asks for 450 tokens and hangs up after a few chunks). Checks: every other request completes with
exactly the text and token count of the same request made alone (no token lost or
duplicated, batch invariance), the hang-ups are aborted and free their KV (/metrics), and
the server's memory after the second burst is back to its level after the first (nothing
retained per request). Prints the figures.
"""
import argparse
import asyncio
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from require_shared import require_shared, shared_dir  # noqa: E402
from serve_fixture import RapideServer  # noqa: E402

PROMPTS = ["Once upon a time", "The little dog", "Lily and Ben", "One day, a bird",
           "Tom had a red ball", "The sun was", "A girl named Sue", "In the park",
           "The big cat", "Mom said"]
LENGTHS = [8, 24, 48, 96]
HANGUP_EVERY = 10
HANGUP_AFTER_CHUNKS = 3
HANGUP_MAX_TOKENS = 450


async def stream_completion(port, body, hang_up_after=None):
    """Streams one completion over a raw socket. Returns (text, usage, ttft, chunks) or None
    for a deliberate hang-up."""
    start = time.perf_counter()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    payload = json.dumps(body).encode()
    writer.write(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                 b"Content-Type: application/json\r\nContent-Length: " +
                 str(len(payload)).encode() + b"\r\n\r\n" + payload)
    await writer.drain()
    status = (await reader.readline()).decode()
    if " 200 " not in status:
        rest = await reader.read(4096)
        raise RuntimeError(f"status {status.strip()}: {rest[:300]!r}")
    while (await reader.readline()) not in (b"\r\n", b""):
        pass
    text, usage, ttft, chunks, done, buffer = "", None, None, 0, False, b""
    while not done:
        size = int((await reader.readline()).strip(), 16)
        if size == 0:
            break
        buffer += await reader.readexactly(size)
        await reader.readexactly(2)
        while b"\n\n" in buffer:
            event, buffer = buffer.split(b"\n\n", 1)
            data = event.decode()[len("data: "):]
            if data == "[DONE]":
                done = True
                break
            chunk = json.loads(data)
            if chunk.get("usage"):
                usage = chunk["usage"]
            for c in chunk["choices"]:
                if c["text"] and ttft is None:
                    ttft = time.perf_counter() - start
                text += c["text"]
            chunks += 1
            if hang_up_after is not None and chunks >= hang_up_after:
                writer.close()
                return None
    writer.close()
    if not done:
        raise RuntimeError("stream ended without [DONE]")
    return text, usage, ttft, chunks


def wait_idle(server, timeout=30.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        m = server.metrics()
        if (m["rapide_running_sequences"] == 0 and m["rapide_queue_length"] == 0 and
                m["rapide_kv_blocks_used"] == 0 and m["rapide_requests_in_flight"] <= 1):
            return m
        time.sleep(0.05)
    return server.metrics()


async def burst(port, clients, expected):
    jobs = []
    for i in range(clients):
        prompt, length = PROMPTS[i % len(PROMPTS)], LENGTHS[(i // len(PROMPTS)) % len(LENGTHS)]
        body = {"prompt": prompt, "max_tokens": length, "temperature": 0, "stream": True,
                "stream_options": {"include_usage": True}}
        hang_up = HANGUP_AFTER_CHUNKS if i % HANGUP_EVERY == HANGUP_EVERY - 1 else None
        if hang_up:  # long enough to be still running when the client goes
            body.update(max_tokens=HANGUP_MAX_TOKENS, ignore_eos=True)
        jobs.append(((prompt, length), hang_up, stream_completion(port, body, hang_up)))
    start = time.perf_counter()
    results = await asyncio.gather(*(j[2] for j in jobs), return_exceptions=True)
    wall = time.perf_counter() - start
    errors, mismatches, completed, hung_up, tokens, ttfts = [], [], 0, 0, 0, []
    for (key, hang_up, _), r in zip(jobs, results):
        if isinstance(r, Exception):
            errors.append(repr(r))
        elif r is None:
            hung_up += 1
        else:
            text, usage, ttft, _ = r
            want_text, want_tokens = expected[key]
            if text != want_text or usage["completion_tokens"] != want_tokens:
                mismatches.append((key, text[:60], want_text[:60], usage, want_tokens))
            completed += 1
            tokens += usage["completion_tokens"]
            ttfts.append(ttft or 0.0)
    ttfts.sort()
    return {"wall_s": wall, "completed": completed, "hung_up": hung_up, "errors": errors,
            "mismatches": mismatches, "tokens": tokens,
            "ttft_p50_s": ttfts[len(ttfts) // 2] if ttfts else 0,
            "ttft_p99_s": ttfts[int(len(ttfts) * 0.99)] if ttfts else 0}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("shared")
    parser.add_argument("--clients", type=int, default=500)
    args = parser.parse_args()
    shared = shared_dir(args.shared)
    require_shared(shared, "models/stories260K/stories260K.gguf")
    model = os.path.join(shared, "models/stories260K/stories260K.gguf")
    failures = []
    with RapideServer(args.binary, ["-m", model, "--max-seqs", "128"]) as s:
        try:
            expected = {}
            for prompt in PROMPTS:
                for length in LENGTHS:
                    _, _, body = s.curl("/v1/completions", {"prompt": prompt, "max_tokens": length,
                                                            "temperature": 0})
                    r = json.loads(body)
                    expected[(prompt, length)] = (r["choices"][0]["text"],
                                                  r["usage"]["completion_tokens"])
            rss_start = s.rss_kib()
            for round_ in (1, 2):
                aborted_before = s.metrics()["rapide_engine_requests_aborted_total"]
                r = asyncio.run(burst(s.port, args.clients, expected))
                m = wait_idle(s)
                aborted = m["rapide_engine_requests_aborted_total"] - aborted_before
                rss = s.rss_kib()
                print(f"burst {round_}: {args.clients} streaming clients, {r['completed']} "
                      f"completed, {r['hung_up']} hung up ({aborted:.0f} aborted by the server), "
                      f"{len(r['errors'])} errors, {len(r['mismatches'])} mismatches; "
                      f"{r['tokens']} tokens in {r['wall_s']:.2f} s = "
                      f"{r['tokens'] / r['wall_s']:.0f} tok/s; client TTFT p50 "
                      f"{r['ttft_p50_s'] * 1e3:.0f} ms p99 {r['ttft_p99_s'] * 1e3:.0f} ms; "
                      f"after: KV used {m['rapide_kv_blocks_used']:.0f}, running "
                      f"{m['rapide_running_sequences']:.0f}, RSS {rss / 1024:.1f} MiB "
                      f"(before the bursts {rss_start / 1024:.1f} MiB)", flush=True)
                for e in r["errors"][:5]:
                    print("  error:", e)
                for mm in r["mismatches"][:5]:
                    print("  mismatch:", mm)
                hangups = args.clients // HANGUP_EVERY
                if r["errors"] or r["mismatches"] or r["completed"] != args.clients - hangups:
                    failures.append(f"burst {round_}: not every request completed exactly")
                # A hang-up racing the end of its stream can finish before the server sees
                # it, so not every hang-up is an abort; what must hold is that nothing is left
                # holding KV once the burst is over.
                if aborted < 0.9 * r["hung_up"] or m["rapide_kv_blocks_used"] != 0 or \
                        m["rapide_running_sequences"] != 0:
                    failures.append(f"burst {round_}: hang-ups did not free their KV")
                if round_ == 1:
                    rss_after_first = rss
                elif rss > rss_after_first * 1.05 + 8 * 1024:
                    failures.append(f"memory grew from {rss_after_first} KiB to {rss} KiB")
        except Exception:
            print(s.log()[-3000:])
            raise
    for f in failures:
        print("FAIL", f)
    print("load test", "failed" if failures else "passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
