#!/usr/bin/env python3
"""`rapide serve --config FILE` reaches the running engine (issue 50).

usage: serve_config_test.py RAPIDE_BINARY SHARED_DIR
A TOML file with engine flags that differ from every default starts a server on stories260K;
GET /v1/engine/state reports the switches the engine runs with, which must be the file's. A
flag on the command line wins over the file, and the file's API key guards the state.
"""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from checks import check, report  # noqa: E402
from require_shared import require_shared, shared_dir  # noqa: E402
from serve_fixture import RapideServer  # noqa: E402

BINARY, SHARED = sys.argv[1], shared_dir(sys.argv[2])
MODEL = os.path.join(SHARED, "models/stories260K/stories260K.gguf")
KEY = "sk-config"

CONFIG = f"""model = "{MODEL}"
api-key = ["{KEY}"]
threads = 1
max-seqs = 3
max-batch-tokens = 200
prefill-chunk = 48
kv-block-size = 32
kv-memory = "3MiB"
kv-type = "q8_0"
batching = "static"
prefix-cache = "off"
spec = "ngram"
spec-tokens = "2"
"""


def main():
    require_shared(SHARED, "models/stories260K/stories260K.gguf")
    with tempfile.TemporaryDirectory(prefix="rapide-serve-config-") as tmp:
        path = os.path.join(tmp, "serve.toml")
        with open(path, "w") as f:
            f.write(CONFIG)
        # --max-seqs on the command line overrides the file's 3.
        with RapideServer(BINARY, ["--config", path, "--max-seqs", "4"]) as s:
            try:
                status, _, body = s.curl("/v1/completions", {"prompt": "Once upon", "max_tokens": 4},
                                         key=KEY)
                check(status == 200, f"a completion with the file's key: {status} {body[:120]}")
                status, _, _ = s.curl("/v1/engine/state")
                check(status == 401, f"the file's api-key guards the state (got {status})")
                status, _, body = s.curl("/v1/engine/state", key=KEY)
                check(status == 200, f"/v1/engine/state: {status} {body[:200]}")
                config = json.loads(body)["config"]
                expected = {"max_seqs": 4, "max_batch_tokens": 200, "prefill_chunk": 48,
                            "kv_block_size": 32, "kv_memory": "3MiB", "kv_type": "q8_0",
                            "batching": "static", "prefix_cache": False, "spec": "ngram",
                            "spec_tokens": 2}
                for key, value in expected.items():
                    check(config.get(key) == value,
                          f"engine {key} is {value!r} from the file (got {config.get(key)!r})")
                check(json.loads(body)["machine"]["threads"] == 1, "threads = 1 from the file")
            except Exception:
                print(s.log()[-4000:])
                raise
    return report()


if __name__ == "__main__":
    sys.exit(main())
