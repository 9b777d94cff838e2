"""Starts a real `rapide serve` on a free loopback port for the e2e tests, and always stops it.

Usage:
    with RapideServer(binary, ["-m", model, "--api-key", "k"]) as server:
        status, headers, body = server.curl("/v1/models", key="k")
"""
import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import time


class RapideServer:
    def __init__(self, binary, args, startup_timeout=60.0, launcher=()):
        self.binary = binary
        self.launcher = list(launcher)  # e.g. mpirun -np 2 ... (the job dies with the session)
        self.args = args
        self.startup_timeout = startup_timeout
        self.proc = None
        self.port = None
        self.log_path = None

    def __enter__(self):
        log = tempfile.NamedTemporaryFile(prefix="rapide-serve-", suffix=".log", delete=False)
        self.log_path = log.name
        # --port 0: the kernel picks a free port and the server logs it.
        self.proc = subprocess.Popen(
            self.launcher + [self.binary, "serve", "--host", "127.0.0.1", "--port", "0"] + self.args,
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.time() + self.startup_timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("rapide serve exited early:\n" + self.log())
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", self.log())
            if m and self.port is None:
                self.port = int(m.group(1))
            if self.port is not None:
                try:
                    status, _, _ = self.curl("/health", timeout=2)
                    if status == 200:
                        return self
                except RuntimeError:
                    pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError("rapide serve did not become ready:\n" + self.log())

    def __exit__(self, *exc):
        self.stop()
        return False

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"

    def stop(self):
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def curl(self, path, body=None, key=None, method=None, headers=(), timeout=60, raw=None):
        """Runs curl; returns (status, headers dict (lower-case names), body text)."""
        cmd = ["curl", "-sS", "-N", "--max-time", str(timeout), "-D", "-", self.url(path)]
        if method:
            cmd += ["-X", method]
        if key:
            cmd += ["-H", f"Authorization: Bearer {key}"]
        for h in headers:
            cmd += ["-H", h]
        data = raw if raw is not None else (json.dumps(body) if body is not None else None)
        if data is not None:
            cmd += ["-H", "Content-Type: application/json", "--data-binary", "@-"]
        out = subprocess.run(cmd, input=data.encode() if isinstance(data, str) else data,
                             capture_output=True)
        if out.returncode != 0:
            raise RuntimeError(f"curl {path} failed ({out.returncode}): {out.stderr.decode()}")
        text = out.stdout.decode(errors="replace")
        head, _, payload = text.partition("\r\n\r\n")
        while head.startswith("HTTP/1.1 100"):  # an interim 100 Continue
            head, _, payload = payload.partition("\r\n\r\n")
        lines = head.split("\r\n")
        status = int(lines[0].split()[1])
        hdrs = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            hdrs[name.strip().lower()] = value.strip()
        return status, hdrs, payload

    def metrics(self):
        status, _, text = self.curl("/metrics")
        assert status == 200, status
        values = {}
        for line in text.splitlines():
            if line.startswith("#") or not line.strip():
                continue
            name, _, value = line.rpartition(" ")
            # Every sample carries the served model's model_name label first; the keys leave
            # it out so a test names a series by its own labels.
            name = re.sub(r'model_name="(?:[^"\\\\]|\\\\.)*",?', "", name).replace("{}", "")
            values[name] = float(value)
        return values

    def rss_kib(self):
        return status_kib(self.proc.pid, "VmRSS")


def status_kib(pid, field):
    """A /proc/PID/status field in KiB (VmRSS, VmHWM), 0 when absent."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def sse_events(payload):
    """The JSON objects of an SSE body, and whether it ended with [DONE].

    Strict, as a streaming client reads it: an event ends at a blank line, so every event
    must be one "data: " line followed by "\n\n". Text after the last blank line is an event
    that never ended (a client would still be waiting for it), and fails.
    """
    events, done = [], False
    *blocks, rest = payload.split("\n\n")
    assert rest == "", f"the stream ends inside an event (no blank line after it): {rest!r}"
    for block in blocks:
        assert block.startswith("data: ") and "\n" not in block, repr(block)
        data = block[len("data: "):]
        if data == "[DONE]":
            assert not done, "[DONE] twice"
            done = True
            continue
        assert not done, "data after [DONE]"
        events.append(json.loads(data))
    return events, done


def read_all(sock, timeout=30):
    """Everything the server sends until it closes (or `timeout` passes)."""
    sock.settimeout(timeout)
    data = b""
    try:
        while True:
            piece = sock.recv(65536)
            if not piece:
                break
            data += piece
    except (ConnectionResetError, socket.timeout):
        pass
    return data
