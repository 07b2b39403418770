"""Run outputs that quote restricted content (issue 16, items 1 and 2): derived from the corpus
as it is now, and withheld from users without clearance."""

from __future__ import annotations

import pandas as pd
from sqlalchemy import Engine, select, update

from review.core.clearance import REDACTED
from review.core.taxonomy import Taxonomy
from review.evaluation import clearance, evalruns
from storage.db import read_session, write_session
from storage.models import Document
from tests.helpers.actors import make_actor

NO_CLEARANCE = make_actor("annotator")
CLEARED = make_actor("reviewer", clearance=True)


def _content(**kw: object) -> clearance.RestrictedContent:
    base: dict[str, object] = {
        "doc_keys": frozenset({"MEMO"}),
        "titles": ("pricing memo 2026",),
        "bodies": ("The committee approved a seven percent increase for every annual plan.",),
        "case_ids": frozenset({7}),
    }
    base.update(kw)
    return clearance.RestrictedContent(**base)  # type: ignore[arg-type]


def test_the_rule_case_citation_title_and_passage() -> None:
    c = _content()
    assert c.quotes(7, [], "nothing")  # its case quotes a restricted document
    assert c.quotes(1, ["MEMO@2"], "")  # cites a restricted document (any version)
    assert c.quotes(1, ["MEMO"], None)
    assert c.quotes(1, [], "See the Pricing Memo 2026 for details.")  # names its title
    assert c.quotes(
        1,
        [],
        "As decided, the committee approved a seven percent increase for every annual plan. OK?",
    )
    assert not c.quotes(1, [], "a seven percent increase")  # a phrase, not a sentence of it
    assert not c.quotes(1, ["FAQ@1"], "Refunds take 14 days.")
    assert not c.quotes(1, None, float("nan"))  # an output with no text


def _frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "case_id": [7, 1, 2],
            "cited_doc_ids": [[], ["MEMO@1"], ["FAQ@1"]],
            "text": ["a", "b", "Refunds take 14 days."],
            "perturbation": [{"body": "secret"}, {}, {"body": "public"}],
        }
    )


def test_restricted_mask_marks_each_row() -> None:
    assert clearance.restricted_mask(_content(), _frame()).tolist() == [True, True, False]
    empty = _frame().iloc[0:0]
    assert clearance.restricted_mask(_content(), empty).tolist() == []


def test_demo_outputs_quoting_restricted_documents_are_withheld_without_clearance(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    run = next(r for r in evalruns.list_runs(demo_engine) if r.name.startswith("naive"))
    frame = evalruns.outputs_frame(demo_engine, run.id, tax)
    hidden = clearance.for_viewer(demo_engine, NO_CLEARANCE, frame)
    shown = clearance.for_viewer(demo_engine, CLEARED, frame)
    restricted = hidden["restricted"]
    assert 0 < int(restricted.sum()) < len(frame)
    assert (hidden.loc[restricted, "text"] == REDACTED).all()
    assert hidden.loc[~restricted, "text"].equals(frame.loc[~restricted, "text"])
    assert shown["text"].equals(frame["text"])  # with clearance nothing is withheld
    assert shown["restricted"].equals(restricted)
    pricing = "pricing committee approved list price increases"
    assert not hidden["text"].fillna("").str.contains(pricing).any()
    assert frame["text"].fillna("").str.contains(pricing).any()


def test_perturbed_answers_of_restricted_cases_are_withheld(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    runs = evalruns.list_runs(demo_engine)
    frames = [evalruns.perturbed_frame(demo_engine, r.id, tax) for r in runs]
    frame = next(f for f in frames if not f.empty)
    hidden = clearance.for_viewer(demo_engine, NO_CLEARANCE, frame)
    restricted = hidden["restricted"]
    assert restricted.any()
    assert all(p == {"withheld": REDACTED} for p in hidden.loc[restricted, "perturbation"])
    assert (hidden.loc[restricted, "text"] == REDACTED).all()


def test_a_document_restricted_later_restricts_the_outputs_quoting_it(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    """Derived, never frozen: the outputs follow the corpus as it is now."""
    run = next(r for r in evalruns.list_runs(demo_engine) if r.name.startswith("naive"))
    frame = evalruns.outputs_frame(demo_engine, run.id, tax)
    before = clearance.for_viewer(demo_engine, NO_CLEARANCE, frame)["restricted"]
    cited = {str(d).split("@")[0] for ids in frame.loc[~before, "cited_doc_ids"] for d in ids or []}
    with read_session(demo_engine) as s:
        public = s.scalars(
            select(Document.doc_key).where(
                Document.doc_key.in_(sorted(cited)), Document.access_scope != "restricted"
            )
        ).first()
    assert public is not None
    with write_session(demo_engine) as s:
        s.execute(
            update(Document).where(Document.doc_key == public).values(access_scope="restricted")
        )
    after = clearance.for_viewer(demo_engine, NO_CLEARANCE, frame)
    newly = after["restricted"] & ~before
    assert newly.any()
    assert (after.loc[newly, "text"] == REDACTED).all()
    citing = frame["cited_doc_ids"].map(
        lambda ids: any(str(d).startswith(public) for d in ids or [])
    )
    assert after.loc[citing, "restricted"].all()


def test_fragments_worked_out_once_match_the_rule_text_by_text() -> None:
    """The clearance check reuses each passage's fragments for every output: it must say what
    restricted_text_in says of each text, with and without visible passages."""
    import random

    from review.builder.family_checks import (
        repeats_fragment,
        restricted_fragments,
        restricted_text_in,
    )

    bodies = [
        "# Pricing memo\nThe committee approved a seven percent increase for every annual plan. "
        "Renewals after March keep the old price until their term ends; ask finance first?",
        "Education: the applicant holds a doctorate in applied statistics from Lisbon.",
        "",
        "Short.",
    ]
    visible = ["Renewals after March keep the old price until their term ends"]
    words = [
        *[
            "the",
            "committee",
            "approved",
            "a",
            "seven",
            "percent",
            "increase",
            "for",
            "every",
            "annual",
            "plan",
        ],
        *["renewals", "after", "march", "keep", "old", "price", "until", "their", "term", "ends"],
        *[
            "education",
            "applicant",
            "holds",
            "doctorate",
            "in",
            "applied",
            "statistics",
            "from",
            "lisbon",
        ],
        *["*bold*", "_x_", ".", ";", ":", "?"],
    ]
    rng = random.Random(18)
    texts = [*bodies, *visible, "", "   ", "THE COMMITTEE approved a **seven** percent increase "
             "for every annual plan."]  # fmt: skip
    for _ in range(400):
        picked = rng.sample(bodies[:2], 1)[0]
        cut = rng.randrange(len(picked) + 1)
        texts.append(picked[:cut] + " " + " ".join(rng.choices(words, k=rng.randrange(12))))
    frags = restricted_fragments(bodies)
    assert len(frags) == len(set(frags))
    hits = 0
    for text in texts:
        for allowed in ((), visible):
            expected = restricted_text_in(text, bodies, allowed)
            assert repeats_fragment(text, frags, allowed) == expected, (text, allowed)
            hits += expected
    assert 50 < hits < 2 * len(texts) - 50  # both answers are exercised
    content = _content(bodies=tuple(bodies))
    assert [content.quotes(1, [], t) for t in texts] == [
        restricted_text_in(t, bodies) or any(x in t.lower() for x in content.titles) for t in texts
    ]
