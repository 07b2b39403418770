"""AppTest of the audit claim editor's draft kept in the database (issue 33 item 3): claims
edited in one session (one server) are there when the trace opens in another session of the
same reviewer; saving the verdict clears the draft."""

from __future__ import annotations

import pytest
from sqlalchemy import select
from streamlit.testing.v1 import AppTest

from review.admin import users
from review.audits import plans
from review.audits.plans import PlanSpec
from review.audits.population import PopulationFilter
from review.core import userdrafts
from review.core.taxonomy import Taxonomy
from review.demo import batches
from storage.db import make_engine, read_session
from storage.models import AuditItem, AuditVerdict
from tests.helpers.actors import REVIEWER
from tests.helpers.audits import CONTRACT, PLANS, REFUND, add_trace, realistic_traces
from tests.helpers.pages import no_exception, page_app
from tests.helpers.transact import write

RAVI = "ravi.menon@brightwave.example"
PAGE = "pages/audit_page.py"
EDITED = "The Team plan has exactly 20 seats."


@pytest.fixture
def item_url(demo_url: str, tax: Taxonomy) -> tuple[str, int]:
    """The demo audits and a plan holding one answer trace cut into three claims."""
    eng = make_engine(demo_url)
    realistic_traces(eng)
    batches.build_demo_audits(eng, tax)
    add_trace(
        eng,
        "drafts-1",
        answer_text=(
            f"Monthly charges can be refunded within 14 days [{REFUND['chunk_id']}]. "
            "The Team plan has 20 seats. Enterprise gets a credit for unused months."
        ),
        citations=[
            {"claim": "The Team plan includes 20 seats.", "chunk_ids": [PLANS["chunk_id"]]},
            {"claim": "Enterprise credit", "chunk_ids": [CONTRACT["chunk_id"]]},
        ],
        chunks=[REFUND, PLANS, CONTRACT],
        feedback="answer_wrong",
        customer_tier="drafts-test",
    )
    pid = write(
        eng,
        plans.create_plan,
        REVIEWER,
        PlanSpec(name="drafts", filter=PopulationFilter(customer_tiers=("drafts-test",)), total=1),
    )
    write(eng, plans.draw_plan, REVIEWER, pid)
    with read_session(eng) as s:
        item = s.scalar(select(AuditItem.id).where(AuditItem.plan_id == pid))
    eng.dispose()
    assert item is not None
    return demo_url, int(item)


def session(url: str, monkeypatch: pytest.MonkeyPatch, item: int) -> AppTest:
    at = page_app(url, monkeypatch, PAGE, RAVI, item=str(item)).run()
    no_exception(at)
    return at


def claim_texts(at: AppTest, item: int) -> list[str]:
    return [str(t.value) for t in at.text_area if t.key and t.key.startswith(f"aud_ct_{item}_")]


def test_edited_claims_follow_the_reviewer_to_another_server_until_the_verdict_is_saved(
    item_url: tuple[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, item = item_url
    eng = make_engine(url)
    row = users.get_by_email(eng, RAVI)
    assert row is not None
    ravi = users.to_actor(row)
    key = f"audit.claims.{item}"
    first = session(url, monkeypatch, item)
    assert claim_texts(first, item)[1] == "The Team plan has 20 seats."
    assert userdrafts.load_draft(eng, ravi, key) is None  # nothing edited, nothing kept
    texts = [t for t in first.text_area if t.key and t.key.startswith(f"aud_ct_{item}_")]
    texts[1].input(EDITED).run()
    no_exception(first)
    saved = userdrafts.load_draft(eng, ravi, key)
    assert saved is not None and saved.payload["rows"][1]["text"] == EDITED
    # the server went down: the trace opens in a new session on another one
    second = session(url, monkeypatch, item)
    assert claim_texts(second, item)[1] == EDITED
    # saving the verdict ends the draft
    verdicts = [s for s in second.selectbox if s.key and s.key.startswith(f"aud_cv_{item}_")]
    for sb, v in zip(verdicts, ["supported", "supported", "unsupported"], strict=True):
        sb.set_value(v)
    second.radio(key=f"aud_verdict_{item}").set_value("partially_supported")
    second.pills(key=f"aud_stages_{item}").set_value(["generator_ignored_signal"])
    second.button(key=f"aud_save_{item}").click().run()
    no_exception(second)
    assert not second.error
    with read_session(eng) as s:
        verdict = s.scalar(select(AuditVerdict).where(AuditVerdict.item_id == item))
    assert verdict is not None and [c["text"] for c in verdict.claims][1] == EDITED
    assert userdrafts.load_draft(eng, ravi, key) is None
    second.run()  # the next run keeps no draft of the saved claims
    no_exception(second)
    assert userdrafts.load_draft(eng, ravi, key) is None
    third = session(url, monkeypatch, item)
    assert claim_texts(third, item)[1] == EDITED  # the saved verdict's claims
    assert userdrafts.load_draft(eng, ravi, key) is None
    eng.dispose()
