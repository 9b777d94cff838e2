"""Helpers of the batch end-to-end tests: the documented seed formula, input files, and
reading the output and error files back."""
import json
import os
import subprocess

M64 = (1 << 64) - 1


def derive_seed(custom_id):
    """docs/batch.md: splitmix64(fnv1a64(custom_id)), the seed of a line that gives none."""
    h = 0xcbf29ce484222325
    for byte in custom_id.encode():
        h ^= byte
        h = (h * 0x100000001b3) & M64
    h = (h + 0x9e3779b97f4a7c15) & M64
    h = ((h ^ (h >> 30)) * 0xbf58476d1ce4e5b9) & M64
    h = ((h ^ (h >> 27)) * 0x94d049bb133111eb) & M64
    return h ^ (h >> 31)


def batch_line(custom_id, body, url="/v1/completions"):
    return json.dumps({"custom_id": custom_id, "method": "POST", "url": url, "body": body})


def model_path(shared):
    return os.path.join(shared, "models/stories260K/stories260K.gguf")


def batch_command(binary, shared, inp, out, err, extra=()):
    return [binary, "batch", "-m", model_path(shared), "-i", inp, "-o", out, "--errors", err,
            "-t", "2", "-c", "512", "--kv-memory", "256MiB", "--progress", "lines",
            "--progress-interval", "0.5"] + list(extra)


def run_batch(binary, shared, inp, out, err, extra=()):
    proc = subprocess.run(batch_command(binary, shared, inp, out, err, extra),
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"rapide batch failed ({proc.returncode}):\n{proc.stderr}")
    return proc.stderr


def read_records(path, allow_torn=False):
    """The records of an output or error file; every line must be whole JSON (but a torn
    last line, left by a kill in the middle of a write, when allow_torn)."""
    records = []
    if not os.path.exists(path):
        return records
    with open(path, "rb") as f:
        data = f.read()
    if allow_torn:
        data = data[:data.rfind(b"\n") + 1]
    assert not data or data.endswith(b"\n"), f"{path}: last line is not terminated"
    for number, line in enumerate(data.split(b"\n")[:-1], 1):
        records.append(json.loads(line))
    return records


def input_line_numbers(path):
    with open(path) as f:
        return [i for i, line in enumerate(f, 1) if line.strip()]


def record_line(record):
    """The input line a record id names: "batch_req_<line>_<digest>" (docs/batch.md)."""
    assert record["id"].startswith("batch_req_"), record["id"]
    return int(record["id"][len("batch_req_"):].split("_")[0])
