#!/usr/bin/env python3
"""Load for bench/distributed.sh's "disaggregation under interference" section (issue 21):
steady streaming chat users (short prompts) plus one long prompt arriving every few seconds,
against a running `rapide serve` (colocated or disaggregated; the API is the same).

Prints one JSON object: the chat users' TPOT (per request: the mean gap between its streamed
tokens after the first) p50/p99, their inter-token gap p99 and TTFT p50, the long prompts'
TTFT p50/max, total generated tokens per second, and the server's KV bytes moved
(/metrics rapide_kv_transfer_bytes_total; 0 when colocated).

usage: disagg_load.py --port P [--users 4] [--seconds 30] [--long-every 4] [--long-words 1500]
"""
import argparse
import http.client
import json
import statistics
import threading
import time


def percentile(values, q):
    if not values:
        return 0.0
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def stream(port, prompt, max_tokens, usage=None):
    """Streams one completion; returns its start and the arrival times of its text chunks.
    `usage` (a dict) receives the final usage."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    body = json.dumps({"model": "m", "prompt": prompt, "max_tokens": max_tokens,
                       "temperature": 0, "ignore_eos": True, "stream": True,
                       "stream_options": {"include_usage": True}})
    start = time.perf_counter()
    conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    response = conn.getresponse()
    if response.status != 200:
        raise RuntimeError(f"HTTP {response.status}: {response.read()[:300]!r}")
    times = []
    for line in response:
        line = line.strip()
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            continue
        event = json.loads(line[6:])
        if usage is not None and event.get("usage"):
            usage.update(event["usage"])
        if event.get("choices") and event["choices"][0].get("text"):
            times.append(time.perf_counter())
    conn.close()
    return start, times


def kv_bytes(port):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    for line in text.splitlines():
        if line.startswith("rapide_kv_transfer_bytes_total "):
            return float(line.split()[1])
    return 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--users", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--long-every", type=float, default=4, help="seconds between long prompts")
    ap.add_argument("--long-words", type=int, default=1500, help="about 1.3 tokens per word")
    ap.add_argument("--chat-tokens", type=int, default=48)
    args = ap.parse_args()

    lock = threading.Lock()
    tpots, gaps, chat_ttfts, long_ttfts, long_tokens = [], [], [], [], []
    generated = [0]
    stop_at = time.perf_counter() + args.seconds
    words = ("river stone garden lantern quiet morning harbor violet thunder maple candle "
             "silver meadow orbit pepper canyon").split()

    def chat_user(user):
        turn = 0
        while time.perf_counter() < stop_at:
            start, times = stream(args.port, f"User {user} turn {turn}: tell me a short story "
                                             f"about a {words[(user + turn) % len(words)]}.",
                                  args.chat_tokens)
            turn += 1
            with lock:
                generated[0] += len(times)
                if times:
                    chat_ttfts.append(times[0] - start)
                if len(times) > 1:
                    tpots.append((times[-1] - times[0]) / (len(times) - 1))
                    gaps.extend(b - a for a, b in zip(times, times[1:]))

    def long_prompts():
        i = 0
        while time.perf_counter() < stop_at:
            began = time.perf_counter()
            # A new first word each time: no prefix-cache hit between long prompts.
            text = f"Document {i}: " + " ".join(words[(i + k * 7) % len(words)]
                                                 for k in range(args.long_words))
            usage = {}
            start, times = stream(args.port, text, 1, usage)
            with lock:
                long_tokens.append(usage.get("prompt_tokens", 0))
                generated[0] += len(times)
                if times:
                    long_ttfts.append(times[0] - start)
            i += 1
            time.sleep(max(0.0, args.long_every - (time.perf_counter() - began)))

    kv_before = kv_bytes(args.port)
    began = time.perf_counter()
    threads = [threading.Thread(target=chat_user, args=(u,)) for u in range(args.users)]
    threads.append(threading.Thread(target=long_prompts))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - began
    print(json.dumps({
        "chat_requests": len(tpots),
        "chat_tpot_p50_ms": 1e3 * percentile(tpots, 0.5),
        "chat_tpot_p99_ms": 1e3 * percentile(tpots, 0.99),
        "chat_itl_p99_ms": 1e3 * percentile(gaps, 0.99),
        "chat_ttft_p50_ms": 1e3 * (statistics.median(chat_ttfts) if chat_ttfts else 0),
        "long_prompts": len(long_ttfts),
        "long_prompt_tokens": statistics.median(long_tokens) if long_tokens else 0,
        "long_ttft_p50_ms": 1e3 * (statistics.median(long_ttfts) if long_ttfts else 0),
        "long_ttft_max_ms": 1e3 * max(long_ttfts, default=0),
        "tokens_per_s": generated[0] / elapsed,
        "kv_bytes_moved": kv_bytes(args.port) - kv_before,
    }))


if __name__ == "__main__":
    main()
