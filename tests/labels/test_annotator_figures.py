"""Per-annotator figures: a hand-worked set on SQLite and PostgreSQL, the demo against the
definition computed label by label in Python, and Cohen's kappa from counts against the kappa
of the label lists."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, func, select

from review.core.taxonomy import Taxonomy
from review.labels import labeling
from review.labels.agreement import cohen_kappa, cohen_kappa_counts
from review.labels.annotator_figures import ANNOTATOR_COLUMNS, annotator_figures
from storage.db import read_session, run_write
from storage.models import Adjudication, Case, CaseFamily, CaseSlice
from tests.helpers.actors import make_actor

A = make_actor("annotator", "a@example.org", uid=201)
B = make_actor("annotator", "b@example.org", uid=202)
C = make_actor("annotator", "c@example.org", uid=203)
REVIEWER = make_actor("reviewer", "rev@example.org", uid=204)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("xyz"), st.sampled_from("xyz")), max_size=30))
def test_kappa_from_counts_is_the_kappa_of_the_lists(pairs: list[tuple[str, str]]) -> None:
    table: dict[tuple[str, str], int] = {}
    for p in pairs:
        table[p] = table.get(p, 0) + 1
    got = cohen_kappa_counts(table)
    want = cohen_kappa([a for a, _ in pairs], [b for _, b in pairs])
    assert (got is None) == (want is None)
    if want is not None:
        assert got == pytest.approx(want, abs=1e-12)


def add_cases(engine: Engine, n: int, *, family_every: int = 0) -> list[int]:
    def work(s: Any) -> list[int]:
        fam = CaseFamily(key="fam-1", title="family one")
        s.add(fam)
        s.flush()
        ids = []
        for i in range(n):
            c = Case(
                key=f"AF-{i:02d}",
                question=f"q{i}",
                identity_name="anyone",
                expected_decision="answer",
                category="in_scope",
                split="dev",
                status="ready" if i < n - 1 else "draft",  # the last is not in the queue
                family_id=fam.id if family_every and i % family_every == 0 else None,
            )
            s.add(c)
            s.flush()
            if i % 2 == 0:
                s.add(CaseSlice(case_id=c.id, slice="s_even"))
            ids.append(c.id)
        return ids

    return list(run_write(engine, work))


def label(engine: Engine, who: Any, case_id: int, decision: str, tax: Taxonomy) -> None:
    reasons = () if tax.decisions[decision].answers else (next(iter(tax.reason_codes)),)
    labeling.submit(engine, who, case_id, labeling.LabelIn(decision, reasons), None, tax)


def test_hand_worked_figures(any_engine: Engine, tax: Taxonomy) -> None:
    cases = add_cases(any_engine, 6, family_every=2)
    # case 0: a answer, b answer            -> a's reference b's answer (agree), b's a's
    # case 1: a answer, b abstain, c abstain -> a: the others agree on abstain (disagree);
    #                                          b, c: the others disagree -> no reference
    # case 2: a abstain, b answer; adjudicated abstain -> both compared with abstain
    # case 3: a answer only                 -> no reference
    # case 5 (a draft): b answer, c answer   -> b and c agree; not in the queue
    label(any_engine, A, cases[0], "answer", tax)
    label(any_engine, B, cases[0], "answer", tax)
    label(any_engine, A, cases[1], "answer", tax)
    label(any_engine, B, cases[1], "abstain", tax)
    label(any_engine, C, cases[1], "abstain", tax)
    label(any_engine, A, cases[2], "abstain", tax)
    label(any_engine, B, cases[2], "answer", tax)
    label(any_engine, A, cases[3], "answer", tax)
    label(any_engine, B, cases[5], "answer", tax)
    label(any_engine, C, cases[5], "answer", tax)
    code = next(iter(tax.reason_codes))
    labeling.adjudicate(any_engine, REVIEWER, cases[2], "abstain", [code], "Settled.", tax)
    t = annotator_figures(any_engine, list(tax.decisions)).set_index("annotator")
    assert list(t.reset_index().columns) == ANNOTATOR_COLUMNS
    a, b, c = t.loc[A.email], t.loc[B.email], t.loc[C.email]
    assert (a.cases_labelled, a.n_compared, a.n_adjudicated) == (4, 3, 1)
    assert a.agreement_with_reference == pytest.approx(2 / 3)  # 0 agree, 1 no, 2 agree
    # a: (answer, answer), (answer, abstain), (abstain, abstain): kappa by hand
    # p_o = 2/3; a's answer 2/3 abstain 1/3; ref answer 1/3 abstain 2/3; p_e = 4/9
    assert a.kappa_vs_reference == pytest.approx((2 / 3 - 4 / 9) / (1 - 4 / 9))
    assert (b.cases_labelled, b.n_compared, b.n_adjudicated) == (4, 3, 1)
    assert b.agreement_with_reference == pytest.approx(2 / 3)  # case 0, case 5 agree; 2 not
    # c on case 1: the others (a answer, b abstain) disagree, so no reference there;
    # on case 5 b agrees
    assert (c.cases_labelled, c.n_compared, c.agreement_with_reference) == (2, 1, 1.0)
    assert math.isnan(c.kappa_vs_reference) and "gave only 'answer'" in c.note
    # progress: 5 ready cases (the last is a draft)
    assert list(t["queue_cases"]) == [5, 5, 5]
    assert (a.queue_labelled, b.queue_labelled, c.queue_labelled) == (4, 3, 1)
    # a family: cases 0, 2 and 4
    fam = annotator_figures(any_engine, list(tax.decisions), family="fam-1")
    assert fam.set_index("annotator")["cases_labelled"].to_dict() == {A.email: 2, B.email: 2}
    assert set(fam["queue_cases"]) == {3}


def reference(engine: Engine, tax: Taxonomy, family: str = "", slice_: str = "") -> pd.DataFrame:
    """The definition, label by label in Python, from labels_frame and the adjudications."""
    frame = labeling.labels_frame(engine)
    if family:
        frame = frame[frame["family"] == family]
    if slice_:
        frame = frame[[slice_ in s for s in frame["slices"]]]
    with read_session(engine) as s:
        latest = dict(
            s.execute(select(Adjudication.case_id, func.max(Adjudication.id)).group_by(
                Adjudication.case_id)).all()
        )  # fmt: skip
        adj = dict(
            s.execute(
                select(Adjudication.case_id, Adjudication.decision).where(
                    Adjudication.id.in_(list(latest.values()))
                )
            ).all()
        )
    by_case: dict[int, dict[str, str]] = {}
    for cid, who, dec in zip(frame["case_id"], frame["annotator"], frame["decision"], strict=True):
        by_case.setdefault(int(cid), {})[str(who)] = str(dec)
    out: dict[str, dict[str, Any]] = {}
    for cid, labels in by_case.items():
        for who, dec in labels.items():
            row = out.setdefault(who, {"n": 0, "pairs": [], "adj": 0})
            row["n"] += 1
            others = {d for w, d in labels.items() if w != who}
            ref = adj.get(cid) or (next(iter(others)) if len(others) == 1 else None)
            if ref is not None:
                row["pairs"].append((dec, ref))
                row["adj"] += cid in adj
    return pd.DataFrame(
        [
            {
                "annotator": who,
                "cases_labelled": r["n"],
                "n_compared": len(r["pairs"]),
                "n_adjudicated": r["adj"],
                "agreement_with_reference": (
                    sum(x == y for x, y in r["pairs"]) / len(r["pairs"]) if r["pairs"] else math.nan
                ),
                "kappa_vs_reference": cohen_kappa(
                    [x for x, _ in r["pairs"]], [y for _, y in r["pairs"]]
                ),
            }
            for who, r in sorted(out.items())
        ]
    )


@pytest.mark.parametrize("scope", [{}, {"slice_": "temporal_mismatch"}, {"family": "first"}])
def test_the_demo_matches_the_definition_label_by_label(
    demo_engine: Engine, tax: Taxonomy, scope: dict[str, Any]
) -> None:
    if "family" in scope:
        families = sorted({str(f) for f in labeling.labels_frame(demo_engine)["family"].dropna()})
        scope = {"family": families[0]}
    got = annotator_figures(demo_engine, list(tax.decisions), **scope)
    want = reference(demo_engine, tax, scope.get("family", ""), scope.get("slice_", ""))
    assert len(got) == len(want) >= 2
    assert got["n_compared"].sum() > 0
    cols = ["annotator", "cases_labelled", "n_compared", "n_adjudicated"]
    assert got[cols].values.tolist() == want[cols].values.tolist()
    for g, w in zip(got.itertuples(), want.itertuples(), strict=True):
        for col in ("agreement_with_reference", "kappa_vs_reference"):
            gv, wv = getattr(g, col), getattr(w, col)
            if wv is None or (isinstance(wv, float) and math.isnan(wv)):
                assert math.isnan(gv) and g.note
            else:
                assert gv == pytest.approx(wv, abs=1e-12)


def test_no_labels_no_rows(engine: Engine, tax: Taxonomy) -> None:
    t = annotator_figures(engine, list(tax.decisions))
    assert t.empty and list(t.columns) == ANNOTATOR_COLUMNS
