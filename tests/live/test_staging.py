"""Spans held until their trace is complete, then imported through the OTLP mapping and the
trace importer: order, grace period, duplicates, late and rootless spans, refused traces and a
crash between import and marking, on both databases."""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, select, update

from review.core.errors import InputError, PermissionDenied
from review.core.identity import Actor
from review.traces.live import sources, staging
from storage.db import read_session, run_write
from storage.models import AuditLog, SourceSpan, Trace, TraceChunk, utcnow
from tests.live.spanmaker import T0, rag_trace, span

LATER = dt.timedelta(hours=1)


def _source(engine: Engine, admin: Actor, grace: float = 30) -> int:
    return sources.add_source(engine, admin, kind="otlp", name="receiver", grace_seconds=grace).id


def _states(engine: Engine) -> dict[str, int]:
    with read_session(engine) as s:
        out: dict[str, int] = {}
        for (state,) in s.execute(select(SourceSpan.state)):
            out[state] = out.get(state, 0) + 1
        return out


def test_a_trace_waits_for_its_root_and_the_grace_period_then_imports_once(
    any_engine: Engine, admin: Actor
) -> None:
    sid = _source(any_engine, admin, grace=30)
    ret, llm, root = rag_trace(7)
    assert staging.stage(any_engine, sid, [ret, llm]).added == 2
    # no root yet: nothing is ready, however long we wait (until the hold limit)
    res = staging.assemble(any_engine, admin, sid, now=utcnow() + dt.timedelta(minutes=5))
    assert (res.imported, res.waiting_spans) == (0, 2)
    assert staging.stage(any_engine, sid, [root]).added == 1
    # the root arrived, the grace period has not passed: still waiting
    assert staging.assemble(any_engine, admin, sid).imported == 0
    res = staging.assemble(any_engine, admin, sid, now=utcnow() + LATER)
    assert (res.imported, res.rejected, res.waiting_spans) == (1, 0, 0)
    with read_session(any_engine) as s:
        tr = s.scalars(select(Trace)).one()
        chunks = s.scalars(select(TraceChunk).order_by(TraceChunk.rank)).all()
    assert tr.trace_id == f"{7:032x}"
    assert tr.query == "Can I get a refund, question 7?"
    assert tr.rewritten_query == "refund window"
    assert (tr.decision, tr.top_score, tr.answer_text) == ("answer", 0.83, "answer 7")
    assert tr.at == T0
    assert [(c.chunk_id, c.doc_id, c.doc_version, c.score) for c in chunks] == [
        ("POL-REFUND-MONTHLY@2#2.1", "POL-REFUND-MONTHLY", 2, 0.83),
        ("FAQ-1@1#1", "FAQ-1", 1, 0.41),
    ]
    assert _states(any_engine) == {"imported": 3}
    src = sources.get_source(any_engine, sid)
    assert (src.traces_added, src.spans_read, src.spans_waiting) == (1, 3, 0)

    # the same spans again (an exporter's retry, an overlapping re-read): nothing new
    again = staging.stage(any_engine, sid, [ret, llm, root])
    assert (again.added, again.duplicates, again.late) == (0, 3, 0)
    # a new child span of the imported trace is late: counted, not imported
    extra = span(f"{7:032x}", "00000000000000ff", root.span_id, {"openinference.span.kind": "TOOL"})
    late = staging.stage(any_engine, sid, [extra])
    assert (late.added, late.late) == (0, 1)
    assert staging.assemble(any_engine, admin, sid, now=utcnow() + LATER).imported == 0
    assert sources.get_source(any_engine, sid).late_spans == 1
    with read_session(any_engine) as s:
        assert s.scalar(select(Trace.id).where(Trace.trace_id == f"{7:032x}")) is not None
        assert len(s.scalars(select(Trace)).all()) == 1


def test_a_span_twice_in_one_batch_is_stored_once(engine: Engine, admin: Actor) -> None:
    sid = _source(engine, admin)
    spans = rag_trace(1)
    res = staging.stage(engine, sid, spans + spans[:2])
    assert (res.added, res.duplicates) == (3, 2)


def test_a_rootless_trace_is_refused_after_the_hold_period_with_its_reason(
    engine: Engine, admin: Actor
) -> None:
    sid = _source(engine, admin)
    ret, llm, _root = rag_trace(3)
    staging.stage(engine, sid, [ret, llm])
    res = staging.assemble(engine, admin, sid, now=utcnow() + dt.timedelta(minutes=30))
    assert (res.rejected, res.waiting_spans) == (0, 2)
    res = staging.assemble(engine, admin, sid, now=utcnow() + dt.timedelta(hours=2))
    assert res.rejected == 1
    assert "no root span arrived within 1 hour" in res.reasons[f"{3:032x}"]
    assert _states(engine) == {"rejected": 2}
    assert sources.get_source(engine, sid).traces_rejected == 1
    # the root arriving after that is late: the trace was refused
    assert staging.stage(engine, sid, [_root]).late == 1


def test_a_trace_the_mapping_refuses_is_rejected_with_the_field_and_the_rest_imports(
    any_engine: Engine, admin: Actor
) -> None:
    sid = _source(any_engine, admin)
    good = rag_trace(1)
    bad = rag_trace(2)
    # a typo in the rag namespace: the file importer refuses it, so does the live path
    typo = span(
        bad[2].trace_id, bad[2].span_id, None, {"input.value": "q", "rag.decison": "answer"}
    )
    staging.stage(any_engine, sid, good + bad[:2] + [typo])
    res = staging.assemble(any_engine, admin, sid, now=utcnow() + LATER)
    assert (res.imported, res.rejected) == (1, 1)
    why = res.reasons[f"{2:032x}"]
    assert "rag.decison" in why and "unknown key in the rag namespace" in why
    with read_session(any_engine) as s:
        reasons = set(
            s.scalars(select(SourceSpan.reason).where(SourceSpan.trace_id == f"{2:032x}"))
        )
        assert len(reasons) == 1 and "rag.decison" in str(next(iter(reasons)))
        assert s.scalars(select(Trace.trace_id)).all() == [f"{1:032x}"]


def test_a_crash_between_import_and_marking_is_completed_without_a_duplicate(
    engine: Engine, admin: Actor
) -> None:
    sid = _source(engine, admin)
    staging.stage(engine, sid, rag_trace(5))
    assert staging.assemble(engine, admin, sid, now=utcnow() + LATER).imported == 1

    def unmark(s: object) -> None:  # the marking transaction never happened
        s.execute(update(SourceSpan).values(state="waiting"))  # type: ignore[attr-defined]

    run_write(engine, unmark)
    # the entries are gone once imported; the spans' rows are enough to know it is stored
    res = staging.assemble(engine, admin, sid, now=utcnow() + LATER)
    assert res.imported == 0
    assert _states(engine) == {"imported": 3}
    with read_session(engine) as s:
        assert len(s.scalars(select(Trace)).all()) == 1


def test_imports_are_recorded_in_the_audit_log_as_runs(engine: Engine, admin: Actor) -> None:
    sid = _source(engine, admin)
    staging.stage(engine, sid, rag_trace(1) + rag_trace(2))
    staging.assemble(engine, admin, sid, now=utcnow() + LATER)
    with read_session(engine) as s:
        actions = s.scalars(select(AuditLog.action).where(AuditLog.entity == "trace_import")).all()
    assert "start" in actions and "import" in actions


def test_redaction_applies_to_live_spans(engine: Engine, admin: Actor) -> None:
    sid = _source(engine, admin)
    ret, llm, root = rag_trace(9)
    attrs = root.entry["scopeSpans"][0]["spans"][0]["attributes"]
    for a in attrs:
        if a["key"] == "input.value":
            a["value"] = {"stringValue": "Refund for jane.doe@example.com please"}
    staging.stage(engine, sid, [ret, llm, root])
    staging.assemble(engine, admin, sid, now=utcnow() + LATER)
    with read_session(engine) as s:
        q = s.scalar(select(Trace.query))
    assert q is not None and "jane.doe@example.com" not in q


def test_staging_refuses_malformed_spans_and_writes_nothing(engine: Engine, admin: Actor) -> None:
    sid = _source(engine, admin)
    good = rag_trace(1)
    bad = dataclasses.replace(good[0], trace_id="XYZ")
    with pytest.raises(InputError, match="span 2: trace id"):
        staging.stage(engine, sid, [good[1], bad])
    assert _states(engine) == {}
    with pytest.raises(InputError, match="does not exist"):
        staging.stage(engine, 999, good)


@settings(max_examples=60, deadline=None)
@given(
    field=st.sampled_from(["trace_id", "span_id", "parent_id", "start", "entry"]),
    junk=st.one_of(
        st.text(max_size=40),
        st.just(""),
        st.just("0" * 32),
        st.just("A" * 16),
    ),
)
def test_a_corrupted_span_field_is_refused_before_anything_is_stored(field: str, junk: str) -> None:
    sp = rag_trace(1)[0]
    if field == "start":
        bad = dataclasses.replace(sp, start=dt.datetime(2026, 1, 1))
    elif field == "entry":
        bad = dataclasses.replace(sp, entry={"spans": junk})
    else:
        ok_len = 32 if field == "trace_id" else 16
        if len(junk) == ok_len and all(c in "0123456789abcdef" for c in junk):
            return  # a valid id is not corrupt
        changes: dict[str, Any] = {field: junk}
        bad = dataclasses.replace(sp, **changes)
    with pytest.raises(InputError):
        staging.check_span(bad, 0)


# --- sources ----------------------------------------------------------------------------


def test_sources_are_added_checked_paused_and_removed(engine: Engine, admin: Actor) -> None:
    src = sources.add_source(
        engine,
        admin,
        kind="phoenix",
        name="prod phoenix",
        url="http://127.0.0.1:6006/",
        project="rag-prod",
        secret_name="PHOENIX_API_KEY",
    )
    assert (src.url, src.status, src.spans_waiting) == ("http://127.0.0.1:6006", "active", 0)
    with pytest.raises(InputError, match="exists already"):
        sources.add_source(engine, admin, kind="otlp", name="prod  phoenix")
    with pytest.raises(InputError, match="reads this phoenix URL and project already"):
        sources.add_source(
            engine, admin, kind="phoenix", name="b", url="http://127.0.0.1:6006", project="rag-prod"
        )
    with pytest.raises(InputError, match="no user name or password"):
        sources.add_source(
            engine, admin, kind="phoenix", name="c", url="http://u:p@h:1", project="x"
        )
    with pytest.raises(InputError, match="not the secret itself"):
        sources.add_source(engine, admin, kind="otlp", name="d", secret_name="sk live 123")
    with pytest.raises(InputError, match="needs its project"):
        sources.add_source(engine, admin, kind="phoenix", name="e", url="http://h:1")
    again = sources.ensure_source(
        engine, admin, kind="phoenix", url="http://127.0.0.1:6006", project="rag-prod"
    )
    assert again.id == src.id and again.secret_name == "PHOENIX_API_KEY"  # none named: kept
    renamed = sources.ensure_source(
        engine,
        admin,
        kind="phoenix",
        url="http://127.0.0.1:6006",
        project="rag-prod",
        secret_name="PHOENIX_KEY_2026",
    )
    assert (renamed.id, renamed.secret_name) == (src.id, "PHOENIX_KEY_2026")  # the newest named
    with pytest.raises(InputError, match="not the secret itself"):
        sources.ensure_source(
            engine,
            admin,
            kind="phoenix",
            url="http://127.0.0.1:6006",
            project="rag-prod",
            secret_name="sk live 123",
        )
    assert sources.set_status(engine, admin, src.id, "paused").status == "paused"
    staging.stage(engine, src.id, rag_trace(1)[:2])
    assert sources.remove_source(engine, admin, src.id) == 2
    assert sources.list_sources(engine) == []


def test_only_admins_manage_sources(engine: Engine, annotator: Actor) -> None:
    with pytest.raises(PermissionDenied):
        sources.add_source(engine, annotator, kind="otlp", name="x")


def test_a_secret_comes_from_the_environment_or_secrets_toml_never_the_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    toml = tmp_path / "secrets.toml"
    toml.write_text('PHX_KEY = "from-toml"\n', encoding="utf-8")
    monkeypatch.delenv("PHX_KEY", raising=False)
    assert sources.secret_value("PHX_KEY", (toml,)) == "from-toml"
    monkeypatch.setenv("PHX_KEY", "from-env")
    assert sources.secret_value("PHX_KEY", (toml,)) == "from-env"
    assert sources.secret_value(None, (toml,)) is None
    with pytest.raises(InputError, match="set the environment variable MISSING"):
        sources.secret_value("MISSING", (toml,))


def test_a_purge_deletes_the_spans_of_the_traces_it_deletes(engine: Engine, admin: Actor) -> None:
    from review.traces import retention

    sid = _source(engine, admin)
    old = rag_trace(1, start=T0)
    staging.stage(engine, sid, old)
    staging.assemble(engine, admin, sid, now=utcnow() + LATER)
    staging.stage(engine, sid, rag_trace(2)[:2])  # waiting, no root
    report = retention.purge_older_than(engine, admin, 1, now=T0 + dt.timedelta(days=3))
    assert report.deleted == 1
    with read_session(engine) as s:
        left = s.execute(select(SourceSpan.trace_id, SourceSpan.state)).all()
    assert sorted(left) == [(f"{2:032x}", "waiting")] * 2


def test_a_span_the_source_could_not_read_refuses_its_trace_with_the_reason(
    any_engine: Engine, admin: Actor
) -> None:
    sid = _source(any_engine, admin)
    ret, llm, root = rag_trace(4)
    unread = dataclasses.replace(
        llm, entry={}, refused="span 0000000000040003: attribute x: item 0 is an array"
    )
    staging.stage(any_engine, sid, [ret, unread, root, *rag_trace(5)])
    res = staging.assemble(any_engine, admin, sid, now=utcnow() + LATER)
    assert (res.imported, res.rejected) == (1, 1)
    assert "attribute x: item 0 is an array" in res.reasons[f"{4:032x}"]
    with read_session(any_engine) as s:
        assert s.scalars(select(Trace.trace_id)).all() == [f"{5:032x}"]
        states = set(s.scalars(select(SourceSpan.state).where(SourceSpan.trace_id == f"{4:032x}")))
    assert states == {"rejected"}
    with pytest.raises(InputError, match="needs its reason"):
        staging.stage(any_engine, sid, [dataclasses.replace(unread, refused=" ")])


def test_spans_waiting_before_the_entry_became_text_import_after_the_upgrade(
    any_url: str, admin: Actor
) -> None:
    """Migration 0030 keeps a waiting span's entry (stored as JSON before) as its JSON text,
    so the trace it belongs to imports whole after the upgrade."""
    from alembic import command
    from sqlalchemy import JSON, Column, Integer, MetaData, String, Table, insert

    from storage.db import alembic_config, make_engine, migrate
    from storage.models import UTCDateTime

    eng = make_engine(any_url)
    command.upgrade(alembic_config(eng), "0029")
    before = Table(  # source_spans as revision 0029 has it
        "source_spans",
        MetaData(),
        Column("id", Integer, primary_key=True),
        Column("source_id", Integer),
        Column("trace_id", String),
        Column("span_id", String),
        Column("parent_id", String),
        Column("start_at", UTCDateTime(timezone=True)),
        Column("received_at", UTCDateTime(timezone=True)),
        Column("state", String),
        Column("entry", JSON),
    )
    sid = _source(eng, admin)
    spans = rag_trace(41)
    with eng.begin() as c:
        for sp in spans:
            c.execute(
                insert(before).values(
                    source_id=sid,
                    trace_id=sp.trace_id,
                    span_id=sp.span_id,
                    parent_id=sp.parent_id,
                    start_at=sp.start,
                    received_at=utcnow() - LATER,
                    state="waiting",
                    entry=sp.entry,
                )
            )
    migrate(eng)
    res = staging.assemble(eng, admin, sid)
    assert (res.imported, res.rejected, res.waiting_spans) == (1, 0, 0)
    with read_session(eng) as s:
        assert s.scalar(select(Trace.trace_id)) == spans[0].trace_id
        assert s.scalar(select(TraceChunk.id).limit(1)) is not None  # its documents came too
    eng.dispose()
