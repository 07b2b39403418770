"""What identifies a staged span, attacked (issue 31 item 5: nothing lost, nothing taken
twice). OTLP asks a span id to be unique within its trace only, so a span is its trace id and
span id; a span sent again must say the same, or the trace it claims to belong to cannot be
trusted and is refused with the span named (the rest of the batch and the source go on)."""

from __future__ import annotations

import dataclasses

from sqlalchemy import Engine, select

from review.core.identity import Actor
from review.traces.live import sources, staging
from storage.db import read_session
from storage.models import SourceSpan, Trace
from tests.live.spanmaker import rag_trace


def _source(engine: Engine, admin: Actor) -> int:
    return sources.add_source(engine, admin, kind="otlp", name="ids", grace_seconds=0).id


def _with_ids(spans: list[staging.StagedSpan], n: int) -> list[staging.StagedSpan]:
    """Trace ``n``'s spans given the span ids trace 1 has (an SDK numbering spans per trace)."""
    out = []
    for k, sp in enumerate(spans, start=1):
        new_id = f"{1:012x}{k:04x}"
        parent = None if sp.parent_id is None else f"{1:012x}0001"
        entry = dict(sp.entry)
        body = dict(entry["scopeSpans"][0]["spans"][0])
        body["spanId"] = new_id
        if parent is not None:
            body["parentSpanId"] = parent
        entry["scopeSpans"] = [{**entry["scopeSpans"][0], "spans": [body]}]
        out.append(dataclasses.replace(sp, span_id=new_id, parent_id=parent, entry=entry))
    return out


def test_two_traces_whose_span_ids_repeat_both_import_whole(engine: Engine, admin: Actor) -> None:
    sid = _source(engine, admin)
    one = rag_trace(1)
    two = _with_ids(rag_trace(2), 2)
    # the ids are as trace 1's: (ret, llm, root) order kept, ids 0001 root, 0002, 0003
    assert {s.span_id for s in two} <= {f"{1:012x}{k:04x}" for k in (1, 2, 3)}
    staging.stage(engine, sid, one)
    res = staging.stage(engine, sid, two)
    assert res.duplicates == 0, res
    done = staging.assemble(engine, admin, sid, grace_seconds=0)
    with read_session(engine) as s:
        got = set(s.scalars(select(Trace.trace_id)))
    assert got == {f"{1:032x}", f"{2:032x}"}, done


def test_a_span_sent_again_saying_otherwise_refuses_its_trace_by_name(
    engine: Engine, admin: Actor
) -> None:
    sid = _source(engine, admin)
    first = rag_trace(3)
    other = rag_trace(6)
    staging.stage(engine, sid, first)
    ret, llm, root = first
    changed = dataclasses.replace(llm, entry=rag_trace(4)[1].entry)
    res = staging.stage(engine, sid, [ret, changed, root, *other])
    assert (res.duplicates, res.added) == (3, 3)
    # the same span sent again unchanged is a plain duplicate
    assert staging.stage(engine, sid, [ret]).duplicates == 1
    done = staging.assemble(engine, admin, sid, grace_seconds=0)
    assert (done.imported, done.rejected) == (1, 1)
    assert done.reasons == {
        ret.trace_id: f"span {llm.span_id} was sent twice with different content "
        "(which one is the trace's?)"
    }
    with read_session(engine) as s:
        assert set(s.scalars(select(Trace.trace_id))) == {other[0].trace_id}


def test_one_batch_with_a_span_twice_saying_otherwise_refuses_that_trace_alone(
    engine: Engine, admin: Actor
) -> None:
    sid = _source(engine, admin)
    ret, llm, root = rag_trace(5)
    other = dataclasses.replace(llm, entry=ret.entry)
    fine = rag_trace(7)
    res = staging.stage(engine, sid, [ret, llm, other, root, *fine])
    assert (res.duplicates, res.added) == (1, 6)
    done = staging.assemble(engine, admin, sid, grace_seconds=0)
    assert (done.imported, done.rejected) == (1, 1)
    assert llm.span_id in done.reasons[ret.trace_id]
    with read_session(engine) as s:
        assert set(s.scalars(select(Trace.trace_id))) == {fine[0].trace_id}
        # a refused trace's spans keep no payload
        assert s.scalar(select(SourceSpan.entry).where(SourceSpan.trace_id == ret.trace_id)) is None
