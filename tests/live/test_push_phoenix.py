"""Verdicts back to a REAL Phoenix (issue 31 item 3).

Real OpenInference RAG traces are sent to a running ``phoenix serve`` with the OpenTelemetry
SDK's OTLP exporter, imported into the workbench by its Phoenix sync, sampled into an audit
batch that two reviewers judge and close, and pushed: the span annotations Phoenix then
holds on each root span are compared with the verdicts. A second push adds nothing; a newer
verdict replaces the values it changes (and withdraws a stage it dropped); with Phoenix
stopped every annotation fails with its reason and nothing is marked pushed, and once
Phoenix is back the next push completes them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select

from review.audits import pushback
from review.audits.items import ClaimDraft
from review.audits.verdicts import VerdictIn
from review.core import clearance, database
from review.traces.live.push import build_annotations
from storage.db import make_engine, migrate, read_session
from storage.models import AuditVerdict, VerdictPush
from tests.helpers.actors import REVIEWER, make_actor
from tests.helpers.audits import add_trace
from tests.helpers.pushing import (
    CORRECT,
    UNSUPPORTED,
    closed_batch,
    import_from_phoenix,
    phoenix_annotations,
    root_span,
)
from tests.helpers.traces import add_document
from tests.live.phoenix_server import (
    PHOENIX_GROUP,
    SPANS_PER_TRACE,
    PhoenixServer,
    RagTrace,
    rag_traces,
    send_rag_traces,
    start_phoenix,
    wait_for_spans,
)

pytestmark = [pytest.mark.timeout(1800), PHOENIX_GROUP]

PROJECT = "push-back"
ADMIN = make_actor("admin", "admin@test.example", clearance=True, uid=31)
REVIEWER2 = make_actor("reviewer", "rev2@test.example", clearance=True, uid=32)
N_TRACES = 4


@pytest.fixture(scope="module")
def phoenix_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("phoenix-push")


@pytest.fixture(scope="module")
def phx(phoenix_dir: Path) -> Iterator[list[PhoenixServer]]:
    """The running Phoenix (a list, so a test can stop it and start it again)."""
    box = [start_phoenix(phoenix_dir)]
    yield box
    box[0].stop()


@pytest.fixture
def wb(tmp_path: Path) -> Iterator[Engine]:
    eng = make_engine(f"sqlite:///{tmp_path / 'wb.db'}")
    migrate(eng)
    yield eng
    eng.dispose()


def _expected(
    engine: Engine, pid: int, roots: dict[str, str]
) -> dict[tuple[str, str, str], dict[str, Any]]:
    """(span id, name, reviewer) -> the annotation the current verdicts should have put there,
    for the traces with these root spans."""
    facts = pushback.verdict_facts(engine, [pid])
    out = {}
    for f in facts:
        if f.trace_id not in roots:
            continue
        for a in build_annotations(f, roots[f.trace_id], pushback.VOCABULARY).annotations:
            out[(a.span_id, a.name, a.identifier)] = a.payload()
    return out


def _roots(engine: Engine, source: str = "phoenix-live") -> dict[str, str]:
    from storage.models import SourceSpan, TraceSource

    with read_session(engine) as s:
        return {
            str(t): str(sp)
            for t, sp in s.execute(
                select(SourceSpan.trace_id, SourceSpan.span_id)
                .join(TraceSource, TraceSource.id == SourceSpan.source_id)
                .where(SourceSpan.parent_id.is_(None), TraceSource.name == source)
            )
        }


def _held(server: PhoenixServer, spans: list[str]) -> dict[tuple[str, str, str], dict[str, Any]]:
    got = phoenix_annotations(server.base_url, PROJECT, spans)
    held = {(a["span_id"], a["name"], a["identifier"]): a for a in got}
    assert len(held) == len(got), "one annotation per span, name and reviewer"
    return held


def test_verdicts_reach_phoenix_once_change_and_survive_an_outage(
    phx: list[PhoenixServer], phoenix_dir: Path, wb: Engine
) -> None:
    server = phx[0]
    # real traces into Phoenix, and from Phoenix into the workbench with its sync
    sent = send_rag_traces(server.traces_url, rag_traces(N_TRACES, seed=7), project=PROJECT)
    wait_for_spans(server.base_url, PROJECT, N_TRACES * SPANS_PER_TRACE)
    # the documents the traces cite, open (a trace citing a document the corpus has never
    # seen is restricted, and a restricted trace's note never leaves: see the test below)
    _documents(wb, rag_traces(N_TRACES, seed=7), restricted=set())
    source_id = import_from_phoenix(wb, ADMIN, server.base_url, PROJECT, "phoenix-live")
    roots = _roots(wb)
    assert set(roots) == set(sent)
    # a trace imported from a file (no Phoenix span), and one whose root span Phoenix lacks
    add_trace(wb, "file-trace-1")
    add_trace(wb, "f" * 32)
    root_span(wb, source_id, "f" * 32, "0123456789abcdef")

    pid = closed_batch(wb, [REVIEWER, REVIEWER2], [UNSUPPORTED, CORRECT])
    expected = _expected(wb, pid, roots)
    # 2 reviewers x 4 traces: unsupported (1 + 2 stages + 2 claims) or correct refusal (1)
    assert len(expected) == 4 * (5 + 1)

    report = pushback.push_to_phoenix(wb, REVIEWER, plan_id=pid, batch_size=7)
    assert report.pushed == len(expected), report.summary()
    assert report.already == 0
    assert report.not_pushable == 1
    assert report.unpushable == (("imported from a file (no Phoenix span)", 1),)
    # the trace Phoenix does not have: its annotations fail alone, with the reason
    assert report.failed == 6
    [(reason, n)] = report.failures
    assert "span 0123456789abcdef is not in Phoenix project 'push-back'" in reason and n == 6

    spans = sorted(roots.values())
    held = _held(server, spans)
    assert set(held) == set(expected)
    for key, want in expected.items():
        got = held[key]
        assert got["annotator_kind"] == "HUMAN"
        assert got["result"]["label"] == want["result"]["label"]
        assert got["result"]["explanation"] == want["result"]["explanation"]
        assert got["metadata"] == want["metadata"]
        assert got["source"] == "API"
    verdicts = [a for k, a in held.items() if k[1] == "workbench.verdict"]
    assert {a["identifier"] for a in verdicts} == {REVIEWER.email, REVIEWER2.email}
    assert {a["result"]["label"] for a in verdicts} == {"unsupported_answer", "correct_refusal"}
    notes = {
        a["result"]["explanation"] for a in verdicts if a["result"]["label"] != "correct_refusal"
    }
    assert notes == {UNSUPPORTED.notes}  # the hostile-looking note, as typed

    # a second push writes nothing new (the failed ones are tried again)
    again = pushback.push_to_phoenix(wb, REVIEWER, plan_id=pid)
    assert (again.pushed, again.already, again.failed) == (0, len(expected), 6)
    assert len(phoenix_annotations(server.base_url, PROJECT, spans)) == len(expected)

    # a newer verdict (one stage dropped, the note changed) is sent as the new value
    item_id, verdict_row = _an_unsupported_verdict(wb, REVIEWER.email, roots)
    newer = _supersede(
        wb, verdict_row, stages=["retrieval_missed"], notes="Checked again: 14 days."
    )
    changed = pushback.push_to_phoenix(wb, REVIEWER, plan_id=pid)
    # verdict, the kept stage and both claims carry the new verdict id; the dropped stage is
    # withdrawn
    assert changed.pushed == 5 and changed.already == len(expected) - 5, changed.summary()
    held = _held(server, spans)
    assert len(held) == len(expected)
    span = _span_of(wb, item_id, roots)
    mine = {k[1]: a for k, a in held.items() if k[0] == span and k[2] == REVIEWER.email}
    assert mine["workbench.verdict"]["result"]["explanation"] == "Checked again: 14 days."
    assert mine["workbench.verdict"]["metadata"]["verdict_id"] == newer
    assert mine["workbench.stage.generator_ignored_signal"]["result"]["label"] == "withdrawn"
    assert mine["workbench.stage.retrieval_missed"]["result"]["label"] == "failed"

    # Phoenix stopped: every annotation of the next change fails with the reason; nothing is
    # marked pushed
    _supersede(wb, _verdict(wb, newer), stages=["retrieval_missed"], notes="Third look.")
    server.stop()
    down = pushback.push_to_phoenix(wb, REVIEWER, plan_id=pid, timeout=10)
    assert down.pushed == 0 and down.failed == 4 + 6
    assert any("unreachable" in why for why, _ in down.failures), down.failures
    with read_session(wb) as s:
        failed = s.scalars(select(VerdictPush).where(VerdictPush.error.is_not(None))).all()
        assert len(failed) == 10
        pending = [r for r in failed if r.item_id == item_id]
        assert all(r.pushed_digest is not None for r in pending)  # the old value stays recorded

    # restarted (on the same data; it listens on another port, the source follows it)
    phx[0] = start_phoenix(phoenix_dir)
    _point_source(wb, source_id, phx[0].base_url)
    back = pushback.push_to_phoenix(wb, REVIEWER, plan_id=pid)
    assert back.pushed == 4 and back.failed == 6, back.summary()
    held = _held(phx[0], spans)
    assert len(held) == len(expected)
    mine = {k[1]: a for k, a in held.items() if k[0] == span and k[2] == REVIEWER.email}
    assert mine["workbench.verdict"]["result"]["explanation"] == "Third look."
    # nothing new now (the withdrawn stage stays withdrawn, and is not counted again)
    final = pushback.push_to_phoenix(wb, REVIEWER, plan_id=pid)
    assert (final.pushed, final.already, final.failed) == (0, len(expected) - 1, 6)


SECRET = (
    "The Lisbon severance multiplier is four point two months per year of service, "
    "approved by the board in March."
)
#: quotes six words of a restricted document (not a whole sentence), in the note and a claim
LEAKY = VerdictIn(
    "unsupported_answer",
    stages=("retrieval_missed",),
    notes="It hinted that severance multiplier is four point two months: wrong document.",
    claims=(ClaimDraft("Approved by the board in March, it said.", ("c1",), "unsupported"),),
)


def _documents(engine: Engine, traces: list[RagTrace], restricted: set[str]) -> None:
    """Every document the traces cite into the corpus, those named in ``restricted`` restricted
    (each chunk's text is its document's body)."""
    for t in traces:
        for c in t.chunks:
            scope = "restricted" if c.doc_id in restricted else "public"
            add_document(engine, c.doc_id, version=c.doc_version, scope=scope, body=c.text)


def test_restricted_words_never_reach_phoenix(phx: list[PhoenixServer], wb: Engine) -> None:
    """What Phoenix holds after a push shares no run of five words with a restricted document:
    a note or claim quoting one, and anything written on a restricted trace, arrive as the
    clearance placeholder; the labels arrive; a plain note on an open trace arrives as typed."""
    server, project = phx[0], "push-leak"
    traces = rag_traces(4, seed=3, tag="L")
    sent = send_rag_traces(server.traces_url, traces, project=project)
    wait_for_spans(server.base_url, project, 4 * SPANS_PER_TRACE)
    cited = [t for t in traces if t.chunks]
    assert len(cited) >= 2, "the seed gives traces with documents"
    secret_docs = {c.doc_id for c in cited[0].chunks}
    _documents(wb, traces, restricted=secret_docs)
    add_document(wb, "HR-7", scope="restricted", title="Severance terms", body=SECRET)
    import_from_phoenix(wb, ADMIN, server.base_url, project, "phoenix-leak")
    restricted_trace = sent[traces.index(cited[0])]

    pid = closed_batch(wb, [REVIEWER, REVIEWER2], [LEAKY, UNSUPPORTED])
    report = pushback.push_to_phoenix(wb, REVIEWER, plan_id=pid)
    assert report.ok and report.pushed > 0, report.summary()

    roots = _roots(wb, "phoenix-leak")
    held = phoenix_annotations(server.base_url, project, sorted(roots.values()))
    with read_session(wb) as s:
        secret_runs = clearance.restricted_runs(s)
    assert clearance.word_runs(SECRET) <= secret_runs
    by_span = {sp: tid for tid, sp in roots.items()}
    notes: dict[tuple[str, str], str] = {}
    for a in held:
        shown = json.dumps([a["result"], a["metadata"]])
        assert not clearance.word_runs(shown) & secret_runs, a
        if a["name"] == "workbench.verdict":
            assert a["result"]["label"] == "unsupported_answer"
            notes[(by_span[a["span_id"]], a["identifier"])] = a["result"]["explanation"]
    assert len(notes) == 4 * 2
    for (tid, _), note in notes.items():
        if tid == restricted_trace:
            assert note == clearance.REDACTED  # restricted trace: even the plain note
        else:
            assert note in (clearance.REDACTED, UNSUPPORTED.notes)
    assert sorted(notes.values()).count(UNSUPPORTED.notes) == 3  # the open traces' plain notes


def _an_unsupported_verdict(
    engine: Engine, reviewer: str, roots: dict[str, str]
) -> tuple[int, AuditVerdict]:
    with read_session(engine) as s:
        from storage.models import AuditItem, Trace

        for v, tid in s.execute(
            select(AuditVerdict, Trace.trace_id)
            .join(AuditItem, AuditItem.id == AuditVerdict.item_id)
            .join(Trace, Trace.id == AuditItem.trace_pk)
            .where(AuditVerdict.reviewer == reviewer, AuditVerdict.verdict == "unsupported_answer")
            .order_by(AuditVerdict.id)
        ):
            if tid in roots:
                return v.item_id, v
    raise AssertionError("no unsupported verdict on a Phoenix trace")


def _verdict(engine: Engine, verdict_id: int) -> AuditVerdict:
    with read_session(engine) as s:
        row = s.get(AuditVerdict, verdict_id)
        assert row is not None
        return row


def _supersede(engine: Engine, old: AuditVerdict, **changes: Any) -> int:
    """A newer verdict of the same reviewer (the batch is closed, so written as a correction
    straight to the table); its id."""

    def work(s: Any) -> int:
        row = AuditVerdict(
            item_id=old.item_id,
            reviewer=old.reviewer,
            verdict=old.verdict,
            stages=changes.get("stages", old.stages),
            notes=changes.get("notes", old.notes),
            claims=old.claims,
            replaces_id=old.id,
        )
        s.add(row)
        s.flush()
        return int(row.id)

    return database.write(engine, work)


def _span_of(engine: Engine, item_id: int, roots: dict[str, str]) -> str:
    from storage.models import AuditItem, Trace

    with read_session(engine) as s:
        tid = s.scalar(
            select(Trace.trace_id)
            .join(AuditItem, AuditItem.trace_pk == Trace.id)
            .where(AuditItem.id == item_id)
        )
    return roots[str(tid)]


def _point_source(engine: Engine, source_id: int, url: str) -> None:
    from sqlalchemy import update

    from storage.models import TraceSource

    database.write(
        engine,
        lambda s: s.execute(update(TraceSource).where(TraceSource.id == source_id).values(url=url)),
    )
