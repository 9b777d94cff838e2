#!/usr/bin/env python3
"""Renders chat templates with Python's jinja2 exactly as transformers' apply_chat_template
does, as the reference the C++ interpreter is compared with.

Usage: render_oracle.py CASES.json  ->  prints a JSON list of results, one per case.

A case is {"template": SOURCE, "messages": [...], "tools": ... or null,
"add_generation_prompt": bool, "bos_token": str, "eos_token": str, "extra_context": {...}}.
A result is {"ok": true, "output": TEXT} or {"ok": false, "raised": bool, "type": NAME,
"message": TEXT}, where raised is true for the template's own raise_exception().
"""

import json
import sys
from datetime import datetime

import jinja2.ext
from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment


class TemplateRaised(TemplateError):
    """What raise_exception throws; a subclass so the harness can tell it apart."""


def raise_exception(message):
    raise TemplateRaised(message)


# transformers' tojson: json.dumps without HTML escaping and without ensure_ascii.
def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(fmt):
    return datetime.now().strftime(fmt)


def make_environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render(env, case, compiled):
    try:
        source = case["template"]
        if source not in compiled:
            compiled[source] = env.from_string(source)
        template = compiled[source]
        variables = dict(
            messages=case.get("messages", []),
            tools=case.get("tools"),
            documents=None,
            add_generation_prompt=case.get("add_generation_prompt", True),
            bos_token=case.get("bos_token", ""),
            eos_token=case.get("eos_token", ""),
        )
        variables.update(case.get("extra_context") or {})
        return {"ok": True, "output": template.render(**variables)}
    except TemplateRaised as e:
        return {"ok": False, "raised": True, "type": "TemplateError", "message": str(e)}
    except Exception as e:  # the harness only needs to know that jinja2 failed, and why
        return {"ok": False, "raised": False, "type": type(e).__name__, "message": str(e)}


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        cases = json.load(f)
    env = make_environment()
    compiled = {}  # compiling a big template costs more than rendering it
    json.dump([render(env, case, compiled) for case in cases], sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
