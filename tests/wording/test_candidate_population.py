"""The production check's candidates (refusal, follow-up, escalation, partial and caveat texts)
counted from the population groups less the refusals without a text (issue 33) equal a count
of the traces by the check's own condition, whatever the decisions, reason codes, texts and
restricted flags, and after deletes and edits of each (both engines, real servers)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, case, delete, func, select, update

from review.wording import production
from storage.db import read_session, run_write
from storage.models import Trace
from tests.helpers.audits import add_trace

DECISIONS = ["answer", "abstain", "clarify", "escalate", "partial", None]
REASONS = [None, "false_premise", "support_below_threshold", ""]
traces_st = st.lists(
    st.tuples(
        st.sampled_from(DECISIONS),
        st.sampled_from(REASONS),
        st.sampled_from(["", "I can't answer that.", " "]),
        st.booleans(),
    ),
    min_size=0,
    max_size=10,
)
edits_st = st.lists(
    st.tuples(
        st.integers(0, 9),
        st.sampled_from(["delete", "restrict", "empty", "decide", "reason"]),
        st.sampled_from(DECISIONS),
    ),
    max_size=4,
)


def reference(engine: Engine) -> tuple[int, int, int]:
    """Counted from the traces by the condition itself (a read of every trace)."""
    hidden = case((Trace.restricted.is_(True), 1), else_=0)
    with read_session(engine) as s:
        row = s.execute(
            select(
                func.count(Trace.id),
                func.coalesce(func.sum(hidden), 0),
                func.coalesce(func.max(Trace.id), 0),
            ).where(production.candidates_condition())
        ).one()
    return int(row[0]), int(row[1]), int(row[2])


def edit(engine: Engine, pk: int, what: str, decision: str | None) -> None:
    def work(s: Any) -> None:
        if what == "delete":
            s.execute(delete(Trace).where(Trace.id == pk))
            return
        changes: dict[str, dict[str, Any]] = {
            "restrict": {"restricted": True},
            "empty": {"answer_text": ""},
            "decide": {"decision": decision},
            "reason": {"reason_code": "false_premise" if decision else "caveat"},
        }
        s.execute(update(Trace).where(Trace.id == pk).values(**changes[what]))

    run_write(engine, work)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(traces=traces_st, edits=edits_st)
def test_candidates_equal_a_count_of_the_traces(
    any_engine: Engine, traces: list[tuple[Any, ...]], edits: list[tuple[Any, ...]]
) -> None:
    run_write(any_engine, lambda s: s.execute(delete(Trace)))
    pks = [
        add_trace(
            any_engine,
            f"t{i}",
            decision=decision,
            reason_code=reason,
            answer_text=text,
            restricted=restricted,
        )
        for i, (decision, reason, text, restricted) in enumerate(traces)
    ]
    assert production.candidate_population(any_engine) == reference(any_engine)
    for index, what, decision in edits:
        if pks:
            edit(any_engine, pks[index % len(pks)], what, decision)
            assert production.candidate_population(any_engine) == reference(any_engine)
