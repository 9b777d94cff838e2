"""The README's shell examples, read as commands: which of them talk to a server, and how the
README says that server is started.

Contract:
  * A fenced block opened with ```sh is an example; its commands are its lines with
    backslash continuations joined and `#` comments (outside quotes) removed.
  * A command talks to a server when it names the README's address, http://127.0.0.1:8080 or
    http://localhost:8080.
  * `<!-- readme-test: serve ARGS -->`, on the line before such a block, says the block's
    server-talking commands run against `rapide serve ARGS` (an HTML comment: a rendered README
    does not show it). Lines that start a server themselves (`rapide serve`, `mpirun`) are not
    run: the marker's server stands for them.
  * A block with a server-talking command and no marker is returned too (`serve_args` None),
    so the test can fail it: a new example cannot escape being run by being left unmarked.
Python 3, standard library only.
"""
import re
import shlex
from dataclasses import dataclass, field

ADDRESS = re.compile(r"(?:127\.0\.0\.1|localhost):8080\b")
MARKER = re.compile(r"^<!--\s*readme-test:\s*serve\b(.*?)-->\s*$")
STARTS_A_SERVER = re.compile(r"^(?:rapide\s+serve\b|mpirun\b)")


@dataclass
class Example:
    line: int                  # 1-based line of the README's opening fence
    serve_args: list | None    # the marker's ARGS, None when the block has no marker
    commands: list = field(default_factory=list)  # the server-talking commands, as written


def strip_comment(line):
    """The line without a trailing `# comment`; a # inside quotes or a word stays."""
    quote = None
    for i, c in enumerate(line):
        if quote:
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def commands_of(block_lines):
    """The block's commands: continuations joined, comments and blank lines dropped."""
    commands, pending = [], ""
    for raw in block_lines:
        line = strip_comment(raw)
        if line.endswith("\\"):
            pending += line[:-1].rstrip() + " "
            continue
        command = (pending + line.strip()).strip()
        pending = ""
        if command:
            commands.append(command)
    if pending.strip():
        commands.append(pending.strip())
    return commands


def server_examples(readme_text):
    """Every ```sh block with a command that talks to the README's server address."""
    lines = readme_text.splitlines()
    examples, i = [], 0
    while i < len(lines):
        if lines[i].strip() != "```sh":
            i += 1
            continue
        start = i
        end = start + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        marker = MARKER.match(lines[start - 1].strip()) if start > 0 else None
        talking = [c for c in commands_of(lines[start + 1:end])
                   if ADDRESS.search(c) and not STARTS_A_SERVER.match(c)]
        if talking or marker:
            examples.append(Example(line=start + 1,
                                    serve_args=shlex.split(marker.group(1)) if marker else None,
                                    commands=talking))
        i = end + 1
    return examples
