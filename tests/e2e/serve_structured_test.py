"""Structured outputs and tool calling (issue 19) against a real `rapide serve` on stories260K.

Every generation is checked by oracles independent of rapide: python `jsonschema` (with its
format checker) for JSON Schema, `re.fullmatch` for guided_regex, `json.loads` for
json_object. Each schema runs 100 choices (n=100) at temperature 1, all of which must finish
with "stop" and validate.
usage: serve_structured_test.py RAPIDE_BINARY SHARED_DIR
"""
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from require_shared import missing_prerequisite, require_shared  # noqa: E402
from serve_fixture import RapideServer, sse_events  # noqa: E402

MODEL = "models/stories260K/stories260K.gguf"

# Real-world shapes: nested objects, arrays, enums, anyOf, $ref, patterns, formats, ranges.
SCHEMAS = {
    "person": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 12},
            "age": {"type": "integer", "minimum": 0, "maximum": 120},
            "email": {"type": "string", "pattern": "^[a-z]{1,8}@[a-z]{1,8}\\.(com|org)$"},
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 6},
                     "minItems": 1, "maxItems": 3},
        },
        "required": ["name", "age"],
        "additionalProperties": False,
    },
    "order": {
        "$defs": {
            "item": {"type": "object",
                     "properties": {"sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
                                    "qty": {"type": "integer", "exclusiveMinimum": 0,
                                            "maximum": 99},
                                    "price": {"type": "number", "minimum": 0, "maximum": 1000}},
                     "required": ["sku", "qty", "price"]},
        },
        "type": "object",
        "properties": {
            "id": {"type": "string", "format": "uuid"},
            "status": {"enum": ["pending", "shipped", "delivered"]},
            "items": {"type": "array", "items": {"$ref": "#/$defs/item"},
                      "minItems": 1, "maxItems": 2},
            "placed": {"type": "string", "format": "date-time"},
            "gift": {"type": "boolean"},
        },
        "required": ["id", "status", "items", "placed"],
    },
    "weather_or_error": {
        "anyOf": [
            {"type": "object",
             "properties": {"city": {"type": "string", "maxLength": 10},
                            "celsius": {"type": "number", "minimum": -50, "maximum": 50},
                            "day": {"type": "string", "format": "date"}},
             "required": ["city", "celsius", "day"]},
            {"type": "object",
             "properties": {"error": {"const": "unknown city"},
                            "code": {"type": ["integer", "null"]}},
             "required": ["error", "code"]},
        ],
    },
    "tree": {
        "$defs": {"leaf": {"type": "object",
                           "properties": {"v": {"type": "integer", "minimum": -5, "maximum": 5}},
                           "required": ["v"]},
                  "node": {"type": "object",
                           "properties": {"v": {"type": "integer", "minimum": -5, "maximum": 5},
                                          "kids": {"type": "array", "maxItems": 2,
                                                   "items": {"$ref": "#/$defs/leaf"}}},
                           "required": ["v"]}},
        "type": "object",
        "properties": {"root": {"$ref": "#/$defs/node"},
                       "at": {"type": "string", "format": "time"}},
        "required": ["root", "at"],
    },
}

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather",
        "parameters": {"type": "object",
                       "properties": {"city": {"type": "string", "maxLength": 10},
                                      "unit": {"enum": ["c", "f"]}},
                       "required": ["city", "unit"]}}},
    {"type": "function", "function": {
        "name": "add", "parameters": {"type": "object",
                                      "properties": {"a": {"type": "integer", "maximum": 999},
                                                     "b": {"type": "integer", "maximum": 999}},
                                      "required": ["a", "b"]}}},
]

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


def post(server, path, body):
    status, _, text = server.curl(path, body, timeout=600)
    return status, json.loads(text) if text.strip().startswith("{") else text


def schema_suite(server, jsonschema):
    # The 2020-12 draft's checker (FormatChecker() would add draft 3's "time" = "%H:%M:%S").
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    for name, schema in SCHEMAS.items():
        body = {"messages": [{"role": "user", "content": "Give me JSON."}], "n": 100,
                "temperature": 1.0, "seed": 7, "max_tokens": 400,
                "response_format": {"type": "json_schema",
                                    "json_schema": {"name": name, "schema": schema,
                                                    "strict": True}}}
        status, resp = post(server, "/v1/chat/completions", body)
        check(status == 200, f"{name}: status {status} {resp if status != 200 else ''}")
        if status != 200:
            continue
        bad = []
        for c in resp["choices"]:
            text = c["message"]["content"]
            try:
                jsonschema.validate(json.loads(text), schema, format_checker=checker)
                if c["finish_reason"] != "stop":
                    bad.append((c["finish_reason"], text))
            except Exception as e:  # noqa: BLE001 - any failure is a finding
                bad.append((c["finish_reason"], text, str(e)[:200]))
        check(not bad, f"{name}: {100 - len(bad)}/100 valid and stopped; first bad: "
                       f"{bad[0] if bad else None}")
        print("   e.g.", resp["choices"][0]["message"]["content"][:160])


def guided_fields(server):
    base = {"prompt": "Once upon a time", "n": 20, "temperature": 1.0, "seed": 3,
            "max_tokens": 60}
    regex = r"(cat|dog)-[0-9]{2,3}( [a-z]{1,8})?"
    status, resp = post(server, "/v1/completions", {**base, "guided_regex": regex})
    check(status == 200 and all(re.fullmatch(regex, c["text"]) and c["finish_reason"] == "stop"
                                for c in resp["choices"]),
          f"guided_regex: {[c['text'] for c in resp['choices'][:4]] if status == 200 else resp}")
    choices = ["yes", "no", "maybe later"]
    status, resp = post(server, "/v1/completions", {**base, "guided_choice": choices})
    check(status == 200 and all(c["text"] in choices for c in resp["choices"]),
          "guided_choice: every text is a choice")
    grammar = 'root ::= "(" num (" + " num){0,3} ")"\nnum ::= [1-9] [0-9]{0,3}'
    status, resp = post(server, "/v1/completions", {**base, "grammar": grammar})
    check(status == 200 and all(re.fullmatch(r"\([1-9][0-9]{0,3}( \+ [1-9][0-9]{0,3}){0,3}\)",
                                             c["text"])
                                for c in resp["choices"]),
          f"grammar (GBNF): {[c['text'] for c in resp['choices'][:3]] if status == 200 else resp}")
    # json_object bounds nothing (a tiny model's string may run on past max_tokens): outputs
    # that stopped must parse, the others start an object.
    status, resp = post(server, "/v1/completions",
                        {**base, "max_tokens": 300, "response_format": {"type": "json_object"}})
    ok, stopped = status == 200, 0
    for c in resp["choices"] if ok else []:
        ok = ok and c["text"].startswith("{")
        if c["finish_reason"] == "stop":
            stopped += 1
            try:
                ok = ok and isinstance(json.loads(c["text"]), dict)
            except ValueError:
                ok = False
    check(ok, f"completions json_object: objects ({stopped}/20 stopped within max_tokens)")
    status, resp = post(server, "/v1/completions",
                        {**base, "max_tokens": 3, "response_format": {"type": "json_object"}})
    check(status == 200 and all(c["finish_reason"] == "length" for c in resp["choices"]),
          "max_tokens cut-off -> finish_reason length")


def bad_requests(server):
    chat = {"messages": [{"role": "user", "content": "hi"}]}
    cases = [
        ({"type": "json_schema", "json_schema": {"name": "x", "schema": {"allOf": []}}}, "allOf"),
        ({"type": "json_schema", "json_schema": {"name": "x", "schema": {
            "type": "object", "properties": {"a": {"not": {"type": "null"}}}}}}, "not"),
        ({"type": "json_schema", "json_schema": {"name": "x", "schema": {
            "type": "string", "format": "email"}}}, "format"),
        ({"type": "json_schema", "json_schema": {"name": "x", "schema": {
            "type": "object", "patternProperties": {}}}}, "patternProperties"),
        ({"type": "xml"}, "xml"),
    ]
    for fmt, keyword in cases:
        status, resp = post(server, "/v1/chat/completions", {**chat, "response_format": fmt})
        msg = resp.get("error", {}).get("message", "") if isinstance(resp, dict) else resp
        check(status == 400 and keyword in msg and
              resp["error"]["param"] == "response_format", f"400 naming '{keyword}': {msg}")
    for extra, param in [({"grammar": "root ::= nothing"}, "grammar"),
                         ({"guided_regex": "(a)\\1"}, "guided_regex"),
                         ({"guided_choice": []}, "guided_choice"),
                         ({"grammar": 'root ::= "a"', "guided_choice": ["a"]}, "guided_choice"),
                         ({"tools": TOOLS, "tool_choice": {"type": "function",
                                                           "function": {"name": "nope"}}},
                          "tool_choice")]:
        status, resp = post(server, "/v1/chat/completions", {**chat, **extra})
        check(status == 400 and resp["error"]["param"] == param,
              f"400 for {param}: {resp['error']['message'] if status == 400 else status}")


def tool_calls(server, jsonschema, label):
    params = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
    body = {"messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": TOOLS,
            "tool_choice": "required", "parallel_tool_calls": False, "temperature": 1.0,
            "seed": 11, "max_tokens": 300}
    for seed in range(5):
        body["seed"] = seed
        status, resp = post(server, "/v1/chat/completions", body)
        check(status == 200, f"{label} required: status {status}")
        if status != 200:
            return
        choice = resp["choices"][0]
        calls = choice["message"].get("tool_calls") or []
        ok = choice["finish_reason"] == "tool_calls" and len(calls) >= 1
        for call in calls:
            ok = ok and call["type"] == "function" and call["id"].startswith("call_")
            try:
                jsonschema.validate(json.loads(call["function"]["arguments"]),
                                    params[call["function"]["name"]])
            except Exception:  # noqa: BLE001
                ok = False
        check(ok, f"{label} required seed {seed}: {json.dumps(choice['message'])[:200]}")
        # Streamed: the same seed gives the same calls, as deltas.
        status, _, text = server.curl("/v1/chat/completions", {**body, "stream": True},
                                      timeout=600)
        events, done = sse_events(text)
        streamed, reason, content = {}, None, ""
        for e in events:
            for c in e["choices"]:
                delta = c.get("delta", {})
                content += delta.get("content") or ""
                for d in delta.get("tool_calls", []):
                    s = streamed.setdefault(d["index"], {"name": "", "arguments": ""})
                    s["name"] += d.get("function", {}).get("name", "")
                    s["arguments"] += d.get("function", {}).get("arguments", "")
                reason = c.get("finish_reason") or reason
        same = [streamed[i] for i in sorted(streamed)] == [
            {"name": c["function"]["name"], "arguments": c["function"]["arguments"]}
            for c in calls]
        check(done and same and reason == "tool_calls" and content == (
            choice["message"]["content"] or ""), f"{label} streamed == non-streamed (seed {seed})")
    named = {**body, "tool_choice": {"type": "function", "function": {"name": "add"}}}
    status, resp = post(server, "/v1/chat/completions", named)
    calls = resp["choices"][0]["message"].get("tool_calls") or [] if status == 200 else []
    check(len(calls) >= 1 and all(c["function"]["name"] == "add" for c in calls),
          f"{label} named tool_choice: {calls[:1]}")
    status, resp = post(server, "/v1/chat/completions", {**body, "tool_choice": "none",
                                                         "max_tokens": 20})
    check(status == 200 and "tool_calls" not in resp["choices"][0]["message"],
          f"{label} tool_choice none: plain content")


def batch_lines(binary, model, jsonschema):
    """`rapide batch` lines take the same fields (the protocol is shared)."""
    schema = SCHEMAS["person"]
    lines = [{"custom_id": f"r{i}", "method": "POST", "url": "/v1/chat/completions",
              "body": {"messages": [{"role": "user", "content": "JSON please"}],
                       "temperature": 1.0, "seed": i, "max_tokens": 300,
                       "response_format": {"type": "json_schema",
                                           "json_schema": {"name": "p", "schema": schema}}}}
             for i in range(8)]
    lines.append({"custom_id": "tools", "method": "POST", "url": "/v1/chat/completions",
                  "body": {"messages": [{"role": "user", "content": "add"}], "tools": TOOLS,
                           "tool_choice": "required", "parallel_tool_calls": False,
                           "seed": 1, "max_tokens": 300}})
    with tempfile.TemporaryDirectory() as tmp:
        src, out = os.path.join(tmp, "in.jsonl"), os.path.join(tmp, "out.jsonl")
        with open(src, "w") as f:
            f.write("".join(json.dumps(line) + "\n" for line in lines))
        run = subprocess.run([binary, "batch", "-m", model, "-i", src, "-o", out,
                              "--progress", "off"], capture_output=True, text=True)
        check(run.returncode == 0, f"rapide batch exit {run.returncode}: {run.stderr[-300:]}")
        results = {}
        if os.path.exists(out):
            for line in open(out):
                r = json.loads(line)
                results[r["custom_id"]] = r["response"]["body"]
    valid = 0
    for i in range(8):
        body = results.get(f"r{i}")
        try:
            jsonschema.validate(json.loads(body["choices"][0]["message"]["content"]), schema)
            valid += body["choices"][0]["finish_reason"] == "stop"
        except Exception:  # noqa: BLE001
            pass
    check(valid == 8, f"rapide batch response_format lines: {valid}/8 valid")
    tool = results.get("tools", {}).get("choices", [{}])[0]
    check(tool.get("finish_reason") == "tool_calls" and tool["message"].get("tool_calls"),
          f"rapide batch tool_choice required: {json.dumps(tool)[:200]}")


def speculative(server, jsonschema):
    """Constrained requests next to speculation: no guesses for them, output still valid."""
    schema = SCHEMAS["person"]
    body = {"messages": [{"role": "user", "content": "Give me JSON."}], "n": 20,
            "temperature": 0, "seed": 1, "max_tokens": 300,
            "response_format": {"type": "json_schema",
                                "json_schema": {"name": "p", "schema": schema}}}
    status, resp = post(server, "/v1/chat/completions", body)
    ok = status == 200
    for c in resp["choices"] if ok else []:
        try:
            jsonschema.validate(json.loads(c["message"]["content"]), schema)
        except Exception:  # noqa: BLE001
            ok = False
    check(ok, "with --spec ngram: constrained outputs valid")


def main():
    binary, shared = sys.argv[1], os.environ.get("RAPIDE_SHARED_DIR", sys.argv[2])
    require_shared(shared, MODEL)
    try:
        import jsonschema
    except ImportError:
        missing_prerequisite("python3-jsonschema not installed (scripts/install-deps.sh)")
    model = os.path.join(shared, MODEL)
    with RapideServer(binary, ["-m", model]) as server:
        schema_suite(server, jsonschema)
        guided_fields(server)
        bad_requests(server)
        tool_calls(server, jsonschema, "json")
    with RapideServer(binary, ["-m", model, "--tool-call-parser", "hermes"]) as server:
        tool_calls(server, jsonschema, "hermes")
    with RapideServer(binary, ["-m", model, "--spec", "ngram", "--spec-tokens", "4"]) as server:
        speculative(server, jsonschema)
    batch_lines(binary, model, jsonschema)
    if failures:
        print(f"{len(failures)} failure(s)")
        sys.exit(1)
    print("all structured-output checks passed")


if __name__ == "__main__":
    main()
