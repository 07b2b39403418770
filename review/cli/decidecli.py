"""The ``workbench decide`` command: the evidence gate over JSON lines of gate inputs.

Reads one input per line (a file, or ``-`` for standard input), checks every line first and
only then writes one JSON state per line to standard output, so a malformed line (reported with
its line number and field, exit status 1) writes nothing. The thresholds come from the policy
in force in the database (the most recently approved version, else the shipped file), or from
``--policy FILE``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TextIO

import click

from review.cli.common import WorkbenchCommand, open_engine
from review.policy import evidence, inforce
from review.policy.policy import NoAnswerPolicy, load_policy

__all__ = ["decide_cmd"]


def _policy(policy_file: Path | None) -> NoAnswerPolicy:
    if policy_file is not None:
        return load_policy(policy_file)

    return inforce.in_force(open_engine()).policy


@click.command("decide", cls=WorkbenchCommand)
@click.argument("file", default="-", type=click.File("r", encoding="utf-8"))
@click.option(
    "--policy",
    "policy_file",
    default=None,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A no-answer policy YAML (default: the policy in force in the database).",
)
def decide_cmd(file: TextIO, policy_file: Path | None) -> None:
    """Run the evidence gate on each JSON line of FILE (default: standard input) and print one
    JSON state per line: status, answer, supporting_passage_ids, missing_claims,
    reason_codes, next_step, the rule that decided and each predicate's result."""
    policy = _policy(policy_file)
    evidence.gate_policy(policy)  # refuse a policy without the section before reading input
    name = str(getattr(file, "name", "<stdin>"))
    inputs = list(evidence.read_inputs(file, name))
    for _, inp in inputs:
        state = evidence.decide_evidence(inp, policy)
        click.echo(json.dumps(state.as_json(), ensure_ascii=False))
