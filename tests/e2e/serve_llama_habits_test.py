#!/usr/bin/env python3
"""llama.cpp / vLLM habits and OpenAI's limits against a real `rapide serve` (issue 51).

usage: serve_llama_habits_test.py RAPIDE_BINARY SHARED_DIR

* The command line: -fa, --jinja and --max-num-seqs start a server (the engine's start-up
  line shows the sequences); -hf / --hf-repo exit 2 with "no downloads" instead of printing
  the help; an unknown subcommand lists the subcommands.
* Request bodies: llama-server's n_predict is max_tokens on both routes (-1: to the context's
  end); n_predict and max_tokens that disagree are a 400 naming n_predict.
* OpenAI's limits with OpenAI's error shape: temperature 5, top_p 1.5 and a role "wizard"
  are 400 invalid_request_error naming the field (messages[i].role for the role).
* A response_format the model's vocabulary cannot follow is a 400 naming the reason, not a
  500 server_error.
The grammar check runs TinyStories-656K (shared data); the rest the built-in demo model.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from checks import check, report  # noqa: E402
from require_shared import require_shared, shared_dir  # noqa: E402
from serve_fixture import RapideServer  # noqa: E402

BINARY, SHARED = sys.argv[1], shared_dir(sys.argv[2])
CTX = 64


def error_of(body):
    try:
        return json.loads(body).get("error", {})
    except ValueError:
        return {}


def refused(server, path, body, param):
    status, _, text = server.curl(path, body)
    error = error_of(text)
    check(status == 400 and error.get("type") == "invalid_request_error" and
          error.get("param") == param and error.get("message"),
          f"{path} {json.dumps(body)[:90]} -> 400 invalid_request_error param {param} "
          f"(got {status} {text[:200]})")
    return error


def command_line_spellings():
    for args in (["serve", "-hf", "org/model"], ["serve", "--hf-repo", "org/model"],
                 ["run", "-hf", "org/model", "-p", "hi"]):
        r = subprocess.run([BINARY] + args, capture_output=True, text=True, timeout=60)
        check(r.returncode == 2 and "no downloads" in r.stderr and "--model PATH" in r.stderr,
              f"rapide {' '.join(args)} exits 2 saying 'no downloads' "
              f"(got {r.returncode}: {(r.stdout + r.stderr)[:160]!r})")
    r = subprocess.run([BINARY, "serv"], capture_output=True, text=True, timeout=60)
    check(r.returncode == 2 and "did you mean serve?" in r.stderr and "bench" in r.stderr,
          f"an unknown subcommand lists the subcommands (got {r.stderr!r})")


def unspellable_grammar():
    """TinyStories-656K's 2048-token BPE vocabulary has no "{" and no byte tokens: no JSON object
    can be spelt. That was a 500 server_error once the first step found nothing to sample."""
    model = os.path.join(SHARED, "models/tinystories-656k/TinyStories-656K-Q8_0.gguf")
    require_shared(SHARED, "models/tinystories-656k/TinyStories-656K-Q8_0.gguf")
    schema = {"type": "json_schema",
              "json_schema": {"name": "x", "schema": {"type": "object",
                                                      "properties": {"a": {"type": "integer"}}}}}
    with RapideServer(BINARY, ["-m", model]) as server:
        for path, body in (("/v1/chat/completions",
                            {"messages": [{"role": "user", "content": "Once"}],
                             "response_format": {"type": "json_object"}}),
                           ("/v1/completions", {"prompt": "Once", "response_format": schema}),
                           ("/v1/completions", {"prompt": "Once", "grammar": 'root ::= "{a}"'})):
            param = "grammar" if "grammar" in body else "response_format"
            for stream in (False, True):
                status, _, text = server.curl(path, dict(body, stream=stream, max_tokens=8))
                error = error_of(text)
                check(status == 400 and error.get("param") == param and
                      "vocabulary" in error.get("message", "") and
                      error.get("type") == "invalid_request_error",
                      f"{path} {param} the vocabulary cannot spell (stream {stream}) -> 400 "
                      f"naming {param} (got {status} {text[:200]})")
        # One it can start but not finish: "a" is a token, "{" is not.
        status, _, text = server.curl("/v1/completions",
                                      {"prompt": "Once", "grammar": 'root ::= "a" "{"'})
        error = error_of(text)
        check(status == 400 and "vocabulary" in error.get("message", "") and
              error.get("type") == "invalid_request_error",
              f"a grammar that dead-ends mid-output -> 400, not 500 (got {status} {text[:200]})")
        # A grammar it can spell still runs.
        status, _, text = server.curl("/v1/completions",
                                      {"prompt": "Once", "grammar": 'root ::= "Lily"'})
        check(status == 200 and json.loads(text)["choices"][0]["text"] == "Lily",
              f"a grammar the vocabulary spells runs (got {status} {text[:160]})")


def main():
    command_line_spellings()
    # --mlock is tested by cli_conventions_test (it needs CAP_IPC_LOCK or a high ulimit -l).
    args = ["--ctx-size", str(CTX), "-fa", "--jinja", "--max-num-seqs", "2"]
    with RapideServer(BINARY, args) as server:
        log = server.log()
        check("/ 2 sequences per step" in log, "--max-num-seqs 2 reaches the engine")

        # n_predict, both routes.
        messages = [{"role": "user", "content": "hello"}]
        for path, body in (("/v1/completions", {"prompt": "hello world"}),
                           ("/v1/chat/completions", {"messages": messages})):
            status, _, text = server.curl(path, dict(body, n_predict=3, ignore_eos=True))
            usage = json.loads(text).get("usage", {}) if status == 200 else {}
            check(status == 200 and usage.get("completion_tokens") == 3,
                  f"{path} n_predict 3 generates 3 tokens (got {status} {text[:160]})")
            status, _, text = server.curl(path, dict(body, n_predict=-1, ignore_eos=True))
            usage = json.loads(text).get("usage", {}) if status == 200 else {}
            check(status == 200 and
                  usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0) == CTX,
                  f"{path} n_predict -1 generates to the context's end (got {status} {usage})")
            refused(server, path, dict(body, n_predict=3, max_tokens=5), "n_predict")

        # OpenAI's limits and error shape.
        refused(server, "/v1/chat/completions", {"messages": messages, "temperature": 5},
                "temperature")
        refused(server, "/v1/completions", {"prompt": "x", "top_p": 1.5}, "top_p")
        refused(server, "/v1/completions", {"prompt": "x", "presence_penalty": 3},
                "presence_penalty")
        error = refused(server, "/v1/chat/completions",
                        {"messages": messages + [{"role": "wizard", "content": "hi"}]},
                        "messages[1].role")
        check("wizard" in error.get("message", ""), "the role's error names the role")
        status, _, text = server.curl("/v1/chat/completions",
                                      {"messages": [{"role": "developer", "content": "be brief"},
                                                    {"role": "user", "content": "hi"}],
                                       "max_tokens": 2})
        check(status == 200, f"a developer message is accepted (got {status} {text[:160]})")
    unspellable_grammar()
    return report()


if __name__ == "__main__":
    sys.exit(main())
