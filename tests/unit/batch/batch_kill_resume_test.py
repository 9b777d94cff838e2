#!/usr/bin/env python3
"""Exactly-once under SIGKILL: run `rapide batch` on stories260K, kill it at random moments
(and once leave a torn line behind, as a kill in the middle of a write would), re-run the same
command each time, and check that every input line is answered exactly once, every line of the
files is whole JSON, and the results equal those of an uninterrupted run.

Usage: batch_kill_resume_test.py RAPIDE_BINARY SHARED_DIR
"""
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../.."))
from require_shared import require_shared, shared_dir  # noqa: E402
from batch_common import (batch_command, batch_line, input_line_numbers, read_records,  # noqa: E402
                          record_line, run_batch)

PROMPTS = ["Once upon a time", "Once upon a time there was a little girl", "Lily and Tom went",
           "The little dog was sad because", "One day, a boy named Tim found a"]


def make_input(path, count):
    rng = random.Random(1234)
    with open(path, "w") as f:
        for i in range(count):
            if i % 41 == 7:
                f.write("{not json\n")
                continue
            if i % 53 == 11:
                f.write("\n")  # blank lines are not requests
            body = {"prompt": rng.choice(PROMPTS), "max_tokens": rng.randint(16, 96),
                    "temperature": rng.choice([0.0, 0.7, 1.0])}
            if i % 4 == 0:
                body["seed"] = i
            if i % 9 == 0:
                body["n"] = 2
            f.write(batch_line(f"r{i}", body) + "\n")


def results(out, err, allow_torn=False):
    """line -> what must not change between runs (choices or the error code)."""
    by_line = {}
    for path, key in ((out, "out"), (err, "err")):
        for r in read_records(path, allow_torn):
            line = record_line(r)
            assert line not in by_line, f"line {line} answered twice"
            if key == "out":
                by_line[line] = (r["custom_id"], r["response"]["body"]["choices"])
            else:
                by_line[line] = (r["custom_id"], r["error"]["code"])
    return by_line


def answered(out, err):
    """Lines in both files so far (a torn last line not counted)."""
    count = 0
    for path in (out, err):
        if os.path.exists(path):
            with open(path, "rb") as f:
                count += f.read().count(b"\n")
    return count


def main():
    binary, shared = sys.argv[1], shared_dir(sys.argv[2])
    require_shared(shared, "models/stories260K/stories260K.gguf")
    work = tempfile.mkdtemp(prefix="rapide-batch-kill-")
    try:
        inp = os.path.join(work, "in.jsonl")
        make_input(inp, 600)
        lines = input_line_numbers(inp)

        ref_out, ref_err = os.path.join(work, "ref.jsonl"), os.path.join(work, "ref.err.jsonl")
        start = time.time()
        run_batch(binary, shared, inp, ref_out, ref_err)
        full = time.time() - start
        reference = results(ref_out, ref_err)
        assert sorted(reference) == lines, "the reference run missed lines"

        out, err = os.path.join(work, "out.jsonl"), os.path.join(work, "err.jsonl")
        rng = random.Random(int(os.environ.get("BATCH_KILL_SEED", "7")))
        kills = 0
        for attempt in range(8):
            before = answered(out, err)
            if before >= len(lines):
                break
            proc = subprocess.Popen(batch_command(binary, shared, inp, out, err),
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if attempt % 3 == 0:
                # Anywhere from loading the model and recovering to the first results.
                time.sleep(rng.uniform(0.0, 0.3))
            else:
                # After a random share of what is left, plus a few ms to land mid-write.
                target = before + max(1, int((len(lines) - before) * rng.uniform(0.1, 0.35)))
                while proc.poll() is None and answered(out, err) < target:
                    time.sleep(0.002)
                time.sleep(rng.uniform(0.0, 0.02))
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                kills += 1
            proc.wait()
            partial = results(out, err, allow_torn=True)  # no line twice, even mid-run
            print(f"attempt {attempt}: {len(partial)}/{len(lines)} lines answered")
            if attempt == 2 and os.path.exists(out):
                # A kill in the middle of a write: half a record, no newline.
                with open(out, "ab") as f:
                    f.write(b'{"id":"batch_req_999999","custom_id":"torn","respo')
        assert kills >= 5, f"only {kills} kills landed while the batch ran"
        assert answered(out, err) < len(lines), "the kills left nothing for the last run"

        log = run_batch(binary, shared, inp, out, err)
        final = results(out, err)
        assert sorted(final) == lines, (
            f"missing {sorted(set(lines) - set(final))[:10]}, "
            f"extra {sorted(set(final) - set(lines))[:10]}")
        differing = [line for line in lines if final[line] != reference[line]]
        assert not differing, f"lines whose results changed across kills: {differing[:10]}"
        print(f"ok: {kills} SIGKILLs, {len(lines)} lines answered exactly once, results equal "
              f"an uninterrupted run ({full:.1f} s)")
        print(log.strip().splitlines()[-1])
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
