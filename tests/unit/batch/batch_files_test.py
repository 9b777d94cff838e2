#!/usr/bin/env python3
"""`rapide batch` never destroys a file it was pointed at by mistake, and one hostile line is
that line's error (issue 18, items 3 and 4).

Usage: batch_files_test.py RAPIDE_BINARY SHARED_DIR
Each case runs the real binary on stories260K in a fresh temporary directory:
  * -o naming the input, --errors through a symlink to the input, -o naming an unrelated
    existing file: refused with an error, and the file is byte-for-byte unchanged;
  * an output of one input reused for another input: refused, unchanged;
  * the input edited between runs: requests are matched by custom_id wherever they moved,
    an answered request that changed is refused before anything runs;
  * -i naming a directory: an error, not an empty batch;
  * a line nested 60k arrays deep: an error record for that line, the other lines answered,
    and a resume does the same (no crash on any run).
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../.."))
from checks import check, report  # noqa: E402
from require_shared import require_shared, shared_dir  # noqa: E402
from batch_common import batch_command, batch_line, read_records, record_line  # noqa: E402

BINARY, SHARED = sys.argv[1], shared_dir(sys.argv[2])



def write_input(path, count, extra_lines=(), prefix="r"):
    with open(path, "w") as f:
        for i in range(count):
            f.write(batch_line(f"{prefix}{i}", {"prompt": "Once upon a time", "max_tokens": 4}) + "\n")
        for line in extra_lines:
            f.write(line + "\n")


def run(inp, out, err):
    return subprocess.run(batch_command(BINARY, SHARED, inp, out, err), capture_output=True,
                          text=True, timeout=120)


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def expect_refused(d, what, out, err, protected):
    inp = os.path.join(d, "in.jsonl")
    write_input(inp, 3)  # as it was, whatever an earlier case did to it
    before = read_bytes(protected)
    proc = run(inp, out, err)
    check(proc.returncode != 0, f"{what}: refused (exit {proc.returncode}; "
                                f"{proc.stderr.strip().splitlines()[-1:]})")
    check(read_bytes(protected) == before, f"{what}: '{os.path.basename(protected)}' unchanged")


def test_wrong_files():
    with tempfile.TemporaryDirectory() as d:
        inp = os.path.join(d, "in.jsonl")
        write_input(inp, 3)
        expect_refused(d, "-o the input", inp, os.path.join(d, "err.jsonl"), inp)
        expect_refused(d, "-o ./the input", os.path.join(d, ".", "in.jsonl"),
                       os.path.join(d, "err.jsonl"), inp)
        link = os.path.join(d, "link.jsonl")
        os.symlink(inp, link)
        expect_refused(d, "--errors a symlink to the input", os.path.join(d, "out.jsonl"), link,
                       inp)
        notes = os.path.join(d, "notes.txt")
        with open(notes, "w") as f:
            f.write("my notes, not a batch output\nsecond line\n")
        expect_refused(d, "-o an unrelated existing file", notes, os.path.join(d, "err.jsonl"),
                       notes)
        # An output of this input resumes; the same output for another input does not.
        out, err = os.path.join(d, "out.jsonl"), os.path.join(d, "err.jsonl")
        proc = run(inp, out, err)
        check(proc.returncode == 0 and len(read_records(out)) == 3,
              f"a fresh run answers 3 lines ({proc.returncode}: {proc.stderr[-300:]})")
        proc = run(inp, out, err)
        check(proc.returncode == 0, f"rerun of the same input resumes ({proc.stderr[-200:]})")
        # The same input grown by appended lines resumes (documented); another input does not.
        write_input(inp, 4)
        proc = run(inp, out, err)
        check(proc.returncode == 0 and len(read_records(out)) == 4,
              f"the input grown by a line resumes and runs it ({proc.stderr[-200:]})")
        # The input edited: a new line first, the answered ones in another order. Resume
        # matches by custom_id (issue 18 item 5): only the new line runs.
        with open(inp) as f:
            lines = f.readlines()
        new = batch_line("new", {"prompt": "The little dog", "max_tokens": 4}) + "\n"
        with open(inp, "w") as f:
            f.writelines([new] + lines[::-1])
        proc = run(inp, out, err)
        answered = [r["custom_id"] for r in read_records(out)]
        check(proc.returncode == 0 and sorted(answered) == ["new", "r0", "r1", "r2", "r3"],
              f"a reordered input with a new line runs only the new one ({answered}, "
              f"{proc.stderr[-200:]})")
        # An answered request edited: its answer would be attached to the wrong request,
        # so nothing runs and the output is unchanged.
        with open(inp) as f:
            lines = f.readlines()
        lines[1] = lines[1].replace("Once upon a time", "The little dog")
        with open(inp, "w") as f:
            f.writelines(lines)
        before = read_bytes(out)
        proc = run(inp, out, err)
        check(proc.returncode != 0 and read_bytes(out) == before and "changed since" in
              proc.stderr, f"an edited answered request is refused and the output unchanged "
              f"({proc.returncode}: {proc.stderr.strip().splitlines()[-1:]})")
        other = os.path.join(d, "other.jsonl")
        write_input(other, 5, prefix="x")
        before = read_bytes(out)
        proc = run(other, out, err)
        check(proc.returncode != 0 and read_bytes(out) == before,
              f"an output of another input is refused and unchanged ({proc.returncode})")


def test_directory_input():
    with tempfile.TemporaryDirectory() as d:
        out, err = os.path.join(d, "out.jsonl"), os.path.join(d, "err.jsonl")
        proc = run(d, out, err)
        check(proc.returncode == 2 and "is a directory" in proc.stderr,
              f"-i DIRECTORY is an error ({proc.returncode}: {proc.stderr[-200:]})")


def test_deep_line():
    with tempfile.TemporaryDirectory() as d:
        inp, out, err = (os.path.join(d, n) for n in ("in.jsonl", "out.jsonl", "err.jsonl"))
        depth = 60000
        deep = ('{"custom_id": "deep", "method": "POST", "url": "/v1/chat/completions", '
                '"body": {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, '
                '"tools": [{"type": "function", "function": {"name": "f", "parameters": '
                + "[" * depth + "]" * depth + "}}]}}")
        write_input(inp, 4, [deep])
        for attempt in ("run", "resume"):
            proc = run(inp, out, err)
            check(proc.returncode >= 0, f"{attempt}: no crash (exit {proc.returncode})")
            answered = read_records(out)
            errors = read_records(err)
            check(len(answered) == 4, f"{attempt}: the 4 good lines answered ({len(answered)})")
            check(len(errors) == 1 and record_line(errors[0]) == 5 and
                  "invalid_json" in json.dumps(errors[0]),
                  f"{attempt}: the deep line is an invalid_json error record "
                  f"({json.dumps(errors)[:200]})")


def main():
    require_shared(SHARED, "models/stories260K/stories260K.gguf")
    test_wrong_files()
    test_directory_input()
    test_deep_line()
    return report()


if __name__ == "__main__":
    sys.exit(main())
