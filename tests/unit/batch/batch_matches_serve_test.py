#!/usr/bin/env python3
"""`rapide batch` answers a request exactly as `rapide serve` does: the same body for the
same request and seed (a line without a seed uses derive_seed(custom_id), which the test
sends to the server explicitly), and the same error body for a request the server refuses.

Only the per-response "id" / "created" and usage's cached_tokens (prefix-cache state differs
between the two processes) may differ.

Usage: batch_matches_serve_test.py RAPIDE_BINARY SHARED_DIR E2E_DIR
"""
import copy
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../.."))
sys.path.insert(0, sys.argv[3])
from require_shared import require_shared, shared_dir  # noqa: E402
from batch_common import batch_line, derive_seed, model_path, read_records, run_batch  # noqa: E402
from serve_fixture import RapideServer  # noqa: E402

CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"


def requests():
    out = []
    prompts = ["Once upon a time", "Lily and Tom went to the park", "The little dog was sad"]
    for i in range(12):
        body = {"prompt": prompts[i % 3], "max_tokens": 10 + 5 * i,
                "temperature": [0.0, 0.8, 1.0][i % 3]}
        if i % 2 == 0:
            body["seed"] = 1000 + i
        if i % 4 == 1:
            body["n"] = 3
        if i % 3 == 2:
            body["logprobs"] = 3
        if i % 5 == 3:
            body["stop"] = ["."]
        if i % 6 == 4:
            body["top_p"] = 0.9
            body["presence_penalty"] = 0.5
        out.append((f"c{i}", COMPLETIONS, body))
    out.append(("multi", COMPLETIONS, {"prompt": ["Once", "Lily"], "max_tokens": 12, "seed": 3,
                                       "temperature": 0.9}))
    for i in range(4):
        body = {"messages": [{"role": "system", "content": "You tell stories."},
                             {"role": "user", "content": prompts[i % 3]}],
                "max_tokens": 16, "temperature": 0.7}
        if i % 2:
            body["logprobs"] = True
            body["top_logprobs"] = 2
        out.append((f"chat{i}", CHAT, body))
    out.append(("bad-temp", COMPLETIONS, {"prompt": "hi", "temperature": -1}))
    out.append(("bad-n", CHAT, {"messages": [{"role": "user", "content": "x"}], "n": 0}))
    return out


def comparable(body):
    body = copy.deepcopy(body)
    body.pop("id", None)
    body.pop("created", None)
    body.get("usage", {}).get("prompt_tokens_details", {}).pop("cached_tokens", None)
    return body


def main():
    binary, shared = sys.argv[1], shared_dir(sys.argv[2])
    require_shared(shared, "models/stories260K/stories260K.gguf")
    work = tempfile.mkdtemp(prefix="rapide-batch-serve-")
    try:
        reqs = requests()
        inp, out, err = (os.path.join(work, n) for n in ("in.jsonl", "out.jsonl", "err.jsonl"))
        with open(inp, "w") as f:
            for custom_id, url, body in reqs:
                f.write(batch_line(custom_id, body, url) + "\n")
        run_batch(binary, shared, inp, out, err)
        batch = {r["custom_id"]: r for r in read_records(out) + read_records(err)}
        assert len(batch) == len(reqs), f"{len(batch)} records for {len(reqs)} lines"

        checked = ok = texts = 0
        with RapideServer(binary, ["-m", model_path(shared), "-t", "2", "-c", "512",
                                   "--kv-memory", "256MiB"]) as server:
            for custom_id, url, body in reqs:
                sent = dict(body)
                sent.setdefault("seed", derive_seed(custom_id))
                status, _, text = server.curl(url, body=sent)
                served = json.loads(text)
                record = batch[custom_id]
                response = record["response"]
                assert response is not None, f"{custom_id}: {record}"
                assert response["status_code"] == status, (custom_id, response, status, text)
                if status == 200:
                    assert record["error"] is None
                    got, want = comparable(response["body"]), comparable(served)
                    assert got == want, (f"{custom_id}: batch and server differ\n"
                                         f"batch:  {json.dumps(got)}\nserver: {json.dumps(want)}")
                    ok += 1
                    texts += sum(bool(c.get("text") or c.get("message", {}).get("content"))
                                 for c in got["choices"])
                else:
                    assert response["body"] == served, (custom_id, response["body"], served)
                    assert record["error"]["code"] == served["error"]["code"]
                checked += 1
        assert ok == len(reqs) - 2, f"{ok} requests succeeded"
        assert texts >= 15, f"only {texts} choices generated any text"
        print(f"ok: {checked} requests ({ok} answered, 2 refused), batch records equal the "
              f"server's responses")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
