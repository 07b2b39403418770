"""End to end: the workbench database the committed Label Studio exports were made from, its
tasks exported again, the real exports read and imported through the one label import, and the
Agreement figures moving exactly as the imported labels say."""

from __future__ import annotations

import hashlib
import io
from collections import Counter
from pathlib import Path

import pandas as pd
from sqlalchemy import Engine, select

from review.cases import cases
from review.core import database
from review.core.taxonomy import Taxonomy
from review.labels import agreement_sql, imports, labeling, labelstudio
from review.labels.agreement import AgreementReport
from storage.db import make_engine, read_session
from storage.models import Case, Label
from tests.helpers.actors import make_actor
from tests.helpers.labelstudio import expected_labels, load_expected
from tools import labelstudio_roundtrip as rt

DATA = Path(__file__).parent / "data" / "labelstudio"
RAVI = make_actor("reviewer", "ravi.menon@brightwave.example")


def _import(
    engine: Engine, tax: Taxonomy, name: str, users: dict[str, str]
) -> imports.ImportReport:
    body = (DATA / name).read_bytes()
    return database.write(
        engine,
        lambda s: imports.import_labels(
            s,
            RAVI,
            "label-studio",
            lambda skipped: labelstudio.read_export(io.BytesIO(body), skipped),
            users,
            tax,
            file_name=name,
            sha256=hashlib.sha256(body).hexdigest(),
        ),
    )


def _report(engine: Engine, tax: Taxonomy) -> AgreementReport:
    report = agreement_sql.agreement_report_sql(engine, list(tax.decisions), list(tax.reason_codes))
    assert report is not None
    return report


def _heat(frame: pd.DataFrame) -> Counter[tuple[str, str]]:
    """The decision heatmap as unordered pairs of decisions (its cells on and above the
    diagonal, in its own order)."""
    order = list(dict.fromkeys(frame["value_a"]))
    out: Counter[tuple[str, str]] = Counter()
    for a, b, n in frame[["value_a", "value_b", "pairs"]].itertuples(index=False):
        if order.index(a) <= order.index(b) and n:
            out[(a, b)] += int(n)
    return out


def _current(engine: Engine, keys: list[str]) -> dict[str, dict[str, str]]:
    """The current decision of each annotator of each case."""
    with read_session(engine) as s:
        ids = dict(s.execute(select(Case.key, Case.id).where(Case.key.in_(keys))).all())
    return {
        k: {v.annotator: v.decision for v in labeling.current_labels(engine, ids[k])} for k in keys
    }


def _pairs(current: dict[str, dict[str, str]], order: list[str]) -> Counter[tuple[str, str]]:
    out: Counter[tuple[str, str]] = Counter()
    for by_user in current.values():
        users = sorted(by_user)
        for i, a in enumerate(users):
            for b in users[i + 1 :]:
                x, y = sorted((by_user[a], by_user[b]), key=order.index)
                out[(x, y)] += 1
    return out


def test_real_label_studio_exports_import_and_move_the_agreement_figures(
    tmp_path: Path, tax: Taxonomy
) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'wb.db'}")
    try:
        rt.fixture_database(engine, tax)
        # the committed tasks are this database's family as the script exported it
        out = io.BytesIO()
        labelstudio.export_tasks(
            engine, out, tax, cases.CaseFilter(family=rt.FAMILY), viewer=rt.EXPORTER
        )
        assert out.getvalue() == (DATA / labelstudio.TASKS_FILE).read_bytes()

        expected = load_expected(DATA)
        keys = expected["case_keys"]
        before = _report(engine, tax)
        current_before = _current(engine, keys)

        by_id = {uid: email for uid, email in expected["users"].items()}
        report = _import(engine, tax, "full.json", by_id)
        want = expected_labels(expected, by_email=True)
        assert report.added == len(want) and report.changed == 0
        assert report.skipped == {
            "cancelled": 1,
            "draft": 1,
            "prediction": 1,
            "task without annotation": 2,
        }

        # each imported annotation is its annotator's current label, with its source
        current = _current(engine, keys)
        for _ref, key, user, decision, _codes, _note in want:
            assert current[key][user] == decision
        with read_session(engine) as s:
            sources = set(s.scalars(select(Label.source).where(Label.source_ref.is_not(None))))
        assert sources == {"label-studio"}

        # the Agreement figures see them: the decision heatmap moved by exactly the pairs of
        # decisions the import changed, and the label count by the labels it added on cases
        # an annotator had not labeled
        after = _report(engine, tax)
        order = list(dict.fromkeys(after.decision_pairs["value_a"]))
        moved = _heat(after.decision_pairs)
        moved.subtract(_heat(before.decision_pairs))
        implied = _pairs(current, order)
        implied.subtract(_pairs(current_before, order))
        assert +moved == +implied and -moved == -implied
        assert +implied, "the import changed what annotators agree on"
        new_pairs = sum(1 for k in keys for u in current[k] if u not in current_before.get(k, {}))
        assert after.labels == before.labels + new_pairs

        # the same labels in the other exports (JSON-MIN, by e-mail) are the same labels:
        # nothing is added again
        by_email = {e: e for e in expected["users"].values()}
        for name, users in (
            ("full-emails.json", by_email),
            ("min.json", by_id),
            ("min-emails.json", by_email),
        ):
            again = _import(engine, tax, name, users)
            assert (again.added, again.changed, again.unchanged) == (0, 0, len(want)), name
        assert _report(engine, tax).labels == after.labels
    finally:
        engine.dispose()
