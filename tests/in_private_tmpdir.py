#!/usr/bin/env python3
"""Runs a command with a temporary directory of its own, removed when it ends.

usage: in_private_tmpdir.py COMMAND [ARGS...]

The script tests (rapide_add_script_test) run through this: TMPDIR and TEST_TMPDIR point at a
fresh directory under the one this process was given, so everything the test and what it
starts write there (tempfile, server logs, rapide's own files, Chromium's profiles, Open MPI's
session files) goes with it. The exit status is the command's (77, a skip, included).
Issue 53: test runs left files in /tmp. The gtest binaries do the same in
tests/private_temp_dir.cpp. Python 3, standard library only.
"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    work = tempfile.mkdtemp(prefix="rapide-test-")
    env = dict(os.environ, TMPDIR=work, TEST_TMPDIR=work)
    proc = subprocess.Popen(sys.argv[1:], env=env)

    # ctest's timeout sends SIGTERM (then SIGKILL): pass it on and still clean up.
    def forward(signum, frame):
        proc.send_signal(signum)
    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    try:
        return proc.wait()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    status = main()
    # A command killed by a signal reports -N; exit as a shell would (128 + N).
    sys.exit(status if status >= 0 else 128 - status)
