"""Which of 70,000 cases a threshold sign-off locked (PostgreSQL takes at most 65,535
parameters a statement), on PostgreSQL."""

from __future__ import annotations

import datetime as dt

from review.policy import signoff
from storage.models import PolicyVersion, SignOff, SplitLock
from tests.helpers.bulk import BIG, add_cases, add_rows, migrated

AT = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def test_the_locked_cases_among_more_than_a_statement_takes_parameters(pg_url: str) -> None:
    engine = migrated(pg_url)
    try:
        ids = add_cases(engine, BIG)
        add_rows(
            engine,
            PolicyVersion,
            [{"id": 1, "kind": "thresholds", "number": 1, "yaml_text": "version: 1\n",
              "sha256": "0" * 64, "author": "po@example.org", "rationale": "",
              "created_at": AT}],
        )  # fmt: skip
        add_rows(
            engine,
            SignOff,
            [{"id": 1, "policy_version_id": 1, "signer": "po@example.org",
              "role": "product_owner", "meaning": "approve", "note": "", "at": AT,
              "policy_sha256": "0" * 64, "data_fingerprint": "0" * 64, "metrics_snapshot": {},
              "prev_hash": "0" * 64, "row_hash": "1" * 64}],
        )  # fmt: skip
        add_rows(engine, SplitLock, ({"case_id": c, "signoff_id": 1} for c in ids[1::2]))
        assert signoff.locked_case_ids(engine, ids) == set(ids[1::2])
        assert signoff.locked_case_ids(engine, iter(ids[::2])) == set()
    finally:
        engine.dispose()
