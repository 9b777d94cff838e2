"""Request bodies of attacks shared by the e2e tests: structured-output schemas (issue 53,
N1 and N2: serve_grammar_attacks_test.py, adversarial_test.py) and deeply nested JSON (issue
18: serve_hardening_test.py, adversarial_test.py)."""


def schema(s):
    """response_format asking for JSON Schema `s`."""
    return {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": s}}}


def anyof_tree(depth):
    """A schema whose anyOf alternatives double at each level: 2^depth leaves."""
    return {"type": "integer"} if depth == 0 else {"anyOf": [anyof_tree(depth - 1)] * 2}


def optional_properties(n):
    """An object schema of n optional integer properties."""
    return {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(n)}}


def nested(depth):
    """JSON text: lists nested `depth` deep."""
    return "[" * depth + "]" * depth


def deep_json_chat_bodies(depth):
    """(where, raw chat body) with JSON nested `depth` deep in a field, the tools, a message."""
    deep = nested(depth)
    head = '{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, '
    return [
        ("a field", head + '"user_data": ' + deep + "}"),
        ("tools", head + '"tools": [{"type": "function", "function": {"name": "f", '
                         '"parameters": ' + deep + "}}]}"),
        ("a message", '{"messages": [{"role": "user", "content": ' + deep +
                      '}], "max_tokens": 2}'),
    ]
