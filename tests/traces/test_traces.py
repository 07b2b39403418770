"""Production traces service: imports (every format, malformed input, idempotency, batches,
a killed import), redaction, the restricted rule, access, filters, retention, demo data, CLI."""

from __future__ import annotations

import datetime as dt
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import Engine, delete, event, func, select

from review.core.clearance import REDACTED
from review.core.errors import InputError, PermissionDenied, StaleWriteError
from review.core.identity import SYSTEM, Actor
from review.core.taxonomy import Taxonomy
from review.traces import browse, importcheck, importer, retention
from review.traces import facets as trace_facets
from review.traces import rollup as trace_rollup
from review.traces.formats import iter_traces
from review.traces.formats.canonical import trace_to_dict
from review.traces.model import Trace
from storage import population_groups
from storage.db import make_engine, read_session, run_write
from storage.models import (
    AuditItem,
    AuditLog,
    Counter,
    Document,
    SamplingPlan,
    TraceChunk,
    TraceImport,
    TraceRollup,
)
from storage.models import Trace as TraceRow
from tests.helpers.actors import make_actor
from tests.helpers.paths import ROOT
from tests.helpers.traces import (
    add_document,
    canonical_lines,
    chunk,
    cited,
    import_traces,
    make_trace,
    write_jsonl,
)

SAMPLES = ROOT / "tests" / "data" / "traces"
UTC = dt.UTC

REVIEWER = make_actor("reviewer", clearance=False, uid=11)
CLEARED_REVIEWER = make_actor("reviewer", email="cleared@test.example", clearance=True, uid=12)
ANNOTATOR = make_actor("annotator", uid=13)
OWNER = make_actor("product_owner", uid=14)
ADMIN = make_actor("admin", clearance=True, uid=15)


def n_traces(engine: Engine) -> int:
    with engine.connect() as c:
        return int(c.execute(select(func.count()).select_from(TraceRow)).scalar_one())


def n_imports(engine: Engine) -> int:
    with engine.connect() as c:
        return int(c.execute(select(func.count()).select_from(TraceImport)).scalar_one())


def chunk_counts(engine: Engine) -> dict[str, int]:
    with engine.connect() as c:
        rows = c.execute(
            select(TraceRow.trace_id, func.count(TraceChunk.id))
            .outerjoin(TraceChunk, TraceChunk.trace_pk == TraceRow.id)
            .group_by(TraceRow.trace_id)
        ).all()
    return {r[0]: int(r[1]) for r in rows}


def add_restricted_doc(
    engine: Engine, key: str = "LEGAL-HOLD", title: str = "Legal hold procedure"
) -> None:
    def work(s: object) -> None:
        from sqlalchemy.orm import Session

        assert isinstance(s, Session)
        s.add(
            Document(
                doc_key=key,
                version=1,
                title=title,
                body="Preserve every record of the matter.",
                authority="internal_memo",
                owner="Legal",
                access_scope="restricted",
                jurisdiction="global",
                sha256="0" * 64,
            )
        )

    run_write(engine, work)


# ---------------------------------------------------------------------------------------
# Every format, idempotency


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("canonical.jsonl", "canonical"),
        ("otlp_openinference.jsonl", "otlp"),
        ("otlp_genai.jsonl", "otlp"),
        ("langfuse.jsonl", "langfuse"),
        ("flat.csv", "csv"),
    ],
)
def test_every_sample_format_imports_then_reimport_adds_nothing(
    engine: Engine, tax: Taxonomy, name: str, fmt: str
) -> None:
    path = SAMPLES / name
    with path.open(encoding="utf-8", newline="") as fh:
        expected = [i.trace for i in iter_traces(fh, name, fmt) if hasattr(i, "trace")]
    assert expected
    first = importer.import_file(engine, SYSTEM, path, "auto", tax=tax)
    assert first.format == fmt
    assert (first.traces, first.added, first.skipped, first.rejected) == (
        len(expected),
        len(expected),
        0,
        0,
    )
    stored = chunk_counts(engine)
    assert stored == {t.trace_id: len(t.chunks) for t in expected}
    again = importer.import_file(engine, SYSTEM, path, fmt, tax=tax)
    assert (again.added, again.skipped) == (0, len(expected))
    assert n_traces(engine) == len(expected)
    rows = importer.recent_imports(engine)
    assert [r.status for r in rows] == ["done", "done"]
    assert (rows[0].added, rows[0].skipped, rows[1].added) == (0, len(expected), len(expected))


def test_otlp_spans_out_of_order_within_lines_import_the_same(
    engine: Engine, tmp_path: Path, tax: Taxonomy
) -> None:
    lines = (SAMPLES / "otlp_openinference.jsonl").read_text(encoding="utf-8").splitlines()
    shuffled = []
    for line in lines:
        d = json.loads(line)
        for rs in d["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                ss["spans"].reverse()
        shuffled.append(json.dumps(d))
    path = write_jsonl(tmp_path / "reversed.jsonl", shuffled)
    report = importer.import_file(engine, SYSTEM, path, "otlp", tax=tax)
    reference = make_engine(f"sqlite:///{tmp_path / 'ref.db'}")
    from storage.db import migrate

    migrate(reference)
    ref = importer.import_file(reference, SYSTEM, SAMPLES / "otlp_openinference.jsonl", "otlp")
    assert report.added == ref.added > 0
    assert chunk_counts(engine) == chunk_counts(reference)
    reference.dispose()


def test_duplicate_trace_ids_in_one_file_keep_the_first(engine: Engine, tmp_path: Path) -> None:
    items = [
        make_trace("dup-1", query="first version"),
        make_trace("other", query="another"),
        make_trace("dup-1", query="second version"),
    ]
    path = write_jsonl(tmp_path / "dups.jsonl", canonical_lines(items))
    report = importer.import_file(engine, SYSTEM, path, "canonical")
    assert (report.traces, report.added, report.skipped) == (3, 2, 1)
    view = browse.get_trace(engine, SYSTEM, trace_id="dup-1")
    assert view is not None and view.query == "first version"


# ---------------------------------------------------------------------------------------
# Malformed input: all or nothing, line and field named


def _good(n: int) -> list[str]:
    return canonical_lines(
        make_trace(f"t-{i}", f"2025-06-0{1 + i % 7}T10:00:00Z", chunks=[chunk(f"c{i}")])
        for i in range(n)
    )


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ('{"trace_id": "x", "time": "2025-06-02T10:00:00Z", "query": "q", "top_score": "high"}',
         "line 3: field top_score: expected a number"),
        ('{"trace_id": "x", "time": "2025-06-02T10:00:00Z"}', "line 3: field query: required"),
        ('{"trace_id": "x", "time": "2025-06-02T10:00:00Z", "query": "q", "decision": "maybe"}',
         "line 3: field decision: unknown decision"),
        ('{"trace_id": "x", "time": "2025-06-02T10:0', "line 3: not valid JSON"),
        ('{"trace_id": "x", "time": "2025-06-02T10:00:00Z", "query": "q", "user_role": "'
         + "r" * 121 + '"}', "line 3: field user_role: longer than 120 characters"),
    ],
)  # fmt: skip
def test_a_bad_line_writes_nothing_and_names_line_and_field(
    engine: Engine, tmp_path: Path, bad: str, message: str
) -> None:
    lines = [*_good(2), bad, *_good(4)[3:]]
    path = write_jsonl(tmp_path / "bad.jsonl", lines)
    with pytest.raises(InputError, match=message.replace("(", r"\(")):
        importer.import_file(engine, SYSTEM, path, "canonical")
    assert n_traces(engine) == 0
    assert n_imports(engine) == 0


def test_truncated_last_line_is_reported(engine: Engine, tmp_path: Path) -> None:
    lines = _good(3)
    lines[-1] = lines[-1][: len(lines[-1]) // 2]
    path = tmp_path / "truncated.jsonl"
    path.write_text("\n".join(lines), encoding="utf-8")  # no final newline, as when cut off
    with pytest.raises(InputError, match="line 3: not valid JSON"):
        importer.import_file(engine, SYSTEM, path, "canonical")
    assert n_traces(engine) == 0


def test_non_utf8_bytes_are_a_line_error_or_a_rejected_line(engine: Engine, tmp_path: Path) -> None:
    lines: list[str | bytes] = [*_good(2)]
    lines.insert(1, b'{"trace_id": "latin", "time": "2025-06-02T10:00:00Z", "query": "caf\xe9"}')
    path = write_jsonl(tmp_path / "latin1.jsonl", lines)
    with pytest.raises(InputError, match=r"line 2: not UTF-8 text \(byte 0xe9"):
        importer.import_file(engine, SYSTEM, path, "canonical")
    assert n_traces(engine) == 0
    rejects = tmp_path / "rejects.jsonl"
    report = importer.import_file(
        engine, SYSTEM, path, "canonical", skip_bad=True, rejects_path=rejects
    )
    assert (report.added, report.rejected) == (2, 1)
    rows = [json.loads(x) for x in rejects.read_text(encoding="utf-8").splitlines()]
    assert [r["line"] for r in rows] == [2]
    assert "caf\\xe9" in rows[0]["raw"] and "not UTF-8" in rows[0]["reason"]


def test_a_ten_megabyte_line_is_refused_by_field_and_the_rest_imports(
    engine: Engine, tmp_path: Path
) -> None:
    huge = json.dumps(
        {"trace_id": "huge", "time": "2025-06-02T10:00:00Z", "query": "x" * (10 * 2**20)}
    )
    path = write_jsonl(tmp_path / "huge.jsonl", [_good(1)[0], huge, _good(2)[1]])
    with pytest.raises(InputError, match="line 2: field query: longer than 1,000,000 characters"):
        importer.import_file(engine, SYSTEM, path, "canonical")
    report = importer.import_file(engine, SYSTEM, path, "canonical", skip_bad=True)
    assert (report.added, report.rejected) == (2, 1)
    assert report.rejects_file == str(path) + ".rejects.jsonl"
    assert Path(report.rejects_file).exists()


def test_skip_bad_reports_counts_and_every_rejected_line(engine: Engine, tmp_path: Path) -> None:
    lines = _good(5)
    lines[1] = '{"trace_id": "b1", "time": "yesterday", "query": "q"}'
    lines[3] = "not json at all"
    path = write_jsonl(tmp_path / "mixed.jsonl", lines)
    rejects = tmp_path / "out" / "rejected.jsonl"
    report = importer.import_file(
        engine, SYSTEM, path, "canonical", skip_bad=True, rejects_path=rejects
    )
    assert (report.traces, report.added, report.rejected) == (3, 3, 2)
    assert report.problems[0].endswith("line 2: field time: not a valid ISO 8601 time: 'yesterday'")
    assert "line 4: not valid JSON" in report.problems[1]
    rows = [json.loads(x) for x in rejects.read_text(encoding="utf-8").splitlines()]
    assert [(r["line"], r["raw"]) for r in rows] == [(2, lines[1]), (4, lines[3])]
    last = importer.recent_imports(engine)[0]
    assert (last.added, last.rejected, last.status) == (3, 2, "done")


def test_unknown_format_and_empty_file(engine: Engine, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "a.jsonl", _good(1))
    with pytest.raises(InputError, match="unknown trace format 'xml'"):
        importer.import_file(engine, SYSTEM, path, "xml")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n", encoding="utf-8")
    with pytest.raises(InputError, match="the file is empty"):
        importer.import_file(engine, SYSTEM, empty, "auto")


# ---------------------------------------------------------------------------------------
# Batches, progress, a killed import


def test_batches_and_progress(engine: Engine) -> None:
    items = [make_trace(f"b-{i}", chunks=[chunk("c1"), chunk("c2", rank=2)]) for i in range(5)]
    seen: list[tuple[str, int, int | None]] = []
    report = import_traces(engine, items, batch_size=2, progress=lambda *a: seen.append(a))
    assert report.added == 5
    assert [s for s in seen if s[0] == "writing"] == [
        ("writing", 2, 5),
        ("writing", 4, 5),
        ("writing", 5, 5),
    ]
    assert ("checking", 5, 5) in seen
    assert set(chunk_counts(engine).values()) == {2}


def test_an_import_killed_mid_batch_leaves_whole_traces_and_a_rerun_completes_it(
    engine: Engine, sqlite_url: str, tmp_path: Path
) -> None:
    items = [
        make_trace(f"k-{i:02d}", chunks=[chunk("a"), chunk("b", rank=2), chunk("c", rank=3)])
        for i in range(30)
    ]
    path = write_jsonl(tmp_path / "kill.jsonl", canonical_lines(items))
    script = f"""
import os, sys
sys.path.insert(0, {str(ROOT)!r})
from pathlib import Path
from review.core.identity import SYSTEM
from review.traces import importer
from storage.db import make_engine

calls = 0
real = importer.insert_chunks

def dying(session, rows):
    global calls
    calls += 1
    real(session, rows)
    if calls == 3:  # the third batch's traces and chunks are written, not committed
        os._exit(9)

importer.insert_chunks = dying
importer.import_file(make_engine({sqlite_url!r}), SYSTEM, Path({str(path)!r}), "canonical",
                   batch_size=5)
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 9, done.stderr
    counts = chunk_counts(engine)
    assert len(counts) == 10  # two committed batches
    assert set(counts.values()) == {3}  # no half-written trace
    assert importer.recent_imports(engine)[0].status == "interrupted"  # its process is gone
    report = importer.import_file(engine, SYSTEM, path, "canonical", batch_size=5)
    assert (report.added, report.skipped) == (20, 10)
    counts = chunk_counts(engine)
    assert len(counts) == 30 and set(counts.values()) == {3}


# ---------------------------------------------------------------------------------------
# Redaction and the restricted rule


def test_redaction_on_import_with_counts_on_trace_and_import(engine: Engine) -> None:
    t = make_trace(
        "pii-1",
        query="I am jana.novak@northwind.example, call +44 20 7946 0958 about BWA-12345678.",
        chunks=[chunk("c1", text="Card 4111 1111 1111 1111 was charged.")],
        answer_text="We will email jana.novak@northwind.example.",
        citations=(cited("Reach jana.novak@northwind.example", "c1"),),
    )
    report = import_traces(engine, [t, make_trace("clean")])
    assert report.redactions == {
        "billing_account": 1,
        "card": 1,
        "email": 3,
        "phone": 1,
        "support_pin": 0,
    }
    assert "email" in report.summary() and "3 email" in report.summary()
    view = browse.get_trace(engine, SYSTEM, trace_id="pii-1")
    assert view is not None
    assert view.query == "I am [email], call [phone] about [billing account]."
    assert view.chunks[0].text == "Card [card] was charged."
    assert view.answer_text == "We will email [email]."
    assert view.citations[0].claim == "Reach [email]"
    assert view.redactions == {"email": 3, "phone": 1, "billing_account": 1, "card": 1}
    row = importer.recent_imports(engine)[0]
    assert row.redactions["email"] == 3


def test_fast_redactor_matches_redact_trace_field_by_field() -> None:
    from review.traces.redaction import load_redaction_policy, redact_trace

    policy = load_redaction_policy()
    t = make_trace(
        "x",
        query="Support PIN: 48213, card 5555 5555 5555 4444, call (415) 555-0132.",
        rewritten_query="mail me at a.b@c.example",
        chunks=[chunk("c", text="Version 2.1.3 and 99.9% uptime since 2024."), chunk("d")],
        context_sent="Order 123456789 and phone 020 7946 0958",
        answer_text="nothing here",
        citations=(cited("BWA-00000001 is yours", "c"),),
    )
    fast = importcheck.Redactor(policy)
    assert fast.trace(t) == (
        redact_trace(t, policy)[0],
        {k: v for k, v in redact_trace(t, policy)[1].items() if v},
    )


def test_import_without_redaction_needs_clearance(engine: Engine) -> None:
    t = make_trace("raw", query="mail jana@northwind.example")
    with pytest.raises(PermissionDenied, match="clearance"):
        import_traces_as(engine, REVIEWER, [t], redact=False)
    import_traces_as(engine, CLEARED_REVIEWER, [t], redact=False)
    view = browse.get_trace(engine, CLEARED_REVIEWER, trace_id="raw")
    assert view is not None and view.query == "mail jana@northwind.example"
    assert importer.recent_imports(engine)[0].redactions == {}


def import_traces_as(
    engine: Engine, actor: Actor, items: list[Trace], **kw: Any
) -> importer.ImportReport:
    return importer.import_items(engine, actor, items, source="t", **kw)


def test_restricted_rule(engine: Engine) -> None:
    add_restricted_doc(engine)
    add_document(engine, "POL-REFUND-MONTHLY")
    items = [
        make_trace("open", chunks=[chunk("p1", doc="POL-REFUND-MONTHLY")]),
        make_trace("unknown", chunks=[chunk("u1", doc="NEVER-SEEN")]),
        make_trace("unknown-filtered", chunks=[chunk("u2", doc="NEVER-SEEN", filtered=True)]),
        make_trace("filtered-only", chunks=[chunk("r1", doc="LEGAL-HOLD", filtered=True)]),
        make_trace("sent", chunks=[chunk("r2", doc="LEGAL-HOLD")]),
        make_trace("scope", identity_scopes=("public", "restricted")),
        make_trace("flag", attributes={"restricted": "yes"}),
        make_trace("leak", answer_text="See the Legal Hold Procedure for that."),
    ]
    report = import_traces(engine, items)
    assert report.restricted == 5
    with engine.connect() as c:
        flags = dict(c.execute(select(TraceRow.trace_id, TraceRow.restricted)).all())
    assert flags == {
        "open": False,
        "unknown": True,  # a document the corpus has never seen: restricted by default
        "unknown-filtered": False,  # its text never reached the context
        "filtered-only": False,
        "sent": True,
        "scope": True,
        "flag": True,
        "leak": True,
    }


# ---------------------------------------------------------------------------------------
# Access and clearance


def test_roles_for_import_and_browsing(engine: Engine) -> None:
    t = make_trace("a")
    with pytest.raises(PermissionDenied, match="import production traces"):
        import_traces_as(engine, ANNOTATOR, [t])
    with pytest.raises(PermissionDenied, match="import production traces"):
        import_traces_as(engine, OWNER, [t])
    import_traces_as(engine, REVIEWER, [t])
    with pytest.raises(PermissionDenied, match="may not browse production traces"):
        browse.count_traces(engine, ANNOTATOR, browse.TraceFilter())
    with pytest.raises(PermissionDenied):
        browse.get_trace(engine, ANNOTATOR, trace_id="a")
    for who in (REVIEWER, OWNER, make_actor("compliance"), ADMIN):
        assert browse.count_traces(engine, who, browse.TraceFilter()) == 1


def test_clearance_hides_restricted_traces_and_filtered_chunks(engine: Engine) -> None:
    items = [
        make_trace(
            "mixed",
            chunks=[
                chunk("LEGAL-HOLD@1#p2", doc="LEGAL-HOLD", rank=1, filtered=True, text="secret"),
                chunk("POL@2#p1", doc="POL", rank=2),
            ],
            context_sent="[POL@2#p1] text of POL@2#p1",
            citations=(
                cited("claim one", "POL@2#p1"),
                cited("claim two", "LEGAL-HOLD@1#p2"),
                cited("claim three", "nowhere"),
            ),
        ),
        make_trace("secret", attributes={"restricted": True}, query="restricted question"),
    ]
    add_document(engine, "POL")
    import_traces(engine, items)
    assert browse.count_traces(engine, REVIEWER, browse.TraceFilter()) == 1
    assert [r.trace_id for r in browse.list_traces(engine, REVIEWER, browse.TraceFilter())] == [
        "mixed"
    ]
    assert browse.count_traces(engine, CLEARED_REVIEWER, browse.TraceFilter()) == 2
    restricted_pk = browse.list_traces(
        engine, CLEARED_REVIEWER, browse.TraceFilter(restricted_only=True)
    )[0].id
    with pytest.raises(PermissionDenied, match="restricted"):
        browse.get_trace(engine, REVIEWER, pk=restricted_pk)
    seen = browse.get_trace(engine, CLEARED_REVIEWER, pk=restricted_pk)
    assert seen is not None and seen.query == "restricted question"

    plain = browse.get_trace(engine, REVIEWER, trace_id="mixed")
    assert plain is not None
    assert [c.chunk_id for c in plain.chunks] == ["POL@2#p1"] and plain.hidden_chunks == 1
    assert "secret" not in repr(plain) and "LEGAL-HOLD" not in repr(plain)
    assert [c.chunk_ids for c in plain.citations] == [
        ("POL@2#p1",),
        (REDACTED,),
        ("nowhere",),
    ]
    assert [c.valid for c in plain.citations] == [True, False, False]
    assert plain.citations[1].problems == (f"{REDACTED} was removed by authorization",)
    assert plain.citations[2].problems == ("nowhere was not retrieved",)
    full = browse.get_trace(engine, CLEARED_REVIEWER, trace_id="mixed")
    assert full is not None and full.hidden_chunks == 0
    assert [(c.chunk_id, c.filtered, c.in_context, c.cited) for c in full.chunks] == [
        ("LEGAL-HOLD@1#p2", True, False, True),
        ("POL@2#p1", False, True, True),
    ]


# ---------------------------------------------------------------------------------------
# Filters, sorting, pagination (hand-counted)


@pytest.fixture
def eight(engine: Engine) -> Engine:
    items = [
        make_trace("t1", "2025-06-02T10:00:00Z", top_score=0.9, ranking_mode="vector",
                   feedback="positive", versions={"policy": "p@1", "index": "kb-1"},
                   attributes={"language": "en", "customer_tier": "team"}, hits_after_filter=3),
        make_trace("t2", "2025-06-03T10:00:00Z", reason="support_below_threshold",
                   top_score=0.6, ranking_mode="vector", hits_after_filter=2),
        make_trace("t3", "2025-06-04T10:00:00Z", decision="abstain",
                   reason="no_answer_bearing_evidence", hits_after_filter=0,
                   feedback="expected_answer", ranking_mode="semantic_reranker",
                   versions={"index": "kb-2"}),
        make_trace("t4", "2025-06-05T10:00:00Z", decision="clarify",
                   reason="ambiguous_question", top_score=2.5, ranking_mode="semantic_reranker",
                   ambiguous=True, attributes={"language": "de"}),
        make_trace("t5", "2025-06-06T10:00:00Z", decision="escalate",
                   query="Are you 100% sure_thing about this?"),
        make_trace("t6", "2025-06-08T23:59:59Z", decision="abstain",
                   reason="required_claim_not_covered", ungrounded=True,
                   feedback="answer_wrong", top_score=0.5),
        make_trace("t7", "2025-06-09T00:00:00Z", decision=None),
        make_trace("t8", "2025-06-09T12:00:00Z", attributes={"restricted": True}),
    ]  # fmt: skip
    import_traces(engine, items)
    return engine


@pytest.mark.parametrize(
    ("flt", "expected"),
    [
        (browse.TraceFilter(), {"t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8"}),
        (browse.TraceFilter(decisions=("answer",)), {"t1", "t2", "t8"}),
        (browse.TraceFilter(decisions=("(none)",)), {"t7"}),
        (browse.TraceFilter(decisions=("abstain", "(none)")), {"t3", "t6", "t7"}),
        (
            browse.TraceFilter(date_from=dt.date(2025, 6, 3), date_to=dt.date(2025, 6, 8)),
            {"t2", "t3", "t4", "t5", "t6"},
        ),
        (browse.TraceFilter(date_to=dt.date(2025, 6, 7)), {"t1", "t2", "t3", "t4", "t5"}),
        (browse.TraceFilter(reason_code="no_answer_bearing_evidence"), {"t3"}),
        (browse.TraceFilter(negative_feedback=True), {"t3", "t6"}),
        (browse.TraceFilter(feedback="positive"), {"t1"}),
        (browse.TraceFilter(ranking_mode="semantic_reranker"), {"t3", "t4"}),
        (browse.TraceFilter(version_key="index", version_value="kb-2"), {"t3"}),
        (browse.TraceFilter(policy_version="p@1"), {"t1"}),
        (browse.TraceFilter(language="de"), {"t4"}),
        (browse.TraceFilter(customer_tier="team"), {"t1"}),
        (browse.TraceFilter(score_min=0.7), {"t1", "t4"}),
        (browse.TraceFilter(score_max=1.0), {"t1", "t2", "t6"}),
        (browse.TraceFilter(text="100%"), {"t5"}),
        (browse.TraceFilter(text="SURE_THING"), {"t5"}),
        (browse.TraceFilter(text="t3"), {"t3"}),
        (browse.TraceFilter(ungrounded=True), {"t6"}),
        (browse.TraceFilter(empty_retrieval=True), {"t3"}),
        (browse.TraceFilter(missing_reason=True), {"t5", "t7"}),
        (browse.TraceFilter(caveat=True), {"t2"}),
        (browse.TraceFilter(restricted_only=True), {"t8"}),
    ],
)
def test_filters_hand_counted(eight: Engine, flt: browse.TraceFilter, expected: set[str]) -> None:
    rows = browse.list_traces(eight, CLEARED_REVIEWER, flt, page_size=50)
    assert {r.trace_id for r in rows} == expected
    assert browse.count_traces(eight, CLEARED_REVIEWER, flt) == len(expected)
    if not flt.restricted_only:  # without clearance the restricted t8 is left out
        assert browse.count_traces(eight, REVIEWER, flt) == len(expected - {"t8"})


@pytest.mark.parametrize(
    "decisions",
    [("answer",), ("(none)",), ("abstain", "(none)"), ("answer", "clarify", "escalate")],
)
def test_a_decision_filter_counts_from_the_rollup_or_the_table_when_out_of_step(
    eight: Engine, decisions: tuple[str, ...]
) -> None:
    """A filter of decisions alone is counted from the stored daily rollup (1.1 s over a
    fifth of a million traces otherwise), less the restricted traces a user without
    clearance does not see; a rollup out of step with the traces is not read."""
    flt = browse.TraceFilter(decisions=decisions)
    rollup_names = [d if d != "(none)" else "" for d in decisions]

    def listed(actor: Actor) -> int:
        return len(browse.list_traces(eight, actor, flt, page_size=50))

    with read_session(eight) as s:
        assert trace_rollup.decision_total(s, rollup_names) == listed(CLEARED_REVIEWER)
    for who in (CLEARED_REVIEWER, REVIEWER):
        assert browse.count_traces(eight, who, flt) == listed(who)
    with eight.begin() as conn:  # the rollup loses a day of answers: out of step
        conn.execute(delete(TraceRollup).where(TraceRollup.decision == "answer"))
    with read_session(eight) as s:
        assert trace_rollup.decision_total(s, rollup_names) is None
    for who in (CLEARED_REVIEWER, REVIEWER):
        assert browse.count_traces(eight, who, flt) == listed(who)


def test_every_trace_is_counted_from_the_counter_not_the_table(any_engine: Engine) -> None:
    """The Traces page's first view (no filter) reads the number of traces from the counter
    the triggers keep (a count(*) took 1.3-2.2 s at ten million traces), less the restricted
    ones for a user without clearance: the same figures as the listing, after an import and a
    delete too, and a count of the table when the counter row is missing."""
    items = [make_trace(f"c{i}", f"2025-06-0{1 + i % 9}T10:00:00Z") for i in range(7)]
    items += [make_trace(f"r{i}", "2025-06-05T12:00:00Z", attributes={"restricted": True})
              for i in range(2)]  # fmt: skip
    import_traces(any_engine, items)
    seen: list[str] = []

    def listen(_c: Any, _cur: Any, statement: str, *_a: Any) -> None:
        seen.append(" ".join(statement.split()).lower())

    def listed(actor: Actor) -> int:
        return len(browse.list_traces(any_engine, actor, browse.TraceFilter(), page_size=50))

    event.listen(any_engine, "before_cursor_execute", listen)
    try:
        counts = {
            a: browse.count_traces(any_engine, a, browse.TraceFilter())
            for a in (CLEARED_REVIEWER, REVIEWER)
        }
    finally:
        event.remove(any_engine, "before_cursor_execute", listen)
    assert counts == {CLEARED_REVIEWER: 9, REVIEWER: 7}
    assert [q for q in seen if re.search(r"count\(\*\)( as \w+)? from traces$", q)] == []
    with any_engine.begin() as conn:
        conn.execute(delete(TraceRow).where(TraceRow.trace_id.in_(["c0", "r1"])))
    import_traces(any_engine, [make_trace("n1", "2025-06-09T10:00:00Z")])
    for who in (CLEARED_REVIEWER, REVIEWER):
        assert browse.count_traces(any_engine, who, browse.TraceFilter()) == listed(who)
    assert listed(CLEARED_REVIEWER) == 8
    with any_engine.begin() as conn:  # no counter row: the table is counted
        conn.execute(delete(Counter).where(Counter.name == population_groups.COUNTER))
    for who in (CLEARED_REVIEWER, REVIEWER):
        assert browse.count_traces(any_engine, who, browse.TraceFilter()) == listed(who)


def test_sorting_and_pagination(eight: Engine) -> None:
    f = browse.TraceFilter()
    ids = lambda rows: [r.trace_id for r in rows]  # noqa: E731
    assert ids(browse.list_traces(eight, CLEARED_REVIEWER, f, page_size=3))[:2] == ["t8", "t7"]
    assert ids(browse.list_traces(eight, CLEARED_REVIEWER, f, sort="oldest", page_size=2)) == [
        "t1",
        "t2",
    ]
    assert ids(browse.list_traces(eight, CLEARED_REVIEWER, f, sort="score_desc", page_size=2)) == [
        "t4",
        "t1",
    ]
    assert ids(browse.list_traces(eight, CLEARED_REVIEWER, f, sort="score_asc", page_size=1)) == [
        "t6"
    ]
    assert len(browse.list_traces(eight, CLEARED_REVIEWER, f, page=3, page_size=3)) == 2
    assert browse.list_traces(eight, CLEARED_REVIEWER, f, page=4, page_size=3) == []
    with pytest.raises(InputError, match="unknown sort"):
        browse.list_traces(eight, CLEARED_REVIEWER, f, sort="random")


def test_facets_and_version_keys(eight: Engine) -> None:
    facets = trace_facets.facet_values(eight)
    assert facets["ranking_mode"] == ["semantic_reranker", "vector"]
    assert facets["feedback"] == ["answer_wrong", "expected_answer", "positive"]
    assert trace_facets.version_keys(eight) == {"index": ["kb-1", "kb-2"], "policy": ["p@1"]}
    stamp = browse.data_stamp(eight)
    import_traces(eight, [make_trace("t9")])
    assert browse.data_stamp(eight) != stamp


def test_the_data_stamp_reads_index_ends_not_whole_indexes(eight: Engine) -> None:
    """Pages key their caches by the stamp on every rerun: SQLite must seek each min and max
    (``SEARCH``), which it does only for a lone min() or max() per select."""
    seen: list[str] = []

    def spy(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        seen.append(statement)

    event.listen(eight, "before_cursor_execute", spy)
    try:
        stamp = browse.data_stamp(eight)
    finally:
        event.remove(eight, "before_cursor_execute", spy)
    with eight.connect() as c:
        lo, hi = c.exec_driver_sql("SELECT min(id), max(id) FROM traces").one()
        top = c.exec_driver_sql("SELECT max(id) FROM trace_imports").scalar()
        plans = [
            r[3] for statement in seen for r in c.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}")
        ]
    assert stamp == f"{lo}-{hi}-{top}"
    assert plans and not [p for p in plans if p.startswith("SCAN") and "CONSTANT ROW" not in p]


# ---------------------------------------------------------------------------------------
# Retention


def test_retention_setting_is_versioned_and_admin_only(engine: Engine) -> None:
    assert retention.get_retention(engine) == retention.Retention(None, 0, None, None)
    with pytest.raises(PermissionDenied):
        retention.set_retention(engine, CLEARED_REVIEWER, 30, 0)
    with pytest.raises(InputError, match="between 1 and"):
        retention.set_retention(engine, ADMIN, 0, 0)
    r = retention.set_retention(engine, ADMIN, 90, 0)
    assert (r.days, r.version) == (90, 1)
    with pytest.raises(StaleWriteError, match=r"changed by admin@test\.example"):
        retention.set_retention(engine, ADMIN, 30, 0)
    assert retention.set_retention(engine, ADMIN, None, 1).days is None
    with engine.connect() as c:
        audit = c.execute(
            select(AuditLog.before, AuditLog.after).where(AuditLog.entity_id == "retention")
        ).all()
    assert [tuple(a) for a in audit] == [(None, {"days": 90}), ({"days": 90}, {"days": None})]


def test_purge_deletes_old_traces_keeps_audited_ones_and_is_audited(engine: Engine) -> None:
    now = dt.datetime(2025, 7, 1, 12, tzinfo=UTC)
    items = [
        make_trace(f"old-{i}", now - dt.timedelta(days=40 + i), chunks=[chunk("c")])
        for i in range(5)
    ] + [make_trace("recent", now - dt.timedelta(days=10), chunks=[chunk("c")])]
    import_traces(engine, items)
    audited = browse.get_trace(engine, SYSTEM, trace_id="old-0")
    assert audited is not None

    def plan(s: object) -> None:
        from sqlalchemy.orm import Session

        assert isinstance(s, Session)
        p = SamplingPlan(
            name="p", allocation="equal", total=1, seed=1, fingerprint="f", created_by="x"
        )
        s.add(p)
        s.flush()
        s.add(AuditItem(plan_id=p.id, trace_pk=audited.id, stratum="all", position=1))

    run_write(engine, plan)
    with pytest.raises(PermissionDenied):
        retention.purge_older_than(engine, CLEARED_REVIEWER, 30, now=now)
    assert retention.apply_retention(engine, ADMIN, now=now) is None
    report = retention.purge_older_than(engine, ADMIN, 30, now=now, batch=2)
    assert (report.deleted, report.kept_in_audits) == (4, 1)
    assert "4 traces from before 2025-06-01 12:00 UTC deleted" in report.summary()
    assert set(chunk_counts(engine)) == {"old-0", "recent"}
    with engine.connect() as c:
        assert c.execute(select(func.count()).select_from(TraceChunk)).scalar_one() == 2
        after = c.execute(select(AuditLog.after).where(AuditLog.action == "purge")).scalar_one()
    assert after == {"deleted": 4, "kept_in_audits": 1}
    retention.set_retention(engine, ADMIN, 5, 0)
    again = retention.apply_retention(engine, ADMIN, now=now)
    assert again is not None and (again.deleted, again.kept_in_audits) == (1, 1)


# ---------------------------------------------------------------------------------------
# Demo data


def test_demo_traces_go_through_the_import_and_are_deterministic(
    engine: Engine, tax: Taxonomy
) -> None:
    from review.corpus import corpus
    from review.demo import tracedemo
    from review.demo.files import DEMO_DOCS

    docs, files = corpus.read_files([DEMO_DOCS], tax)
    corpus.import_documents(engine, SYSTEM, docs, files)
    assert tracedemo.build_demo_traces(engine, tax) == tracedemo.DEMO_TRACES
    assert tracedemo.build_demo_traces(engine, tax) == 0  # idempotent
    day = dt.date(2025, 6, 18)
    a = [trace_to_dict(t) for t in tracedemo.demo_traces(480, today=day)]
    b = [trace_to_dict(t) for t in tracedemo.demo_traces(480, today=day)]
    assert a == b
    row = importer.recent_imports(engine)[0]
    assert row.actor == "demo-data" and row.added == tracedemo.DEMO_TRACES
    assert all(row.redactions[k] > 0 for k in ("email", "phone", "card", "billing_account"))
    with engine.connect() as c:
        queries = list(c.execute(select(TraceRow.query)).scalars())
        restricted = c.execute(
            select(func.count()).select_from(TraceRow).where(TraceRow.restricted.is_(True))
        ).scalar_one()
        filtered = c.execute(
            select(func.count()).select_from(TraceChunk).where(TraceChunk.filtered.is_(True))
        ).scalar_one()
        modes = set(c.execute(select(TraceRow.ranking_mode).distinct()).scalars())
    assert not any(".example" in q and "@" in q for q in queries)
    assert any("[email]" in q for q in queries) and any("[card]" in q for q in queries)
    assert 5 <= restricted <= 60 and filtered > 50
    assert modes == {"vector", "semantic_reranker"}
    assert browse.count_traces(engine, ADMIN, browse.TraceFilter(missing_reason=True)) == 4


def test_demo_refusals_include_wording_violations_the_lint_finds() -> None:
    from review.demo import tracedemo
    from review.wording.lint import lint
    from review.wording.messages import load_wording

    w = load_wording()
    found: set[str] = set()
    for t in tracedemo.demo_traces(600, today=dt.date(2025, 6, 18)):
        if t.decision != "answer":
            for f in lint(
                t.answer_text,
                restricted_titles=w.restricted_titles,
                allowed_contacts=w.allowed_contacts,
            ):
                found.add(f.rule)
    assert {
        "universal_negative",
        "leaked_internal",
        "unlisted_contact",
        "claim_after_refusal",
    } <= found


# ---------------------------------------------------------------------------------------
# Command line


def test_cli_import_traces_and_purge(
    sqlite_url: str, engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from review.cli import tracecli

    monkeypatch.setenv("WORKBENCH_DATABASE_URL", sqlite_url)
    runner = CliRunner()
    good = write_jsonl(tmp_path / "good.jsonl", _good(3))
    out = runner.invoke(tracecli.import_traces_cmd, [str(good), "--format", "canonical"])
    assert out.exit_code == 0, out.output
    assert "3 traces added" in out.output
    bad_lines = _good(3)
    bad_lines[1] = '{"trace_id": "x", "time": "2025-06-02T10:00:00Z", "query": 5}'
    bad = write_jsonl(tmp_path / "bad.jsonl", bad_lines)
    out = runner.invoke(tracecli.import_traces_cmd, [str(bad)])
    assert out.exit_code == 1
    assert "bad.jsonl: line 2: field query: expected text" in out.output
    out = runner.invoke(tracecli.import_traces_cmd, [str(bad), "--skip-bad"])
    assert out.exit_code == 0, out.output
    assert "1 rejected" in out.output and "rejected: " in out.output
    assert (tmp_path / "bad.jsonl.rejects.jsonl").exists()
    out = runner.invoke(tracecli.import_traces_cmd, [str(good), "--rejects", "x.jsonl"])
    assert out.exit_code == 2 and "--rejects needs --skip-bad" in out.output
    out = runner.invoke(tracecli.purge_cmd, [])
    assert out.exit_code == 1 and "no retention rule is set" in out.output
    out = runner.invoke(tracecli.purge_cmd, ["--older-than", "1"])
    assert out.exit_code == 0, out.output
    assert "3 traces from before" in out.output
    assert n_traces(engine) == 0


# ---------------------------------------------------------------------------------------
# SQLite and PostgreSQL


@pytest.mark.postgres
def test_import_and_browse_on_both_databases(any_engine: Engine) -> None:
    items = [
        make_trace(f"pg-{i}", f"2025-06-0{2 + i}T10:00:00Z",
                   chunks=[chunk("c1"), chunk("c2", rank=2)],
                   versions={"index": f"kb-{i % 2}"}, top_score=0.5 + i / 10)
        for i in range(4)
    ]  # fmt: skip
    add_document(any_engine, "POL-REFUND-MONTHLY")
    assert import_traces(any_engine, items, batch_size=3).added == 4
    assert import_traces(any_engine, items, batch_size=3).added == 0
    assert (
        browse.count_traces(
            any_engine, REVIEWER, browse.TraceFilter(version_key="index", version_value="kb-1")
        )
        == 2
    )
    assert browse.count_traces(any_engine, REVIEWER, browse.TraceFilter(text="REFUND")) == 4
    assert set(chunk_counts(any_engine).values()) == {2}
    report = retention.purge_older_than(
        any_engine, ADMIN, 1, now=dt.datetime(2025, 6, 4, 12, tzinfo=UTC)
    )
    assert report.deleted == 2


def test_demo_database_fixture_has_traces(trace_demo_engine: Engine) -> None:
    assert browse.count_traces(trace_demo_engine, ADMIN, browse.TraceFilter()) >= 2000
