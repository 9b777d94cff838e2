#!/usr/bin/env python3
"""The README's server examples, run as written against a real `rapide serve` (issue 51:
"every command in the README must run as written"; its curl example asked for a model that
does not exist and got a 404).

usage: readme_commands_test.py RAPIDE_BINARY SHARED_DIR [README]

Which commands run and against what server: tests/e2e/readme_examples.py (a block marked
`<!-- readme-test: serve ARGS -->`; an unmarked block that talks to the server fails). Each
marker gets its own `rapide serve ARGS` on a free port; each command runs under bash in a
fresh directory of the test's own temp dir (HOME too: `rapide chat` keeps its history there),
with the README's http://127.0.0.1:8080 pointed at that port, `rapide` on PATH as the binary
under test, and stdin "Hi" then end of input (a user typing one line, then Ctrl-D). `curl` on
PATH is the real curl with --fail-with-body (and --no-progress-meter) added, so an HTTP error
fails the command: the reader would have seen it fail. Passing: exit status 0, and output that
looks like an answer: JSON without "error" (a chat or completion with its choices), a stream
of data: events ending in [DONE], `rapide chat`'s reply figures. The demo model serves: no
shared data needed.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))
from checks import check, report  # noqa: E402
from readme_examples import ADDRESS, server_examples  # noqa: E402
from serve_fixture import RapideServer, sse_events  # noqa: E402

BINARY = os.path.abspath(sys.argv[1])
README = sys.argv[3] if len(sys.argv) > 3 else os.path.join(HERE, "..", "..", "README.md")
COMMAND_TIMEOUT_S = 120


def tool_dir(work):
    """A bin folder with `rapide` (the binary under test) and a failing-on-HTTP-error curl."""
    bin_dir = os.path.join(work, "bin")
    os.makedirs(bin_dir)
    os.symlink(BINARY, os.path.join(bin_dir, "rapide"))
    real_curl = shutil.which("curl")
    with open(os.path.join(bin_dir, "curl"), "w") as f:
        f.write(f"#!/bin/sh\nexec {real_curl} --fail-with-body --no-progress-meter"
                f' --max-time 60 "$@"\n')
    os.chmod(os.path.join(bin_dir, "curl"), 0o755)
    return bin_dir


def looks_like_an_answer(command, output):
    """Why the output is not an answer, or None when it is."""
    if not output.strip():
        return "no output"
    if command.startswith("rapide chat"):
        # A reply is followed by its figures line: "[prompt N tokens | TTFT ... ]".
        return None if "TTFT" in output else "no reply figures"
    if not command.startswith("curl"):
        return None  # another rapide subcommand: its exit status says it worked
    if output.startswith("data: "):
        events, done = sse_events(output)
        if not done or not events:
            return "a stream without events or [DONE]"
        if any("error" in e for e in events):
            return "an error event in the stream"
        return None
    try:
        body = json.loads(output)
    except ValueError:
        return "neither JSON nor a stream"
    if not isinstance(body, dict) or "error" in body:
        return "an error body"
    if "completions" in command and not body.get("choices"):
        return "a completion without choices"
    return None


def run_example(example, work, bin_dir, n):
    with RapideServer(BINARY, example.serve_args) as server:
        address = f"127.0.0.1:{server.port}"
        for command in example.commands:
            n += 1
            cwd = os.path.join(work, f"cmd-{n}")
            os.makedirs(cwd)
            env = dict(os.environ, HOME=cwd, PATH=bin_dir + os.pathsep + os.environ["PATH"])
            try:
                as_run = ADDRESS.sub(address, command)
                out = subprocess.run(["bash", "-o", "pipefail", "-c", as_run], cwd=cwd, env=env,
                                     input="Hi\n", capture_output=True, text=True,
                                     timeout=COMMAND_TIMEOUT_S)
                status, stdout, stderr = out.returncode, out.stdout, out.stderr
            except subprocess.TimeoutExpired:
                status, stdout, stderr = "timeout", "", ""
            why = looks_like_an_answer(command, stdout) if status == 0 else f"exit {status}"
            check(why is None, f"README line {example.line}: {command[:100]}"
                               + (f"\n     {why}: {(stdout + stderr)[-600:]!r}" if why else ""))
    return n


def main():
    with open(README) as f:
        examples = server_examples(f.read())
    check(any(e.commands for e in examples), "the README has server examples to run")
    work = tempfile.mkdtemp(prefix="readme-commands-")
    bin_dir = tool_dir(work)
    n = 0
    for example in examples:
        check(example.serve_args is not None,
              f"README line {example.line}: the block talking to a server has a"
              " <!-- readme-test: serve ARGS --> marker")
        check(bool(example.commands),
              f"README line {example.line}: the marked block has a command to run")
        if example.serve_args is not None and example.commands:
            n = run_example(example, work, bin_dir, n)
    print(f"{n} README commands run")
    return report()


if __name__ == "__main__":
    sys.exit(main())
