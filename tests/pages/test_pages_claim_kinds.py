"""The Cases page's form gives a required claim its kind (issue 35, item 3): a line ending in
``[kind: KIND]``; an unknown kind is refused beside the form and nothing is saved."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine

from review.cases import cases
from tests.helpers.pages import INES, app, no_exception, readable

CLAIMS_LABEL = "Required claims (one per line: each atomic claim the answer must establish)"


def test_the_case_form_gives_a_claim_its_kind_and_refuses_an_unknown_one(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = cases.get_case(demo_engine, key="CASE-009")
    assert before is not None and len(before.required_claims) == 2
    first, second = before.required_claims
    at = app(demo_url, monkeypatch, INES, case=str(before.id)).run()
    at.switch_page("pages/cases_page.py").run()
    next(b for b in at.button if b.label == "Edit this case").click().run()
    box = next(t for t in at.text_area if t.label == CLAIMS_LABEL)
    assert box.value == f"{first}\n{second}"  # no kinds yet: the claims as they always read
    assert any("End a claim with [kind: KIND]" in readable(c) for c in at.caption)
    box.input(f"{first} [kind: forever]\n{second}")
    next(b for b in at.button if b.label == "Save changes").click().run()
    no_exception(at)
    assert any("claim_kinds.0: 'forever' is not one of" in readable(e) for e in at.error), [
        readable(e) for e in at.error
    ]
    unchanged = cases.get_case(demo_engine, key="CASE-009")
    assert unchanged is not None and unchanged.version == before.version
    box = next(t for t in at.text_area if t.label == CLAIMS_LABEL)
    box.input(f"{first}\n{second} [kind: current_price]")
    next(b for b in at.button if b.label == "Save changes").click().run()
    no_exception(at)
    saved = cases.get_case(demo_engine, key="CASE-009")
    assert saved is not None and saved.claim_kinds == (None, "current_price")
    assert saved.required_claims == before.required_claims
    assert any(t.value == f"2. {second}  · kind: Current price" for t in at.text), [
        t.value for t in at.text
    ]
