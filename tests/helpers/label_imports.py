"""Labels imported from another tool through the one import (review.labels.imports), for
tests of what reads them (the Agreement page and its figures)."""

from __future__ import annotations

from collections.abc import Iterator

from sqlalchemy import Engine

from review.core import database
from review.core.taxonomy import Taxonomy
from review.labels import imports
from review.labels.external import ExternalLabel, Skipped
from tests.helpers.actors import make_actor

RAVI = make_actor("reviewer", "ravi.menon@brightwave.example")
INES = "ines.duarte@brightwave.example"
TOM = "tom.becker@brightwave.example"


def import_records(
    engine: Engine, tax: Taxonomy, tool: str, name: str, records: list[ExternalLabel]
) -> int:
    def opened(skipped: Skipped) -> Iterator[ExternalLabel]:
        yield from records

    report = database.write(
        engine,
        lambda s: imports.import_labels(
            s,
            RAVI,
            tool,
            opened,
            {"u-ines": INES, "u-tom": TOM},
            tax,
            file_name=name,
            sha256=name.encode().hex()[:64].ljust(64, "0"),
        ),
    )
    assert report.added == len(records) and report.import_id is not None
    return report.import_id


def records_for(tool: str, keys: list[str], shift: int) -> list[ExternalLabel]:
    decisions = ["answer", "abstain", "answer", "clarify", "abstain"]
    out = []
    for i, key in enumerate(keys):
        for j, user in enumerate(("u-ines", "u-tom")):
            decision = decisions[(i + j * (i % 3 == 0) + shift) % len(decisions)]
            reasons: tuple[str, ...] = () if decision == "answer" else ("evidence_stale",)
            out.append(
                ExternalLabel(
                    tool=tool,
                    where=f"record {i}, annotator {user}",
                    ref=f"{tool}-{i}-{user}",
                    case_key=key,
                    user=user,
                    decision=decision,
                    reason_codes=reasons,
                )
            )
    return out
