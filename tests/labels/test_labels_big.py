"""The Label page's counts with 70,000 live reservations, and which of 70,000 cases an
annotator labeled (PostgreSQL takes at most 65,535 parameters a statement): the counts
equal the rules (labeling.progress, labeling.queue_size), on PostgreSQL."""

from __future__ import annotations

import datetime as dt

from review.labels import adjudication, counts, labeling
from storage.models import Label, Reservation
from tests.helpers.actors import make_actor
from tests.helpers.bulk import BIG, add_cases, add_rows, migrated

ME = make_actor("annotator", "me@example.org")
FAR = dt.datetime(2100, 1, 1, tzinfo=dt.UTC)
AT = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def test_label_counts_with_more_reservations_than_parameters(pg_url: str) -> None:
    engine = migrated(pg_url)
    try:
        ids = add_cases(engine, BIG)
        # a@ labels every even case, I every 3rd; b@ holds every case, I hold every 10th
        labels = [(c, "a@example.org") for c in ids[::2]] + [(c, ME.email) for c in ids[::3]]
        add_rows(
            engine,
            Label,
            (
                {"case_id": c, "annotator": a, "decision": "answer", "reason_codes": [],
                 "rationale": "", "claim_verdicts": [], "created_at": AT, "source": "workbench"}
                for c, a in labels
            ),
        )  # fmt: skip
        held = [(c, "b@example.org") for c in ids] + [(c, ME.email) for c in ids[::10]]
        add_rows(
            engine,
            Reservation,
            ({"case_id": c, "annotator": a, "expires_at": FAR} for c, a in held),
        )
        overlap = labeling.get_settings(engine).overlap
        kept = counts.label_counts(engine, ME.email, overlap)
        prog, left = counts.queue_progress(engine, ME, kept)
        assert prog == labeling.progress(engine, ME)
        assert left == labeling.queue_size(engine, ME)
        assert prog.mine == len(ids[::3]) and prog.held_by_me == len(ids[::10])
        assert adjudication.labeled_by(engine, "a@example.org", ids) == set(ids[::2])
        assert adjudication.labeled_by(engine, ME.email, reversed(ids)) == set(ids[::3])
    finally:
        engine.dispose()
