"""Prefill/decode disaggregation over Open MPI, end to end (issue 21):
`mpirun -np 2 rapide-mpi serve ... --disaggregate`, rank 0 routing and decoding, rank 1 computing
the prompts' K/V; and with `-np 3`, two prefill ranks sharing the prompts (issue 49).

* On stories260K and TinyStories-656K F16, a disaggregated pair answers chat completions and
  completions (streamed too) with the same greedy text as a colocated single-process server,
  and reports the K/V it moved: usage.kv_transfer (nonzero bytes and blocks), the request log
  line (kv_bytes=...), /metrics (rapide_kv_transfer_bytes_total).
* With two prefill ranks (`-np 3`), the same text again, and the router gives sequential
  prompts to both in turn (usage.kv_transfer.prefill_ranks names the rank).
* Refused with exit status 2 and a message: 1 rank, --disaggregate with --tp, a --role that
  does not match the rank.
* A prefill rank that stops answering (SIGSTOP) fails requests with 503 and a clear message
  after --disagg-timeout-ms, and the server serves again once it resumes; a prefill rank that
  dies (SIGKILL) ends the job with mpirun's error naming it, within a timeout: no hang.

Needs mpirun (openmpi-bin): without it the test fails under CI and skips elsewhere.
usage: mpi_disaggregation_test.py RAPIDE_MPI_BINARY SHARED_DIR
"""
import json
import os
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpi_fixture  # noqa: E402
import require_shared  # noqa: E402
from mpi_fixture import MPIRUN, run  # noqa: E402
from serve_fixture import RapideServer, sse_events  # noqa: E402

TEST = "e2e_mpi_disaggregation"
binary = sys.argv[1]
shared = require_shared.shared_dir(sys.argv[2])
MODELS = [
    "models/stories260K/stories260K.gguf",
    "models/tinystories-656k/TinyStories-656K-F16.gguf",
]
require_shared.require_shared(shared, *MODELS, test=TEST)
mpi_fixture.require_mpirun(TEST)

# Several KV blocks of 16 tokens: most of the prompt comes from the prefill rank.
STORY = ("Once upon a time, there was a little girl named Lily. She loved to play outside in the "
         "park with her red ball. One day, she saw a big dog under a tree. The dog was sad "
         "because it had lost its bone. Lily wanted to help the dog find the bone.")
DISAGG = ["--disaggregate"]


def chat(server, content, stream=False):
    body = {"model": "m", "messages": [{"role": "user", "content": content}], "max_tokens": 32,
            "temperature": 0}
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return server.curl("/v1/chat/completions", body)


def ask(server):
    """(chat text, completion text, streamed chat text, the usages) of the same prompts."""
    status, _, payload = chat(server, STORY)
    assert status == 200, payload
    reply = json.loads(payload)
    status, _, payload = server.curl("/v1/completions", {"model": "m", "prompt": STORY + " Then",
                                                         "max_tokens": 24, "temperature": 0})
    assert status == 200, payload
    completion = json.loads(payload)
    status, _, payload = chat(server, "Tom had a big red car. " + STORY, stream=True)
    assert status == 200, payload
    events, done = sse_events(payload)
    assert done
    streamed = "".join(e["choices"][0]["delta"].get("content", "") or ""
                       for e in events if e["choices"])
    usages = [reply["usage"], completion["usage"], events[-1]["usage"]]
    return (reply["choices"][0]["message"]["content"], completion["choices"][0]["text"], streamed,
            usages)


for model in MODELS:
    args = ["-m", os.path.join(shared, model), "-t", "1", "--served-model-name", "m"]
    with RapideServer(binary, args) as server:
        alone = ask(server)
    for usage in alone[3]:
        assert "kv_transfer" not in usage, usage
    with RapideServer(binary, args + DISAGG, launcher=MPIRUN) as server:
        split = ask(server)
        metrics = server.metrics()
        log = server.log()
    assert split[:3] == alone[:3], f"{model}: disaggregated differs from colocated:\n{split[:3]}\n{alone[:3]}"
    for usage in split[3]:
        kv = usage["kv_transfer"]
        assert kv["bytes"] > 0 and kv["blocks"] >= 2, usage
        assert kv["wait_ms"] > 0 and kv["transfer_ms"] >= 0 and kv["prefill_ms"] > 0, usage
        assert kv["prefill_ranks"] == [1], usage
        # Only the last partial block was computed on the decode rank.
        assert usage["prompt_tokens_details"]["cached_tokens"] >= 16 * kv["blocks"], usage
    assert metrics["rapide_kv_transfer_bytes_total"] >= sum(u["kv_transfer"]["bytes"] for u in split[3])
    assert metrics["rapide_kv_transfer_requests_total"] >= 3, metrics
    assert "kv_bytes=" in log and "kv_wait=" in log, log[-3000:]
    assert "prefill rank 1:" in log, log[-3000:]
    print(f"{model}: disaggregated == colocated ({split[0][:50]!r}...), "
          f"{split[3][0]['kv_transfer']['bytes']} KV bytes moved for the chat prompt")

# Two prefill ranks: the router alternates the sequential prompts between them (the least
# loaded, then the least used), and the text stays the colocated one.
with RapideServer(binary, args + DISAGG, launcher=mpi_fixture.mpirun(3)) as server:
    split3 = ask(server)
assert split3[:3] == alone[:3], f"3 ranks differ from colocated:\n{split3[:3]}\n{alone[:3]}"
ranks = [u["kv_transfer"]["prefill_ranks"] for u in split3[3]]
assert ranks == [[1], [2], [1]], ranks
print("two prefill ranks: prompts went to ranks", ranks, "text == colocated")

# Refusals: a clear message and exit status 2.
model_args = ["-m", os.path.join(shared, MODELS[0]), "-t", "1", "--port", "0"]
for launcher, extra, message in [
        (mpi_fixture.mpirun(1), DISAGG, "--disaggregate needs at least 2 MPI ranks"),
        (MPIRUN, DISAGG + ["--tp", "2"], "cannot be combined with --tp / --pp"),
        (MPIRUN, ["--role", "prefill"], "--role prefill on rank 0"),
        (MPIRUN, DISAGG + ["--prefix-cache", "off"], "--disaggregate needs --prefix-cache on")]:
    out = run(launcher + [binary, "serve"] + model_args + extra, timeout=60)
    assert out.returncode == 2, (extra, out.returncode, out.stderr[-2000:])
    assert message in out.stderr, (extra, out.stderr[-2000:])
print("1 rank, --tp with --disaggregate, a wrong --role, no prefix cache: refused with exit 2")

args = ["-m", os.path.join(shared, MODELS[1]), "-t", "1", "--served-model-name", "m",
        "--disagg-timeout-ms", "1500"]
with RapideServer(binary, args + DISAGG, launcher=MPIRUN) as server:
    status, _, payload = chat(server, STORY)
    assert status == 200, payload
    prefill = mpi_fixture.rank_pid(server.proc.pid, 1)

    # A prefill rank that does not answer: 503 with a clear message after the timeout.
    os.kill(prefill, signal.SIGSTOP)
    start = time.time()
    status, headers, payload = chat(server, "The cat sat on the mat. " + STORY)
    waited = time.time() - start
    assert status == 503, (status, payload)
    assert "no KV from the prefill rank within 1500 ms" in payload, payload
    assert 1.4 < waited < 20, waited
    assert "retry-after" in headers, headers
    assert "no KV from the prefill rank within 1500 ms" in server.log()
    os.kill(prefill, signal.SIGCONT)
    status, _, payload = chat(server, "A bird sang in the tree. " + STORY)
    assert status == 200, payload
    print(f"a stopped prefill rank: 503 after {waited:.1f} s; served again once it resumed")

    # A prefill rank that dies ends the job with an error naming it, instead of a hang.
    os.kill(prefill, signal.SIGKILL)
    assert mpi_fixture.wait_for_exit(server.proc, 60), "the job still runs 60 s after rank 1 died"
    assert server.proc.returncode != 0
    log = server.log()
    assert "rank 1" in log and ("signal 9" in log or "Killed" in log), log[-2000:]
    print("a dead prefill rank ended the job:", server.proc.returncode)
print("ok")
