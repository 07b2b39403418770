"""The command reference of the documentation (docs/cli-reference.md), made from the commands'
own help, so what the docs say a command takes is what it takes. Written by ``python -m
review.cli.reference > docs/cli-reference.md``; tests/test_docs.py holds the file equal to it.
"""

from __future__ import annotations

from collections.abc import Iterator

import click

from review.cli.main import main

__all__ = ["WIDTH", "commands", "render"]

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


if __name__ == "__main__":
    print(render(), end="")
