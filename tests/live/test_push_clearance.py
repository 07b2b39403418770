"""Restricted content never leaves for Phoenix (issue 31 item 3, the house rule on clearance):
which verdicts the audit side marks restricted (``review.audits.pushback.verdict_facts``: the
trace is restricted, or a note or claim retells a restricted document), read from the corpus
as it is now, and that nothing pushed for them shares a run of five words with a restricted
document. The same pushed to a real Phoenix and read back is in test_push_phoenix.py."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Engine

from review.audits import pushback
from review.audits.items import ClaimDraft
from review.audits.verdicts import VerdictIn
from review.core import clearance
from review.traces.live.push import build_annotations
from tests.helpers.actors import REVIEWER, make_actor
from tests.helpers.audits import REFUND, add_trace
from tests.helpers.pushing import closed_batch, item_traces
from tests.helpers.traces import add_document

SECRET = (
    "The Lisbon severance multiplier is four point two months per year of service, "
    "approved by the board in March."
)
OPEN, RESTRICTED = "1" * 32, "2" * 32

#: quotes six words of the restricted document, not a whole sentence of it
LEAKY = VerdictIn(
    "unsupported_answer",
    stages=("retrieval_missed",),
    notes="The answer hinted that severance multiplier is four point two months; wrong doc.",
    claims=(ClaimDraft("Approved by the board in March, it said.", ("c1",), "unsupported"),),
)
PLAIN = VerdictIn(
    "unsupported_answer",
    stages=("retrieval_missed",),
    notes="Monthly plans have 14 days, not 30.",
    claims=(ClaimDraft("Refunds are possible within 30 days.", ("c1",), "unsupported"),),
)


def _corpus(engine: Engine) -> None:
    add_document(engine, "POL-REFUND-MONTHLY", version=2, body=REFUND["text"])
    add_document(engine, "HR-7", scope="restricted", title="Severance terms", body=SECRET)


def _payloads(engine: Engine, pid: int) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """(trace id, verdict notes) -> the annotation payloads a push would send."""
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for f in pushback.verdict_facts(engine, [pid]):
        built = build_annotations(f, "a1b2c3d4e5f60718", pushback.VOCABULARY)
        assert built.problems == ()
        out[(f.trace_id, f.notes)] = [a.payload() for a in built.annotations]
    return out


def test_a_note_quoting_a_restricted_document_or_on_a_restricted_trace_is_withheld(
    engine: Engine,
) -> None:
    _corpus(engine)
    add_trace(engine, OPEN, chunks=[{**REFUND, "chunk_id": "c1"}])
    add_trace(engine, RESTRICTED, chunks=[{**REFUND, "chunk_id": "c1"}], restricted=True)
    # two reviewers, so each trace gets both the leaky and the plain verdict
    other = make_actor("reviewer", "rev2@test.example", clearance=True, uid=77)
    pid = closed_batch(engine, [REVIEWER, other], [LEAKY, PLAIN])
    assert set(item_traces(engine, pid).values()) == {OPEN, RESTRICTED}
    facts = pushback.verdict_facts(engine, [pid])
    decided = {(f.trace_id, f.notes): f.restricted for f in facts}
    assert decided == {
        (OPEN, LEAKY.notes): True,  # retells the restricted document
        (OPEN, PLAIN.notes): False,  # nothing restricted about it: sent as typed
        (RESTRICTED, LEAKY.notes): True,
        (RESTRICTED, PLAIN.notes): True,  # the trace is restricted content
    }
    secret_runs = clearance.word_runs(SECRET)
    for (tid, notes), payloads in _payloads(engine, pid).items():
        sent = json.dumps(payloads)
        assert not clearance.word_runs(sent) & secret_runs, (tid, notes)
        verdict = payloads[0]["result"]
        assert verdict["label"] == "unsupported_answer"
        if decided[(tid, notes)]:
            assert verdict["explanation"] == clearance.REDACTED
            assert "c1" not in sent  # no cited chunk of a restricted verdict either
        else:
            assert verdict["explanation"] == notes


def test_a_document_restricted_after_the_verdict_restricts_the_note_from_then_on(
    engine: Engine,
) -> None:
    add_document(engine, "POL-REFUND-MONTHLY", version=2, body=REFUND["text"])
    add_trace(engine, OPEN, chunks=[{**REFUND, "chunk_id": "c1"}])
    pid = closed_batch(engine, [REVIEWER], [LEAKY])
    [before] = pushback.verdict_facts(engine, [pid])
    assert not before.restricted  # no restricted document says those words yet
    add_document(engine, "HR-7", scope="restricted", body=SECRET)
    [after] = pushback.verdict_facts(engine, [pid])
    assert after.restricted
