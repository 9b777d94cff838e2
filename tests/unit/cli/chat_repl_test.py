#!/usr/bin/env python3
"""`rapide chat` driven through a pseudo-terminal, as a person would type (issue 20).

usage: chat_repl_test.py RAPIDE_BINARY SHARED_DIR

The model (stories260K) has no chat template, so --chat-template chatml supplies one. Checks:
the greeting, a streamed reply followed by its TTFT/TPOT line, /params (show and set),
/system, multi-line input (a trailing backslash and a triple-quote block), /save writing the
conversation with the roles and texts typed, /reset, an unknown command answered without
leaving, a usage error for a wrong template name (exit 2 is for flags; this is exit 1), and
Ctrl-D ending the session with status 0; then `chat --url` against a running server.
"""
import json
import os
import pty
import re
import select
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "e2e"))
from checks import check, report  # noqa: E402
from require_shared import require_shared, shared_dir  # noqa: E402
from serve_fixture import RapideServer  # noqa: E402

BINARY, SHARED = sys.argv[1], shared_dir(sys.argv[2])
MODEL = os.path.join(SHARED, "models/stories260K/stories260K.gguf")


class Terminal:
    def __init__(self, args, env):
        self.master, slave = pty.openpty()
        self.proc = subprocess.Popen(args, stdin=slave, stdout=slave, stderr=slave, env=env,
                                     close_fds=True, start_new_session=True)
        os.close(slave)
        self.output = ""

    def read_until(self, pattern, timeout=60):
        """Reads until `pattern` (a regex) appears after what was already consumed."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            m = re.search(pattern, self.output)
            if m:
                seen = self.output[:m.end()]
                self.output = self.output[m.end():]
                return seen
            ready, _, _ = select.select([self.master], [], [], 0.2)
            if ready:
                try:
                    data = os.read(self.master, 65536)
                except OSError:
                    break
                if not data:
                    break
                self.output += data.decode(errors="replace")
        raise AssertionError(f"timed out waiting for {pattern!r}; got:\n{self.output[-2000:]}")

    def type(self, text):
        os.write(self.master, text.encode())

    def close(self):
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self.master)
        return self.proc.returncode


FIGURES = r"\[prompt (\d+) tokens \| TTFT [\d.]+ ms \| TPOT [\d.]+ ms \| (\d+) tokens, \w+\]"


def main():
    require_shared(SHARED, "models/stories260K/stories260K.gguf")
    with tempfile.TemporaryDirectory() as home:
        env = dict(os.environ, HOME=home, TERM="dumb")
        term = Terminal([BINARY, "chat", "-m", MODEL, "--chat-template", "chatml", "--temp", "0",
                         "-n", "6", "--ignore-eos"], env)
        try:
            term.read_until(r"/help for commands")
            term.type("Once upon a time\n")
            seen = term.read_until(FIGURES)
            m = re.search(FIGURES, seen)
            check(m is not None and int(m.group(2)) == 6,
                  f"a reply is followed by its figures line: {seen[-300:]!r}")
            check(int(m.group(1)) > 5 if m else False, "the prompt went through the template")

            term.type("/params\n")
            seen = term.read_until(r"max_tokens 6 \| seed \d+")
            check("temperature 0" in seen, f"/params shows the sampling parameters: {seen!r}")
            term.type("/params max_tokens 3\n")
            term.read_until(r"max_tokens 3")
            term.type("/params bogus 1\n")
            seen = term.read_until(r"error: [^\n]*\n")
            check("unknown parameter 'bogus'" in seen, f"a bad /params is an error line: {seen!r}")

            term.type("/system You tell stories.\n")
            term.read_until(r"system message set")
            term.type("first line\\\nsecond line\n")
            seen = term.read_until(FIGURES)
            check(re.search(FIGURES, seen).group(2) == "3", "/params max_tokens 3 is applied")
            term.type('"""\nblock one\nblock two\n"""\n')
            term.read_until(FIGURES)

            saved = os.path.join(home, "conversation.json")
            term.type(f"/save {saved}\n")
            term.read_until(r"saved \d+ messages")
            with open(saved) as f:
                messages = json.load(f)["messages"]
            roles = [m["role"] for m in messages]
            check(roles == ["system", "user", "assistant", "user", "assistant", "user", "assistant"],
                  f"/save writes the conversation: {roles}")
            check(messages[0]["content"] == "You tell stories.", "the system message is saved")
            check(messages[3]["content"] == "first line\nsecond line",
                  f"a trailing backslash continues the message: {messages[3]['content']!r}")
            check(messages[5]["content"] == "block one\nblock two",
                  f'a """ block is one message: {messages[5]["content"]!r}')

            term.type("/reset\n")
            term.read_until(r"conversation cleared")
            term.type(f"/save {saved}\n")
            term.read_until(r"saved \d+ messages")
            with open(saved) as f:
                check([m["role"] for m in json.load(f)["messages"]] == ["system"],
                      "/reset forgets the conversation and keeps the system message")
            term.type("/frobnicate\n")
            seen = term.read_until(r"error: [^\n]*\n")
            check("unknown command /frobnicate" in seen, "an unknown command is an error line")
            # Ctrl-D only once readline shows its prompt again: typed while the terminal is
            # still in cooked mode (between two readline calls), the tty driver takes it as
            # its own end-of-file mark, which readline never sees after switching to raw mode.
            term.read_until(r"> ")
            term.type("\x04")  # Ctrl-D
            code = term.close()
            check(code == 0, f"Ctrl-D ends the session with status 0 (got {code})")
            check(os.path.exists(os.path.join(home, ".rapide_history")), "history is kept")
        finally:
            if term.proc.poll() is None:
                term.proc.kill()

    # --url: the same loop against a running server, its reply streamed from the SSE chunks.
    with RapideServer(BINARY, ["-m", MODEL, "--chat-template", "chatml"]) as server:
        with tempfile.TemporaryDirectory() as home:
            chat = subprocess.run([BINARY, "chat", "--url", f"http://127.0.0.1:{server.port}",
                                   "-n", "5", "--temp", "0", "--ignore-eos"],
                                  input="Once upon a time\n/quit\n", capture_output=True,
                                  text=True, timeout=60, env=dict(os.environ, HOME=home))
        m = re.search(FIGURES, chat.stdout)
        check(chat.returncode == 0 and m is not None and m.group(2) == "5",
              f"chat --url replies through the server: {chat.returncode} {chat.stdout[-300:]!r}")
        check("POST /v1/chat/completions 200" in server.log(), "the server logged the chat turn")

    bad = subprocess.run([BINARY, "chat", "-m", MODEL, "--chat-template", "no-such-template"],
                         capture_output=True, text=True, stdin=subprocess.DEVNULL)
    check(bad.returncode == 1 and "chatml" in bad.stderr,
          f"an unknown template name lists the shipped ones: {bad.returncode} {bad.stderr!r}")
    return report()


if __name__ == "__main__":
    sys.exit(main())
