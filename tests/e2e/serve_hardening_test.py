#!/usr/bin/env python3
"""Hostile and careless requests to `rapide serve` (issue 18): each is answered with a 4xx,
and the server keeps serving.

usage: serve_hardening_test.py RAPIDE_BINARY SHARED_DIR
Covers a chunked request with an oversized or endless trailer, JSON nested ~60k levels deep
(in a field and in `tools`), a number beyond double's range, sampling parameters the sampler
cannot honour, an empty --api-key, the lower-case "bearer" scheme, and grammars naming code
points that are not characters (issue 53).
"""
import json
import os
import socket
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from checks import check, report  # noqa: E402
from require_shared import require_shared, shared_dir  # noqa: E402
from attack_bodies import deep_json_chat_bodies, nested  # noqa: E402
from serve_fixture import RapideServer  # noqa: E402

BINARY, SHARED = sys.argv[1], shared_dir(sys.argv[2])
MODEL = os.path.join(SHARED, "models/stories260K/stories260K.gguf")
KEY = "sk-e2e-secret"



def raw_exchange(server, head, chunks, timeout=30):
    """Sends `head` and then each of `chunks` on one connection; returns the status line
    of the answer ('' when the server closed without one)."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=timeout) as sock:
        try:
            sock.sendall(head)
            for chunk in chunks:
                sock.sendall(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered and closed before taking everything: read the answer
        data = b""
        try:
            while b"\r\n" not in data:
                piece = sock.recv(4096)
                if not piece:
                    break
                data += piece
        except (ConnectionResetError, socket.timeout):
            pass
        return data.split(b"\r\n", 1)[0].decode(errors="replace")


def curl(server, path, **kw):
    """server.curl, but a dropped connection is status 0 (to report, not to raise)."""
    try:
        return server.curl(path, **kw)
    except RuntimeError as e:
        return 0, {}, str(e)


def alive(server, what):
    status, _, _ = curl(server, "/health", timeout=10)
    check(server.proc.poll() is None and status == 200, f"server alive after {what}")


def test_trailers(s):
    head = (b"GET /health HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
    # One 64 KiB trailer field: Beast's field store throws std::length_error on it.
    trailer = b"0\r\nX-Big: " + b"a" * (64 * 1024) + b"\r\n\r\n"
    line = raw_exchange(s, head, [trailer])
    check(" 400 " in line + " ", f"64 KiB trailer field -> 400 (got {line!r})")
    alive(s, "a 64 KiB trailer field")
    if s.proc.poll() is not None:
        return
    # Trailers without end, many small fields: bounded like the head, far below --max-body.
    many = [b"0\r\n"] + [b"X-T: " + b"b" * 1000 + b"\r\n"] * 1024
    line = raw_exchange(s, head, many)
    check(" 400 " in line + " ", f"1 MB of trailer fields -> 400 (got {line!r})")
    alive(s, "1 MB of trailer fields")


def test_deep_json(s):
    depth = 60000
    for what, body in deep_json_chat_bodies(depth):
        status, _, text = curl(s, "/v1/chat/completions", key=KEY, raw=body, timeout=30)
        check(status == 400 and "invalid_json" in text,
              f"chat with {what} nested {depth} deep -> 400 (got {status}: {text[:160]})")
        alive(s, f"JSON nested {depth} deep in {what}")
        if s.proc.poll() is not None:
            return
    # Ordinary nesting is still fine.
    status, _, text = curl(s, "/v1/chat/completions", key=KEY, body={
        "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2,
        "metadata": json.loads(nested(20))})
    check(status in (200, 400) and (status == 200 or "invalid_json" not in text),
          f"20 levels are not refused as too deep (got {status}: {text[:160]})")


def test_out_of_range(s):
    for raw, what in [
        ('{"prompt": "x", "max_tokens": 2, "temperature": 1e400}', "temperature 1e400"),
        ('{"prompt": "x", "max_tokens": 2, "repetition_penalty": 1e-45}',
         "repetition_penalty 1e-45"),
    ]:
        status, _, text = curl(s, "/v1/completions", key=KEY, raw=raw)
        check(status == 400, f"{what} -> 400 (got {status}: {text[:160]})")
    # min_tokens bans the stop tokens; with every token one, nothing could be sampled.
    status, _, text = curl(s, "/v1/completions", key=KEY, body={
        "prompt": "x", "max_tokens": 4, "min_tokens": 2, "stop_token_ids": list(range(512))})
    check(status == 400 and "min_tokens" in text,
          f"min_tokens with every token a stop token -> 400 (got {status}: {text[:160]})")
    alive(s, "out-of-range numbers")


def test_grammar_code_points(s):
    # Issue 53 N6: this grammar compiled and the output showed U+FFFD. Only Unicode scalar
    # values are characters: beyond U+10FFFF, or a surrogate, is a 400 naming the field.
    for grammar in ['root ::= "\\U7FFFFFFF"', 'root ::= [a-\\U00110000]',
                    'root ::= "\\uD800"']:
        status, _, text = curl(s, "/v1/completions", key=KEY,
                               body={"prompt": "x", "max_tokens": 4, "grammar": grammar})
        try:
            param = json.loads(text)["error"]["param"]
        except (ValueError, KeyError, TypeError):
            param = None
        check(status == 400 and param == "grammar",
              f"grammar {grammar} -> 400 naming grammar (got {status}: {text[:160]})")
    alive(s, "grammars naming non-characters")


def test_bearer_case(s):
    status, _, text = curl(s, "/v1/models", headers=[f"Authorization: bearer {KEY}"])
    check(status == 200, f"lower-case 'bearer' scheme accepted (got {status}: {text[:120]})")


def test_requests(s):
    check("authentication on" in s.log(), "the log says authentication is on")
    test_bearer_case(s)
    test_out_of_range(s)
    test_grammar_code_points(s)


def test_empty_api_key():
    # `--api-key "$UNSET"`: before the fix the server started, open to everyone.
    proc = subprocess.Popen([BINARY, "serve", "--host", "127.0.0.1", "--port", "0", "-m", MODEL,
                             "--api-key", ""], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        output, _ = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        output, _ = proc.communicate()
    check(proc.returncode not in (0, None, -9) and "api-key" in output,
          f"--api-key '' refused at start (exit {proc.returncode}: {output[-200:]!r})")


def main():
    require_shared(SHARED, "models/stories260K/stories260K.gguf")
    test_empty_api_key()
    # A fresh server per group, so that one crash does not hide the others' results.
    for group in (test_requests, test_deep_json, test_trailers):
        with RapideServer(BINARY, ["-m", MODEL, "--api-key", KEY, "--max-body", "256KiB"]) as s:
            try:
                group(s)
            except Exception:
                print(s.log()[-4000:])
                raise
            if s.proc.poll() is not None:
                print(s.log()[-2000:])
    return report()


if __name__ == "__main__":
    sys.exit(main())
