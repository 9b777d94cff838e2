#!/usr/bin/env python3
"""The red-team as code (issue 53): every attack of issues 18 and 53 that a live server can be
sent, each while a victim stream runs, against one real `rapide serve`.

usage: adversarial_test.py RAPIDE_BINARY SHARED_DIR

One `rapide serve` on llama-2-tiny-random (a 32000-token vocabulary: grammar masks walk a
57507-node trie, as on real models) with an API key, a 16 MiB KV budget, 4 io threads, a 2 s
header timeout and a 256 KiB pending-bytes cap. A victim process streams plain greedy
completions back to back for the whole run and timestamps every event (a process of its own,
so that this process building 2-MB bodies cannot delay its reads). Each attack is sent while
the victim streams; per attack the test checks that
  * the server answers as it should: the right 4xx naming the problem, or a clean close;
  * the server stays up: the process lives and GET /health answers 200;
  * the victim keeps its pace over the attack and SETTLE_S after it: the p99 of its
    inter-token gaps stays under P99_BOUND (see VICTIM BOUNDS below), and its longest silence
    (any two consecutive events, time to first token included) under MAX_SILENCE_S.
At the end no request was answered with a 5xx (/metrics), and nothing is left running.

Attack -> check. "here" is a check of this test (the attack's name in its output);
other rows name the test that covers a finding a live server cannot be sent.

| finding | attack | covered by |
|---|---|---|
| 53 N1 | guided_regex (.*){2000}; schema pattern (.*){10000}; (x?){10000}x{10000}; anyOf of 2^16 leaves; GBNF ((("x"?){20}){20}){20} | here: 400 naming the construct within ADMISSION_S |
| 53 N1 | admitted but costly per token: (.*){250}, (.+){2000}, also streamed and abandoned | here: 200 or 400 on the per-token limit; the engine is idle after; e2e_serve_grammar_attacks, `rapide batch` lines |
| 53 N2 | schema with 5,000 and 40,000 optional properties (~1.2 MB) | here: 400 within ADMISSION_S; batch: e2e_serve_grammar_attacks |
| 53 N3 | embeddings of 100,000 inputs; 300,001 tokens; an input past the context | here: 400 too_many_inputs / too_many_tokens / context_length_exceeded |
| 53 N3 | a 300,000-token embeddings request its client abandons | here: its job leaves the engine within 2 s, logged 499 |
| 53 N4 | POST /tokenize of 3.6 MB beside one of 1 MB; /detokenize of 400,000 ids | here: 200; /health and a 4-token completion answer within 2 s meanwhile |
| 53 N5 | the first GET /v1/engine/state | here: peak RSS (VmHWM) grows < 256 MiB; first attack, before anything else raises it |
| 53 N6 | GBNF "\\U7FFFFFFF", [a-\\U00110000], "\\uD800" | here: 400 on param grammar |
| 53 old 18 | tokenizer.json merges `1`, `"x"`, `{}`, junk entries | HfLoader.MergesThatAreNoListOfMergesAreCorrupt (a model file, not a request) |
| 53 empty key | RAPIDE_API_KEY= (set, empty); --api-key '' | here: `rapide serve` exits 2 naming it; CliConventions.AnEmptyApiKeyInAnyFormExitsTwo (every form) |
| 18.1 | chunked request with a 64 KiB trailer field; 1 MB of trailer fields | here: 400 |
| 18.2 | JSON nested 60,000 deep in a field, in tools, in a message | here: 400 invalid_json; ProtocolTest.DeepNestingAndHugeNumbersAreInvalidJson |
| 18.3 | `rapide batch -o` naming the input, a symlink to it, an unrelated file | batch_files (test_wrong_files) |
| 18.4 | one deeply nested line in a batch input | batch_files (test_deep_line) |
| 18.5 | resume by line number | ResumePlan.*, BatchRunnerTest.ResumeMatchesAnsweredRequestsByCustomIdWhereverTheyMoved, BatchRunnerTest.DuplicateCustomIdsStopTheBatchBeforeAnythingRuns, batch_files |
| 18.6 | forged offload block size (90 GB) | OffloadTest.AForgedHugeStoredSizeIsCorruptNotAnAllocation; bench/soak.sh tampering |
| 18.7 | FIFOs as offload blocks, model file, HF config | OffloadTest.AFifoInPlaceOfABlockIsCorruptNotAHang, LoadModel.RefusesAFifoWithoutBlocking; bench/soak.sh |
| 18.8 | a 3.9 MB prompt (past the context) parsed and tokenized | here: 400, /health answers within 2 s meanwhile; e2e_serve_limits (4 MiB) |
| 18.9 | n=16 with 250,000 stop strings; 65 stops; a 1025-byte stop; 1025 stop ids; n x max_tokens x logprobs; n, max_tokens, logprobs far out of range | here: 400 naming the cap; SamplingParamsTest.* |
| 18.10 | a streaming client that never reads (n=8, logprobs 5) | here: aborted past --max-pending-bytes, 499 |
| 18.11 | 500 idle connections; a head dribbled a byte at a time (slowloris) | here: /health answers; the dribbler is dropped after --header-timeout; e2e_serve_connections (the cap, eviction, the descriptor limit) |
| 18.12 | requests on fresh connections with 4 io threads | here: 200 of 200 answered; e2e_serve_connections (3,000) |
| 18.13 | loader size arithmetic; a 100 MB metadata array | Llama2c.SizesWhoseArithmeticOverflowsAreRejected, GgufCorrupt.MetadataArraysBeyondTheItemBudgetAreRejected, GgufCorrupt.* |
| 18.14 | `rapide bench`: an oversized trailer or an endless SSE line | BenchSse.EndlessLineOrEventOverflowsInsteadOfGrowing, BenchHttp.EveryFailureIsRecordedAndTheRunCompletes |
| 18.15 | empty --api-key; lower-case "bearer"; auth bypass attempts | here: exit 2; 200 for "bearer"; 401 on every protected route without, with a wrong or a Basic key, a key in the query, x-api-key off /v1/messages, dot segments |
| 18.16 | temperature 1e400; repetition_penalty 1e-45 | here: 400 |
| 18.16 | min_tokens with every token a stop token | e2e_serve_hardening (needs a 512-token vocabulary: 32000 stop ids are past the 1024 cap here) |
| 18.17 | HEAD; an HTTP/1.0 stream; Expect: 100-continue; a half-closed client | here: no body / no chunked / 100 first / answered |
| 18.18 | /v1/models shows the model's path | here: it does not |
| 18.18 | broken tokenizer.json vocab; batch -i DIRECTORY; a corrupt middle batch record | HfLoader.RejectsEmptyOrBrokenVocabularies, batch_files (test_directory_input), RecordJournal.CorruptLineInTheMiddleIsReportedAndTheRecordsAfterItKept |
| 18 soak | mixed load, hang-ups, malformed requests, offload tampering for minutes | bench/soak.sh (figures in docs/hardening.md) |
| HTTP | a 70 KiB header; 2,000 headers; chunk sizes that are not hex or overflow 64 bits; chunks past --max-body; Content-Length past --max-body; Content-Length with Transfer-Encoding; two Content-Lengths; a negative one; a garbage request line; binary junk; a body shorter than its Content-Length | here: 400 / 413 and a close, or a clean close |
| JSON | empty, truncated, trailing garbage, not an object, NaN, invalid UTF-8 bytes, a lone surrogate escape; 87 wrong-typed fields | here: 400 (never a 5xx) |
| prompt | a prompt of more tokens than the context (text and token ids) | here: 400 context_length_exceeded |
| stream | 16 streams hung up after their first token | here: all aborted, nothing left running but the victim |
| routes | unknown route; wrong method | here: 404, 405 |

VICTIM BOUNDS. The victim's unloaded ITL p99 is measured at the start; the bound is
max(P99_FACTOR x that, P99_FLOOR_S). On the 2-core machine this was written on, with other
builds keeping its load average at 4-8, five runs measured an unloaded p99 of 3.2-6.6 ms (the
tiny model decodes a token in ~0.2 ms; the p99 is scheduling noise) and, under the attacks,
p99 of at most 15 ms and silences of at most 336 ms (121-336 ms unloaded too: preemption by
the other builds). The floor, 40 ms, is ~2.7x the worst p99 measured under attack, for a
machine busier still; 5x the unloaded p99 is 16-33 ms. A stall is a silence past
MAX_SILENCE_S (1 s, ~3x the worst measured, the bound of e2e_serve_bounded_endpoints): one step
that serves an admitted grammar attack may spend the per-token grammar work limit (1.23 M
matcher steps here, 0.07-0.2 s), never more. Before the fixes the victim stalled 4.5 s (N4),
1-3 s (N5), 31 s and more (N1), 271 s (N3); a small request waited 10 s behind two large
/tokenize bodies (the request workers; fixed with this suite).
Under AddressSanitizer (scripts/sanitize.sh runs this suite too; `rapide --version` says
"build Sanitize") the attacks' own work runs 2-5x slower while the victim's unloaded p99 stays
at 4-5 ms: the steps serving an admitted grammar attack then take 0.2-0.5 s each (the per-token
work limit at ASan's speed; p99 163 ms measured beside (.+){2000}), so the p99 bound says
nothing there and is not checked; the silence bound (no stall past 1 s) and every answer are.
"""
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from attack_bodies import anyof_tree, deep_json_chat_bodies, optional_properties, schema  # noqa: E402,E501
from checks import check, report  # noqa: E402
from require_shared import require_shared, shared_dir  # noqa: E402
from serve_fixture import RapideServer, read_all, status_kib  # noqa: E402

MODEL_PATH = "models/llama2-tiny-random/llama-2-tiny-random.gguf"
KEY = "sk-adversarial"
CONTEXT = 4096  # llama-2-tiny-random's context_length

SETTLE_S = 0.4        # the victim is watched this long after each attack's answer too
P99_FLOOR_S = 0.040   # see VICTIM BOUNDS in the docstring
P99_FACTOR = 5.0
MAX_SILENCE_S = 1.0
ADMISSION_S = 3.0     # a refusal at admission (grammar cost model) within this
HWM_GROWTH_KIB = 256 * 1024

VICTIM_BODY = {"prompt": "Once upon a time", "max_tokens": 1500, "ignore_eos": True,
               "temperature": 0, "stream": True}


# ---------------------------------------------------------------- the victim (own process)

def victim_main(port):
    """Streams greedy completions back to back until killed; prints one line per event:
    S t (request sent), F t (first token), T t gap (a later token), D t ([DONE]), E what."""
    body = json.dumps(VICTIM_BODY)
    out = sys.stdout
    while True:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            out.write(f"S {time.monotonic():.6f}\n")
            out.flush()
            conn.request("POST", "/v1/completions", body,
                         {"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"})
            resp = conn.getresponse()
            if resp.status != 200:
                out.write(f"E status {resp.status}\n")
                out.flush()
                time.sleep(0.05)
                continue
            last, done = None, False
            while True:
                line = resp.readline()
                if not line:
                    break
                if not line.startswith(b"data: "):
                    continue
                t = time.monotonic()
                if line.strip() == b"data: [DONE]":
                    out.write(f"D {t:.6f}\n")
                    done = True
                elif last is None:
                    out.write(f"F {t:.6f}\n")
                else:
                    out.write(f"T {t:.6f} {t - last:.6f}\n")
                out.flush()
                last = t
                if done:
                    break
            if not done:
                out.write("E the stream ended without [DONE]\n")
                out.flush()
            conn.close()
        except (OSError, http.client.HTTPException) as e:
            out.write(f"E {type(e).__name__}: {e}\n".replace("\n", " ") + "\n")
            out.flush()
            time.sleep(0.05)


class Victim:
    def __init__(self, port):
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--victim",
                                      str(port)], stdout=subprocess.PIPE, text=True, bufsize=1)
        self.lock = threading.Lock()
        self.events = []  # times of every event, in order
        self.gaps = []    # (time, gap) of token events after the first of a stream
        self.errors = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            kind, _, rest = line.strip().partition(" ")
            with self.lock:
                if kind == "E":
                    self.errors.append(rest)
                    continue
                parts = rest.split()
                t = float(parts[0])
                self.events.append(t)
                if kind == "T":
                    self.gaps.append((t, float(parts[1])))

    def stop(self):
        self.proc.kill()
        self.proc.wait()

    def window(self, start, end):
        """(ITL p99, count, longest silence) of the victim over [start, end]."""
        # Wait for the reader to pass `end` (an event after it), or give up at the silence
        # bound: then the silence runs to now.
        deadline = time.monotonic() + MAX_SILENCE_S + 1.0
        while time.monotonic() < deadline:
            with self.lock:
                if self.events and self.events[-1] >= end:
                    break
            time.sleep(0.01)
        with self.lock:
            events = list(self.events)
            gaps = sorted(g for t, g in self.gaps if start <= t <= end)
        now = time.monotonic()
        silence = 0.0
        points = events + ([now] if not events or events[-1] < end else [])
        for a, b in zip(points, points[1:]):
            if b >= start and a <= end:
                silence = max(silence, min(b, end) - max(a, start))
        p99 = gaps[min(len(gaps) - 1, int(0.99 * len(gaps)))] if gaps else float("inf")
        return p99, len(gaps), silence


# ---------------------------------------------------------------- HTTP helpers

class Http:
    def __init__(self, server):
        self.server = server
        self.port = server.port

    def request(self, method, path, body=None, key=KEY, headers=None, raw=None, timeout=60):
        """(status, parsed JSON or text, seconds); status 0 when the connection failed."""
        h = {"Content-Type": "application/json"}
        if key:
            h["Authorization"] = f"Bearer {key}"
        h.update(headers or {})
        data = raw if raw is not None else (json.dumps(body) if body is not None else None)
        start = time.monotonic()
        try:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
            conn.request(method, path, data, h)
            resp = conn.getresponse()
            text = resp.read().decode(errors="replace")
            status = resp.status
            conn.close()
        except (OSError, http.client.HTTPException) as e:
            return 0, f"{type(e).__name__}: {e}", time.monotonic() - start
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = text
        return status, parsed, time.monotonic() - start

    def post(self, path, body=None, **kw):
        return self.request("POST", path, body, **kw)

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def exchange(self, data, chunks=(), half_close=False, timeout=20):
        """Sends raw bytes on a fresh connection; returns everything until the close."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as sock:
            try:
                sock.sendall(data)
                for chunk in chunks:
                    sock.sendall(chunk)
                if half_close:
                    sock.shutdown(socket.SHUT_WR)
            except (BrokenPipeError, ConnectionResetError):
                pass  # answered and closed before taking everything: read the answer
            return read_all(sock, timeout)


def status_of(answer):
    while answer.startswith(b"HTTP/1.1 1"):  # interim 1xx answers
        answer = answer.partition(b"\r\n\r\n")[2]
    parts = answer.split(b"\r\n", 1)[0].split()
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0


def message(body):
    if isinstance(body, dict):
        e = body.get("error", {})
        return f"{e.get('code')} {e.get('param')} {e.get('message', '')}"[:240]
    return str(body)[:240]


def code_of(body):
    return body.get("error", {}).get("code") if isinstance(body, dict) else None


def param_of(body):
    return body.get("error", {}).get("param") if isinstance(body, dict) else None


def is_400(result, needle=None, code=None, param=None, within=None):
    status, body, seconds = result
    ok = status == 400 and (needle is None or needle in message(body)) and \
        (code is None or code_of(body) == code) and (param is None or param_of(body) == param) \
        and (within is None or seconds < within)
    return ok, f"{status} in {seconds:.2f} s: {message(body)}"


def completion(fields, max_tokens=30):
    return {"prompt": "x", "max_tokens": max_tokens, **fields}


def health_while(h, busy, small=False):
    """/health (and with `small`, a 4-token completion) timings while the thread `busy` runs:
    (rounds, all 200, slowest seconds)."""
    times, statuses = [], []
    while busy.is_alive():
        status, _, seconds = h.get("/health", key=None, timeout=30)
        times.append(seconds)
        statuses.append(status)
        if small:
            status, _, seconds = h.post("/v1/completions", {"prompt": "Once", "max_tokens": 4},
                                        timeout=60)
            times.append(seconds)
            statuses.append(status)
    return len(times), all(s == 200 for s in statuses), max(times, default=0.0)


def in_thread(fn):
    result = {}
    thread = threading.Thread(target=lambda: result.setdefault("r", fn()))
    thread.start()
    return thread, result


# ---------------------------------------------------------------- the attacks
# Each returns [(ok, what)], one entry per property of the answer.

def n5_engine_state(h):
    pid = h.server.proc.pid
    before = status_kib(pid, "VmHWM")
    status, body, seconds = h.get("/v1/engine/state")
    grown = status_kib(pid, "VmHWM") - before
    bandwidth = body.get("machine", {}).get("read_bandwidth", 0) if isinstance(body, dict) else 0
    return [(status == 200 and bandwidth > 0,
             f"200 with a read bandwidth in {seconds:.2f} s"),
            (grown < HWM_GROWTH_KIB,
             f"peak RSS grew {grown / 1024:.0f} MiB (bound {HWM_GROWTH_KIB // 1024}; the 1 GiB "
             f"probe grew it ~1050 MiB)")]


N1_REFUSED = {
    "guided_regex (.*){2000}": ({"guided_regex": "(.*){2000}"}, "repetition"),
    "schema pattern (.*){10000}": (schema({"type": "string", "pattern": "(.*){10000}"}),
                                   "'pattern' '(.*){10000}'"),
    "(x?){10000}x{10000}": ({"guided_regex": "(x?){10000}x{10000}"}, "repetition"),
    "anyOf of 2^16 leaves": (schema(anyof_tree(16)), "65536 alternatives"),
    'GBNF ((("x"?){20}){20}){20}': ({"grammar": 'root ::= ((("x"?){20}){20}){20}'},
                                    "can match the empty string"),
}


def n1_refused(fields, needle):
    return lambda h: [is_400(h.post("/v1/completions", completion(fields)), needle=needle,
                             within=ADMISSION_S)]


def n1_admitted(regex):
    def attack(h):
        status, body, seconds = h.post("/v1/completions", completion({"guided_regex": regex}))
        over = status == 400 and "per-token limit" in message(body)
        return [(status == 200 or over, f"{status} in {seconds:.2f} s {message(body)[:160]}")]
    return attack


def n1_abandoned_stream(h):
    # Streamed and abandoned after its first bytes: the engine must not keep paying for it
    # (before: the stall went on ~90 s after the client left).
    body = json.dumps(completion({"guided_regex": "(.+){2000}", "stream": True}, 200)).encode()
    with socket.create_connection(("127.0.0.1", h.port), timeout=10) as sock:
        sock.sendall(post_head("/v1/completions", len(body)) + body)
        try:
            sock.recv(1)
        except socket.timeout:
            pass
    return [idle_engine(h)]


def n2_optional(n):
    return lambda h: [is_400(h.post("/v1/completions", completion(schema(optional_properties(n)))),
                             needle=f"{n} optional properties", within=ADMISSION_S)]


def n3_caps(h):
    return [is_400(h.post("/v1/embeddings", {"input": ["h"] * 100000}), code="too_many_inputs"),
            is_400(h.post("/v1/embeddings", {"input": [[5] * 150] * 2000 + [[5]]}),
                   code="too_many_tokens"),
            is_400(h.post("/v1/embeddings", {"input": [[5] * (CONTEXT + 1)]}),
                   code="context_length_exceeded")]


def n3_abandoned(h):
    # 75 inputs of 4000 tokens (300,000, the most allowed): ~600 passes between engine steps.
    inputs = [[3 + (i * 7 + p) % 31000 for p in range(4000)] for i in range(75)]
    body = json.dumps({"input": inputs}).encode()
    before = h.server.metrics().get('rapide_requests_total{endpoint="embeddings",status="499"}', 0)
    sock = socket.create_connection(("127.0.0.1", h.port), timeout=30)
    sock.sendall(post_head("/v1/embeddings", len(body)) + body)
    queued = wait_metric(h, "rapide_engine_background_tasks", lambda v: v >= 1, 20)
    sock.close()
    gone = time.monotonic()
    left = wait_metric(h, "rapide_engine_background_tasks", lambda v: v == 0, 5)
    stopped = time.monotonic() - gone
    after = wait_metric(h, 'rapide_requests_total{endpoint="embeddings",status="499"}',
                        lambda v: v > before, 2)
    return [(queued >= 1, "the job ran between engine steps"),
            (left == 0 and stopped < 2.0 and after > before,
             f"it stopped {stopped:.2f} s after its client left, logged 499")]


def n4_tokenize(h):
    # The 3.6 MB text, and beside it a 1 MB one: both parse and tokenize off the io threads,
    # and two large bodies must not hold every request worker either (they did: a 4-token
    # completion waited 10 s behind two of them).
    content = "Once upon a time there was a little dog. " * (3_600_000 // 42)
    thread, result = in_thread(lambda: h.post("/tokenize", {"content": content}, timeout=120))
    second, _ = in_thread(lambda: h.post("/tokenize", {"content": content[:1_000_000]},
                                         timeout=120))
    time.sleep(0.2)  # both bodies are sent
    answers, all_ok, slowest = health_while(h, thread, small=True)
    thread.join()
    second.join()
    status, body, seconds = result["r"]
    count = body.get("count", len(body.get("tokens", []))) if isinstance(body, dict) else 0
    # 2 s: 0.5 s measured on a loaded 2-core machine (the tokenizing worker, the engine and
    # both clients share its cores), 10 s before large bodies had a worker of their own.
    return [(status == 200 and count > 100000, f"{status}: {count} tokens in {seconds:.1f} s"),
            (answers >= 2 and all_ok and slowest < 2.0,
             f"{answers // 2} rounds of /health and a 4-token completion answered meanwhile, "
             f"slowest {slowest:.3f} s (bound 2 s)")]


def n4_detokenize(h):
    tokens = [3 + i % 31000 for i in range(400_000)]
    status, body, seconds = h.post("/detokenize", {"tokens": tokens}, timeout=120)
    return [(status in (200, 400), f"{status} in {seconds:.2f} s {message(body)[:120]}")]


def n6_code_points(h):
    results = []
    for grammar in ['root ::= "\\U7FFFFFFF"', 'root ::= [a-\\U00110000]', 'root ::= "\\uD800"']:
        ok, what = is_400(h.post("/v1/completions", completion({"grammar": grammar}, 4)),
                          param="grammar")
        results.append((ok, f"{grammar}: {what}"))
    return results


def empty_key(binary, model):
    def attack(h):
        results = []
        for env, args, needle in [({"RAPIDE_API_KEY": ""}, [], "RAPIDE_API_KEY"),
                                  ({}, ["--api-key", ""], "--api-key is empty")]:
            proc = subprocess.run([binary, "serve", "--host", "127.0.0.1", "--port", "0", "-m",
                                   model] + args, env=dict(os.environ, **env),
                                  capture_output=True, text=True, timeout=60)
            output = proc.stdout + proc.stderr
            results.append((proc.returncode == 2 and needle in output,
                            f"{env or args}: exit {proc.returncode}: {output.strip()[-140:]!r}"))
        return results
    return attack


def post_head(path, length, extra=""):
    return (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Authorization: Bearer {KEY}\r\nContent-Length: {length}\r\n{extra}\r\n").encode()


def h1_trailers(h):
    head = (b"GET /health HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
    big = h.exchange(head, [b"0\r\nX-Big: " + b"a" * (64 * 1024) + b"\r\n\r\n"])
    many = h.exchange(head, [b"0\r\n"] + [b"X-T: " + b"b" * 1000 + b"\r\n"] * 1024)
    return [(status_of(big) == 400, f"64 KiB trailer field: {big[:60]!r}"),
            (status_of(many) == 400, f"1 MB of trailer fields: {many[:60]!r}")]


def h2_deep_json(h):
    results = []
    for what, raw in deep_json_chat_bodies(60000):
        ok, detail = is_400(h.post("/v1/chat/completions", raw=raw), code="invalid_json")
        results.append((ok, f"{what}: {detail}"))
    return results


def h8_long_prompt(h):
    # 3.9 MB of text: within --max-body (4 MiB), far past the 4096-token context. It is parsed
    # and tokenized on a request worker; /health must keep answering meanwhile.
    prompt = "Once upon a time there was a little dog. " * (3_900_000 // 42)
    thread, result = in_thread(lambda: h.post("/v1/completions",
                                              {"prompt": prompt, "max_tokens": 1}, timeout=120))
    answers, all_ok, slowest = health_while(h, thread)
    thread.join()
    ok, detail = is_400(result["r"], code="context_length_exceeded")
    # 2 s: up to 0.47 s measured on a loaded 2-core machine; before the fix /health answered
    # once, after 3.8 s (e2e_serve_limits checks it too, alone, with a 4 MiB prompt).
    return [(ok, detail), (answers >= 1 and all_ok and slowest < 2.0,
                           f"/health answered {answers} times meanwhile, slowest {slowest:.3f} s "
                           f"(bound 2 s)")]


def h9_caps(h):
    base = {"prompt": "Once upon a time", "max_tokens": 4}
    cases = [
        ("n=16, 250,000 stop strings", dict(base, n=16, stop=[f"s{i}" for i in range(250000)]),
         "stop"),
        ("65 stop strings", dict(base, stop=[f"s{i}" for i in range(65)]), "stop"),
        ("a 1025-byte stop string", dict(base, stop=["x" * 1025]), "stop"),
        ("1025 stop token ids", dict(base, stop_token_ids=[1] * 1025), "stop_token_ids"),
        ("n=128 x logprobs 20 x max_tokens 2000", dict(base, n=128, logprobs=20, max_tokens=2000),
         None),
        ("n=1,000,000", dict(base, n=1000000), "n"),
        ("max_tokens 10^12", dict(base, max_tokens=10 ** 12), "max_tokens"),
        ("logprobs 100,000", dict(base, logprobs=100000), "logprobs"),
        ("chat top_logprobs 1000", {"messages": [{"role": "user", "content": "hi"}],
                                    "max_tokens": 2, "logprobs": True, "top_logprobs": 1000},
         "top_logprobs"),
    ]
    results = []
    for what, body, param in cases:
        path = "/v1/chat/completions" if "messages" in body else "/v1/completions"
        ok, detail = is_400(h.post(path, body), param=param, within=5.0)
        results.append((ok, f"{what}: {detail}"))
    return results


def h10_unread_stream(h):
    before = h.server.metrics()
    body = json.dumps({"prompt": "Once upon a time", "max_tokens": 3000, "ignore_eos": True,
                       "n": 8, "logprobs": 5, "stream": True}).encode()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: a tiny window
    try:
        sock.connect(("127.0.0.1", h.port))
        sock.sendall(post_head("/v1/completions", len(body)) + body)
        name = "rapide_engine_requests_aborted_total"
        aborted = wait_metric(h, name, lambda v: v > before.get(name, 0), 30)
    finally:
        sock.close()
    return [(aborted > before.get(name, 0), "aborted past --max-pending-bytes (256 KiB)"),
            idle_engine(h)]


def h11_idle_connections(h):
    idle = []
    try:
        for _ in range(500):
            idle.append(socket.create_connection(("127.0.0.1", h.port), timeout=10))
        status, _, seconds = h.get("/health", key=None, timeout=10)
    finally:
        for sock in idle:
            sock.close()
    return [(status == 200 and seconds < 1.0,
             f"/health with 500 idle connections open: {status} in {seconds:.3f} s")]


def h11_slowloris(h):
    # A head sent a byte at a time: --header-timeout 2 bounds the whole head, not each read.
    head = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100
    start = time.monotonic()
    closed_after = None
    with socket.create_connection(("127.0.0.1", h.port), timeout=10) as sock:
        try:
            for byte in head:
                sock.sendall(bytes([byte]))
                time.sleep(0.05)
                if time.monotonic() - start > 8:
                    break
        except (BrokenPipeError, ConnectionResetError):
            closed_after = time.monotonic() - start
        if closed_after is None:
            sock.settimeout(8)
            try:
                while sock.recv(4096):
                    pass
            except (ConnectionResetError, socket.timeout):
                pass
            closed_after = time.monotonic() - start
    return [(closed_after < 4.0,
             f"the dribbling client is dropped after {closed_after:.1f} s (--header-timeout 2)")]


def h12_fresh_connections(h):
    import concurrent.futures
    body = json.dumps({"prompt": "Once", "max_tokens": 2, "temperature": 0}).encode()
    data = post_head("/v1/completions", len(body), "Connection: close\r\n") + body
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: h.exchange(data), range(200)))
    failed = [a[:80] for a in answers if status_of(a) != 200]
    return [(not failed, f"200 requests on fresh connections: {len(failed)} without a 200 "
                         f"{failed[:1]!r}")]


def h15_auth(h):
    results = []
    status, _, _ = h.get("/v1/models", key=None, headers={"Authorization": f"bearer {KEY}"})
    results.append((status == 200, f"lower-case 'bearer' accepted: {status}"))
    protected = [("GET", "/v1/models"), ("POST", "/v1/completions"),
                 ("POST", "/v1/chat/completions"), ("POST", "/v1/embeddings"),
                 ("GET", "/v1/engine/state"), ("POST", "/tokenize"), ("POST", "/detokenize"),
                 ("POST", "/completion"), ("POST", "/infill"), ("GET", "/props"),
                 ("GET", "/slots"), ("POST", "/v1/messages"), ("GET", "/dashboard/state")]
    body = {"prompt": "x", "max_tokens": 1}
    wrong = []
    for method, path in protected:
        for what, headers in [("no key", {}), ("a wrong key", {"Authorization": "Bearer nope"}),
                              ("Basic", {"Authorization": f"Basic {KEY}"}),
                              ("the key alone", {"Authorization": KEY}),
                              ("the key and a space", {"Authorization": f"Bearer {KEY} x"}),
                              ("an empty bearer", {"Authorization": "Bearer "})]:
            status, _, _ = h.request(method, path, body if method == "POST" else None, key=None,
                                     headers=headers)
            if status != 401:
                wrong.append(f"{method} {path} with {what}: {status}")
    for method, path, headers in [
            ("GET", f"/v1/models?api_key={KEY}", {}),
            ("POST", "/v1/completions", {"x-api-key": KEY}),  # only /v1/messages takes it
            ("GET", "/v1/../v1/models", {}), ("GET", "/health/../v1/models", {}),
            ("GET", "/v1//models", {}), ("GET", "/V1/models", {}), ("GET", "//v1/models", {}),
            ("GET", "/v1/models%00", {}), ("GET", "/v1/models/../../v1/engine/state", {})]:
        status, body_text, _ = h.request(method, path, body if method == "POST" else None,
                                         key=None, headers=headers)
        if status not in (401, 404):
            wrong.append(f"{method} {path} {headers}: {status} {str(body_text)[:80]}")
    results.append((not wrong, f"{len(protected) * 6 + 9} bypass attempts: 401 (or 404 for "
                               f"paths that are no route); wrong: {wrong[:4]}"))
    return results


def h16_numbers(h):
    return [is_400(h.post("/v1/completions",
                          raw='{"prompt": "x", "max_tokens": 2, "temperature": 1e400}')),
            is_400(h.post("/v1/completions",
                          raw='{"prompt": "x", "max_tokens": 2, "repetition_penalty": 1e-45}'))]


def h17_http_details(h):
    results = []
    answer = h.exchange(b"HEAD /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    head, _, rest = answer.partition(b"\r\n\r\n")
    results.append((status_of(answer) == 200 and rest == b"", f"HEAD: no body ({answer[:60]!r})"))
    body = json.dumps({"prompt": "Once", "max_tokens": 8, "stream": True}).encode()
    answer = h.exchange(post_head("/v1/completions", len(body)).replace(b"HTTP/1.1", b"HTTP/1.0")
                        + body)
    head, _, payload = answer.partition(b"\r\n\r\n")
    results.append((status_of(answer) == 200 and b"chunked" not in head.lower() and
                    payload.endswith(b"data: [DONE]\n\n"), "HTTP/1.0 stream: plain SSE"))
    with socket.create_connection(("127.0.0.1", h.port), timeout=10) as sock:
        sock.sendall(post_head("/v1/completions", len(body), "Expect: 100-continue\r\n"
                                                             "Connection: close\r\n"))
        sock.settimeout(5)
        try:
            interim = sock.recv(4096)
        except socket.timeout:
            interim = b""
        sock.sendall(body)
        sock.settimeout(20)
        rest = b""
        try:
            while piece := sock.recv(65536):
                rest += piece
        except socket.timeout:
            pass
    results.append((interim.startswith(b"HTTP/1.1 100") and status_of(interim + rest) == 200,
                    f"Expect: 100-continue: 100 then 200 ({interim[:30]!r})"))
    body = json.dumps({"prompt": "Once", "max_tokens": 4}).encode()
    answer = h.exchange(post_head("/v1/completions", len(body), "Connection: close\r\n") + body,
                        half_close=True)
    results.append((status_of(answer) == 200, f"half-closed client answered ({answer[:40]!r})"))
    return results


def h18_models_path(h, model):
    status, body, _ = h.get("/v1/models")
    text = json.dumps(body)
    return [(status == 200 and os.path.dirname(model) not in text,
             f"/v1/models names no path: {text[:120]}")]


def http_parsing(h):
    results = []

    def expect(what, data, statuses, chunks=()):
        answer = h.exchange(data, chunks)
        got = status_of(answer)
        results.append((got in statuses, f"{what}: {got} {answer[:70]!r}"))

    expect("a 70 KiB header", b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 70000 +
           b"\r\n\r\n", (400, 431))
    expect("2,000 headers", b"GET /health HTTP/1.1\r\nHost: x\r\n" +
           b"".join(b"X-H%d: %s\r\n" % (i, b"v" * 30) for i in range(2000)) + b"\r\n", (400, 431))
    chunked = post_head("/v1/completions", 0).replace(b"Content-Length: 0",
                                                      b"Transfer-Encoding: chunked")
    expect("a chunk size that is not hex", chunked + b"zz\r\nabc\r\n0\r\n\r\n", (400,))
    expect("a chunk size past 64 bits", chunked + b"fffffffffffffffffffff\r\nabc\r\n0\r\n\r\n",
           (400, 413))
    expect("chunks past --max-body", chunked,
           (413,), [b"100000\r\n" + b"a" * 0x100000 + b"\r\n"] * 5)
    expect("Content-Length past --max-body", post_head("/v1/completions", 50 << 20), (413,))
    expect("Content-Length with Transfer-Encoding",
           post_head("/v1/completions", 5, "Transfer-Encoding: chunked\r\n") + b"0\r\n\r\n", (400,))
    expect("two Content-Lengths", post_head("/v1/completions", 2, "Content-Length: 7\r\n") +
           b"{}", (400,))
    expect("a negative Content-Length", post_head("/v1/completions", -1) + b"{}", (400,))
    expect("a garbage request line", b"GARBAGE\r\n\r\n", (400,))
    expect("binary junk", bytes(range(256)) * 4, (400,))
    # A body shorter than its Content-Length, then a close: nothing to answer, nothing left.
    with socket.create_connection(("127.0.0.1", h.port), timeout=10) as sock:
        sock.sendall(post_head("/v1/completions", 1000) + b'{"prompt": "x"')
    results.append((True, "a body shorter than its Content-Length, then a close"))
    return results


def malformed_json(h):
    results = []
    for what, raw in [("an empty body", ""), ("truncated", '{"prompt": "x", "max_tok'),
                      ("trailing garbage", '{"prompt": "x"} xyz'), ("an array", "[1, 2]"),
                      ("a number", "42"), ("a string", '"prompt"'), ("null", "null"),
                      ("NaN", '{"prompt": "x", "temperature": NaN}'),
                      ("a comment", '{"prompt": "x" /* c */}'),
                      ("a lone surrogate escape", '{"prompt": "a\\ud800b", "max_tokens": 2}'),
                      ("invalid UTF-8 bytes", b'{"prompt": "a\xff\xfeb\xc0\xaf", "max_tokens": 2}'),
                      ("an overlong NUL", b'{"prompt": "a\xc0\x80b", "max_tokens": 2}')]:
        status, body, _ = h.post("/v1/completions", raw=raw)
        results.append((status == 400, f"{what}: {status} {message(body)[:100]}"))
    return results


WRONG_VALUES = ["x", -1, 1e30, 2 ** 64, None, [], {}, [[]], True, "1" * 1000]
FIELDS = ["prompt", "max_tokens", "temperature", "top_p", "n", "stop", "logprobs", "seed"]


def wrong_types(h):
    bad = []
    count = 0
    for field in FIELDS:
        for value in WRONG_VALUES:
            if field == "max_tokens" and value is None:
                continue  # null is "no limit": a legitimate 4095-token request, not an attack
            body = {"prompt": "Once", "max_tokens": 2, field: value}
            status, resp, _ = h.post("/v1/completions", body)
            count += 1
            if status >= 500 or status == 0:
                bad.append(f"{field}={json.dumps(value)[:20]}: {status} {message(resp)[:60]}")
    for messages in ["x", [], [{"role": 5}], [{"role": "user"}], [{"role": "user", "content": 5}],
                     [{"role": "nobody", "content": "x"}], [None], [[]]]:
        status, resp, _ = h.post("/v1/chat/completions", {"messages": messages, "max_tokens": 2})
        count += 1
        if status >= 500 or status == 0:
            bad.append(f"messages={json.dumps(messages)[:30]}: {status} {message(resp)[:60]}")
    return [(not bad, f"{count} wrong-typed fields: no 5xx ({bad[:4]})")]


def over_long_prompts(h):
    return [is_400(h.post("/v1/completions", {"prompt": [5] * (CONTEXT + 10), "max_tokens": 1}),
                   code="context_length_exceeded"),
            is_400(h.post("/v1/completions", {"prompt": "dog " * (CONTEXT + 10),
                                              "max_tokens": 1}), code="context_length_exceeded")]


def hang_ups(h):
    before = h.server.metrics().get("rapide_engine_requests_aborted_total", 0)
    body = json.dumps({"prompt": "Once upon a time", "max_tokens": 2000, "ignore_eos": True,
                       "stream": True}).encode()
    socks = []
    for _ in range(16):
        sock = socket.create_connection(("127.0.0.1", h.port), timeout=10)
        sock.sendall(post_head("/v1/completions", len(body)) + body)
        socks.append(sock)
    for sock in socks:
        sock.recv(1)  # its stream started
        sock.close()
    aborted = wait_metric(h, "rapide_engine_requests_aborted_total",
                          lambda v: v >= before + 16, 10)
    return [(aborted >= before + 16, f"{aborted - before:.0f} of 16 aborted"), idle_engine(h)]


def routes(h):
    s1, _, _ = h.get("/no/such/route")
    s2, _, _ = h.request("DELETE", "/v1/completions")
    s3, _, _ = h.request("GET", "/v1/completions")
    return [(s1 == 404 and s2 == 405 and s3 == 405, f"unknown route {s1}, DELETE {s2}, GET {s3}")]


def wait_metric(h, name, predicate, timeout):
    deadline = time.monotonic() + timeout
    while True:
        value = h.server.metrics().get(name, -1)
        if predicate(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.02)


def idle_engine(h):
    """Nothing but the victim left running (the victim's one sequence, or none between its
    streams) and no between-steps work."""
    def settled():
        m = h.server.metrics()
        return m.get("rapide_running_sequences", 9) <= 1 and \
            m.get("rapide_engine_background_tasks", 9) == 0 and \
            m.get("rapide_queue_length", 0) == 0
    deadline = time.monotonic() + 5
    while not settled() and time.monotonic() < deadline:
        time.sleep(0.02)
    return (settled(), "nothing left running but the victim")


# ---------------------------------------------------------------- the run

def five_xx(metrics):
    """The requests answered with a 5xx, by series."""
    return {k: v for k, v in metrics.items()
            if k.startswith("rapide_requests_total") and re.search(r'status="5\d\d"', k) and v}


def run_attack(h, victim, bound, rows, ident, name, attack):
    errors_before = five_xx(h.server.metrics())
    start = time.monotonic()
    try:
        results = attack(h)
    except Exception as e:  # an attack that breaks the client is a failed check, not the end
        results = [(False, f"the attack raised {type(e).__name__}: {e}")]
    answered = time.monotonic()
    time.sleep(SETTLE_S)
    end = time.monotonic()
    for ok, what in results:
        check(ok, f"{ident} {name}: {what}")
    status, _, seconds = h.get("/health", key=None, timeout=10)
    alive = h.server.proc.poll() is None and status == 200
    check(alive, f"{ident} {name}: the server is up (/health {status} in {seconds:.3f} s)")
    if alive:
        errors = {k: v - errors_before.get(k, 0) for k, v in five_xx(h.server.metrics()).items()
                  if v != errors_before.get(k, 0)}
        check(not errors, f"{ident} {name}: no 5xx {errors}")
    p99, n, silence = victim.window(start, end)
    check(n >= 10 and p99 <= bound and silence <= MAX_SILENCE_S,
          f"{ident} {name}: victim ITL p99 {p99 * 1000:.1f} ms over {n} tokens (bound "
          f"{bound * 1000:.0f} ms), longest silence {silence * 1000:.0f} ms (bound "
          f"{MAX_SILENCE_S * 1000:.0f} ms)")
    rows.append((ident, name, answered - start, p99, silence, n))
    return alive


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--victim":
        victim_main(int(sys.argv[2]))
        return 0
    binary, shared = sys.argv[1], shared_dir(sys.argv[2])
    require_shared(shared, MODEL_PATH)
    model = os.path.join(shared, MODEL_PATH)
    suite_start = time.monotonic()
    args = ["-m", model, "--api-key", KEY, "--kv-memory", "16MiB", "--http-threads", "4",
            "--header-timeout", "2", "--max-pending-bytes", "256KiB"]
    with RapideServer(binary, args) as server:
        h = Http(server)
        victim = Victim(server.port)
        rows = []
        # /health answered 503 while the model loaded: count only what comes after.
        errors_at_start = five_xx(server.metrics())
        try:
            time.sleep(3.0)  # the victim's unloaded pace
            p99, n, silence = victim.window(time.monotonic() - 2.5, time.monotonic())
            version = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout
            sanitized = "build Sanitize" in version  # see VICTIM BOUNDS
            bound = float("inf") if sanitized else max(P99_FACTOR * p99, P99_FLOOR_S)
            check(n >= 100, f"unloaded victim: ITL p99 {p99 * 1000:.2f} ms over {n} tokens, "
                            f"longest silence {silence * 1000:.0f} ms; bound "
                            f"{bound * 1000:.1f} ms")
            rows.append(("-", "unloaded", 0.0, p99, silence, n))
            attacks = [
                # First: the peak RSS is read before anything else raises it.
                ("53.N5", "first GET /v1/engine/state", n5_engine_state),
                *[("53.N1", name, n1_refused(fields, needle))
                  for name, (fields, needle) in N1_REFUSED.items()],
                ("53.N1", "(.*){250}, admitted", n1_admitted("(.*){250}")),
                ("53.N1", "(.+){2000}, admitted", n1_admitted("(.+){2000}")),
                ("53.N1", "(.+){2000} streamed, abandoned", n1_abandoned_stream),
                ("53.N2", "5,000 optional properties", n2_optional(5000)),
                ("53.N2", "40,000 optional properties", n2_optional(40000)),
                ("53.N3", "embeddings past the caps", n3_caps),
                ("53.N3", "300,000-token embeddings, abandoned", n3_abandoned),
                ("53.N4", "/tokenize of 3.6 MB", n4_tokenize),
                ("53.N4", "/detokenize of 400,000 ids", n4_detokenize),
                ("53.N6", "grammar code points that are not characters", n6_code_points),
                ("53.key", "empty RAPIDE_API_KEY / --api-key", empty_key(binary, model)),
                ("18.1", "chunked trailers", h1_trailers),
                ("18.2", "JSON nested 60,000 deep", h2_deep_json),
                ("18.8", "a 3.9 MB prompt", h8_long_prompt),
                ("18.9", "stop / n / max_tokens / logprobs caps", h9_caps),
                ("18.10", "a stream nobody reads", h10_unread_stream),
                ("18.11", "500 idle connections", h11_idle_connections),
                ("18.11", "slowloris head", h11_slowloris),
                ("18.12", "fresh connections, 4 io threads", h12_fresh_connections),
                ("18.15", "auth bypass attempts", h15_auth),
                ("18.16", "numbers out of range", h16_numbers),
                ("18.17", "HEAD, HTTP/1.0, 100-continue, half-close", h17_http_details),
                ("18.18", "/v1/models path", lambda hh: h18_models_path(hh, model)),
                ("HTTP", "malformed HTTP", http_parsing),
                ("JSON", "malformed JSON and UTF-8", malformed_json),
                ("JSON", "wrong-typed fields", wrong_types),
                ("prompt", "prompts past the context", over_long_prompts),
                ("stream", "16 hang-ups mid-stream", hang_ups),
                ("routes", "unknown route, wrong method", routes),
            ]
            for ident, name, attack in attacks:
                if not run_attack(h, victim, bound, rows, ident, name, attack):
                    print(server.log()[-4000:])
                    break
            m = server.metrics()
            errors = {k: v - errors_at_start.get(k, 0) for k, v in five_xx(m).items()
                      if v != errors_at_start.get(k, 0)}
            check(not errors, f"no 5xx answered during the run {errors}")
            check(not victim.errors, f"the victim's streams all ended well: {victim.errors[:3]}")
            check(server.proc.poll() is None, "the server is still running at the end")
        except Exception:
            print(server.log()[-4000:])
            raise
        finally:
            victim.stop()
    print(f"\n{'id':7} {'attack':48} {'answer s':>8} {'ITL p99 ms':>10} {'silence ms':>10} "
          f"{'tokens':>6}")
    for ident, name, seconds, p99, silence, n in rows:
        print(f"{ident:7} {name[:48]:48} {seconds:8.2f} {p99 * 1000:10.1f} {silence * 1000:10.0f} "
              f"{n:6d}")
    print(f"suite: {time.monotonic() - suite_start:.0f} s")
    return report()


if __name__ == "__main__":
    sys.exit(main())
