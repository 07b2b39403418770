"""Pages of the documentation made from the code, so what the docs say is what the code does:
the command reference (docs/cli-reference.md) from the commands' own help, the trace formats
(docs/trace-formats.md) from the docstring of :mod:`review.traces.formats`, which the parsers
beside it follow, and sign-off (docs/signoff.md) from those of :mod:`review.policy.signoff`
and :mod:`review.policy.chain`. Written by ``python -m review.cli.reference PAGE > FILE``
(PAGE: commands, traces or signoff); tests/test_docs.py holds each file equal to what this
makes (for sign-off, the part before its worked example).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator

import click

import review.policy.chain
import review.policy.signoff
import review.traces.formats
from review.cli.main import main

__all__ = ["WIDTH", "commands", "render", "signoff_page", "trace_formats"]

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


_ROLE = re.compile(r":(\w+):`~?([\w.]+)`")


def trace_formats() -> str:
    """The trace formats page: the docstring of :mod:`review.traces.formats` in Markdown."""
    out = [
        "# Trace formats",
        "",
        "How each format a trace import reads maps onto the canonical trace. This page is the",
        "docstring of `review/traces/formats/__init__.py`, which the parsers follow (a test holds",
        "it equal). [Importing your own data](import.md#production-traces) has a complete",
        "example file.",
        "",
        *_markdown(review.traces.formats.__doc__ or "", skip=2),
        "",
        "## Files of every format",
        "",
        "The tests import a file of each format, with the cases each rule above is about:",
        "`tests/data/traces/canonical.jsonl`, `otlp_openinference.jsonl`, `otlp_genai.jsonl`,",
        "`langfuse.jsonl` and `flat.csv`.",
    ]
    return "\n".join(out).rstrip("\n") + "\n"


def signoff_page() -> str:
    """The sign-off page: the docstrings of :mod:`review.policy.signoff` (what is signed and
    what is served) and :mod:`review.policy.chain` (what each row hash covers) in Markdown."""
    out = [
        "# Sign-off and the chain",
        "",
        "A change of the no-answer policy or of the refusal wording is in force only once the",
        "roles it needs have approved it ([the product owner guide](guides/product-owner.md)),",
        "and every signature is kept for good in a hash chain that `workbench verify-signoffs`",
        "checks. Its first two sections are the docstrings of `review/policy/signoff.py` and",
        "`review/policy/chain.py`, the code that does it (a test holds them equal); the worked",
        "example after them is run by a test too.",
        "",
        "## What is signed, and what is in force",
        "",
        *_markdown(review.policy.signoff.__doc__ or "", skip=0),
        "",
        "## The chain",
        "",
        *_markdown(review.policy.chain.__doc__ or "", skip=0),
    ]
    return "\n".join(out).rstrip("\n") + "\n"


def _markdown(doc: str, skip: int) -> list[str]:
    """A docstring in Markdown, without its first ``skip`` lines: its sections (a line
    underlined with dashes) as headings, its ``literal`` as `code`, a block after ``::`` as a
    code block."""
    lines = doc.strip("\n").splitlines()
    out: list[str] = []
    i = skip
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
    return out


def _inline(line: str) -> str:
    """A docstring line's Sphinx roles and ``literals`` as Markdown code: a module by its
    full name, a function or class by its own."""

    def role(m: re.Match[str]) -> str:
        name = m.group(2)
        return f"`{name if m.group(1) == 'mod' else name.rsplit('.', 1)[-1]}`"

    return _ROLE.sub(role, line).replace("``", "`")


if __name__ == "__main__":
    page = sys.argv[1] if len(sys.argv) > 1 else "commands"
    pages = {"commands": render, "traces": trace_formats, "signoff": signoff_page}
    print(pages[page](), end="")
