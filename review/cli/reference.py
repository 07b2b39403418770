"""Pages of the documentation made from the code, so what the docs say is what the code does:
the command reference (docs/cli-reference.md) from the commands' own help, and the trace
formats (docs/trace-formats.md) from the docstring of :mod:`review.traces.formats`, which the
parsers beside it follow. Written by ``python -m review.cli.reference [commands|traces] >
FILE``; tests/test_docs.py holds each file equal to what this makes.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator

import click

import review.traces.formats
from review.cli.main import main

__all__ = ["WIDTH", "commands", "render", "trace_formats"]

#: the help's width, fixed so the page does not follow the terminal it was made in
WIDTH = 92


def commands(
    group: click.Group = main, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    """Every command and subcommand under ``group``, as (its words after ``workbench``,
    the command), in the order of their names; a group comes before its subcommands."""
    for name in sorted(group.commands):
        cmd = group.commands[name]
        yield (*path, name), cmd
        if isinstance(cmd, click.Group):
            yield from commands(cmd, (*path, name))


def _help(words: tuple[str, ...], cmd: click.Command) -> str:
    root = click.Context(main, info_name="workbench", terminal_width=WIDTH, max_content_width=WIDTH)
    ctx = root
    for word in words[:-1]:
        parent = ctx.command
        assert isinstance(parent, click.Group)
        ctx = click.Context(parent.commands[word], parent=ctx, info_name=word)
    ctx = click.Context(cmd, parent=ctx, info_name=words[-1])
    return cmd.get_help(ctx)


def render() -> str:
    """The page: each command's ``--help``, as ``workbench COMMAND --help`` prints it."""
    out = [
        "# Every command's help",
        "",
        "What `workbench COMMAND --help` prints for each command, made from the commands",
        "themselves (`python -m review.cli.reference > docs/cli-reference.md`; a test holds",
        "this page equal to it). [The command line](commands.md) says what each is for.",
    ]
    for words, cmd in commands():
        out += ["", f"## workbench {' '.join(words)}", "", "```text", _help(words, cmd), "```"]
    return "\n".join(out) + "\n"


_ROLE = re.compile(r":\w+:`~?(?:[\w.]+\.)?(\w+)`")


def trace_formats() -> str:
    """The trace formats page: the docstring of :mod:`review.traces.formats` in Markdown (its
    sections as headings, its ``literal`` as `code`, its example line as a code block)."""
    doc = review.traces.formats.__doc__ or ""
    lines = doc.strip("\n").splitlines()
    out = [
        "# Trace formats",
        "",
        "How each format a trace import reads maps onto the canonical trace. This page is the",
        "docstring of `review/traces/formats/__init__.py`, which the parsers follow (a test holds",
        "it equal). [Importing your own data](import.md#production-traces) has a complete",
        "example file.",
        "",
    ]
    i = 2  # the docstring's first line is the page's title, the second blank
    while i < len(lines):
        line = lines[i]
        if i + 1 < len(lines) and lines[i + 1] and set(lines[i + 1]) == {"-"}:
            out += [f"## {line}", ""]
            i += 2
            continue
        if line.endswith("::"):
            out += [_inline(line[:-1]), "", "```text"]
            i += 2  # the blank line before the block
            while i < len(lines) and (not lines[i] or lines[i].startswith("    ")):
                out.append(lines[i][4:])
                i += 1
            while out[-1] == "":
                out.pop()
            out += ["```", ""]
            continue
        out.append(_inline(line))
        i += 1
    out += [
        "",
        "## Files of every format",
        "",
        "The tests import a file of each format, with the cases each rule above is about:",
        "`tests/data/traces/canonical.jsonl`, `otlp_openinference.jsonl`, `otlp_genai.jsonl`,",
        "`langfuse.jsonl` and `flat.csv`.",
    ]
    return "\n".join(out).rstrip("\n") + "\n"


def _inline(line: str) -> str:
    return _ROLE.sub(r"`\1`", line).replace("``", "`")


if __name__ == "__main__":
    page = sys.argv[1] if len(sys.argv) > 1 else "commands"
    print(trace_formats() if page == "traces" else render(), end="")
