#!/usr/bin/env python3
"""Tests leave nothing in the temporary directory (issue 53).

usage: temp_hygiene_test.py IN_PRIVATE_TMPDIR BINARY:GTEST_FILTER...

Each gtest binary runs with TMPDIR and TEST_TMPDIR pointing at a fresh, empty directory,
limited to tests that write temporary files (bench_result.json, rapide-plain.toml, ...); then
in_private_tmpdir.py (the script tests' runner) runs a command that writes one. Afterwards the
directory must be empty: tests/private_temp_dir.cpp and in_private_tmpdir.py give each test
process a directory of its own and remove it. Before them these files stayed in /tmp.
"""
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import check, report  # noqa: E402


def run_in(outer, cmd):
    env = dict(os.environ, TMPDIR=outer, TEST_TMPDIR=outer)
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    return proc.returncode, proc.stdout + proc.stderr


def left_in(outer):
    found = []
    for dirpath, dirnames, filenames in os.walk(outer):
        for name in dirnames + filenames:
            found.append(os.path.relpath(os.path.join(dirpath, name), outer))
    return sorted(found)


def main():
    runner, targets = sys.argv[1], sys.argv[2:]
    outer = tempfile.mkdtemp(prefix="rapide-hygiene-")
    try:
        for target in targets:
            binary, _, gtest_filter = target.partition(":")
            rc, out = run_in(outer, [binary, f"--gtest_filter={gtest_filter}"])
            name = f"{os.path.basename(binary)} {gtest_filter}"
            check(rc == 0, f"{name} passes" + (f" (exit {rc}: {out[-300:]!r})" if rc else ""))
            left = left_in(outer)
            check(not left, f"{name} leaves nothing in TMPDIR (left: {left[:8]})")
            shutil.rmtree(outer)
            os.mkdir(outer)
        writer = ("import os, tempfile\n"
                  "open(os.path.join(tempfile.gettempdir(), 'cli_x.txt'), 'w').write('x')\n"
                  "tempfile.mkdtemp(prefix='.org.chromium.Chromium.')\n")
        rc, out = run_in(outer, [sys.executable, runner, sys.executable, "-c", writer])
        check(rc == 0, "in_private_tmpdir.py runs the command" +
              (f" (exit {rc}: {out[-300:]!r})" if rc else ""))
        left = left_in(outer)
        check(not left, f"in_private_tmpdir.py removes what its command wrote (left: {left})")
        rc, _ = run_in(outer, [sys.executable, runner, sys.executable, "-c", "raise SystemExit(77)"])
        check(rc == 77, f"in_private_tmpdir.py keeps the command's exit status (77 -> {rc})")
    finally:
        shutil.rmtree(outer, ignore_errors=True)
    return report()


if __name__ == "__main__":
    sys.exit(main())
