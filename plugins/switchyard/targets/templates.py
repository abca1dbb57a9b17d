"""The engines' SQL templates (Jinja; each engine's in its own folder, `targets/<engine>/templates/`,
as its adapter's `templates` names it): their environment, compiled once per process, and the
split of a rendered template into its statements."""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined

# The built-in engines' folders: targets/<engine>/templates/.
BUILT_IN = Path(__file__).resolve().parent


@lru_cache(maxsize=8)
def environment(folder: Path) -> Environment:
    """The Jinja environment of one engine's templates (the folder its adapter names)."""
    env = Environment(loader=FileSystemLoader(str(folder)), undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True, autoescape=False)
    return env


def compile_templates() -> int:
    """Compile the built-in engines' SQL templates now, in this process; returns how many.

    Compiling takes about 2 ms a template, and every task process would pay it for the few it
    renders; the scheduler calls this when it preloads, and the task processes it forks inherit
    the compiled templates. Jinja still checks each file's modification time when a template is
    used, so an edited template is recompiled where it is next rendered.
    """
    count = 0
    for folder in sorted(p for p in BUILT_IN.glob("*/templates") if p.is_dir()):
        env = environment(folder)
        for name in env.list_templates(extensions=["sql"]):
            env.get_template(name)
            count += 1
    return count


_STATEMENT_END_OR_DOLLAR_QUOTE = re.compile(r";[ \t]*(?:\n|$)|\$(?:[A-Za-z_][A-Za-z_0-9]*)?\$")


def _statement_parts(text: str) -> list[str]:
    """Split at each ';' that ends a line, except inside a dollar-quoted body ($tag$ ... $tag$,
    PostgreSQL's DO blocks), whose own statements end lines with ';' too."""
    parts, start, open_tag = [], 0, None
    for m in _STATEMENT_END_OR_DOLLAR_QUOTE.finditer(text):
        token = m.group()
        if token.startswith("$"):
            if open_tag is None:
                open_tag = token
            elif token == open_tag:
                open_tag = None
        elif open_tag is None:
            parts.append(text[start:m.start()])
            start = m.end()
    parts.append(text[start:])
    return parts


def split_statements(text: str) -> list[str]:
    """Statements end with ';' at the end of a line (templates never put one inside a literal)."""
    out = []
    for part in _statement_parts(text):
        lines = [ln for ln in part.strip().splitlines()]
        body = "\n".join(lines).strip()
        if body and not all(ln.strip().startswith("--") or not ln.strip() for ln in lines):
            out.append(body)
    return out
