"""Request fields of the structured-output attacks (issue 53, N1 and N2), shared by
serve_grammar_attacks_test.py and adversarial_test.py."""


def schema(s):
    """response_format asking for JSON Schema `s`."""
    return {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": s}}}


def anyof_tree(depth):
    """A schema whose anyOf alternatives double at each level: 2^depth leaves."""
    return {"type": "integer"} if depth == 0 else {"anyOf": [anyof_tree(depth - 1)] * 2}


def optional_properties(n):
    """An object schema of n optional integer properties."""
    return {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(n)}}
