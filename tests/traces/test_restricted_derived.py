"""Restricted status is derived, never frozen at import (issue 16 item 2): a trace follows the
documents it quotes in the transaction that changes them, a trace citing a document the corpus
has never seen is restricted until a person clears it (a setting), an admin can mark a trace
restricted by hand, and `workbench recompute-restricted` rebuilds every flag. Checked through
the services the Traces page uses (the listing and the deep link)."""

from __future__ import annotations

from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import Engine, func, literal_column, select, update

from review.core.errors import InputError, PermissionDenied
from review.core.identity import SYSTEM
from review.corpus import corpus, restricted_traces
from review.corpus.docformat import DocumentIn
from review.traces import browse, restricted
from storage.db import run_write
from storage.models import AuditLog, Document, TraceChunk
from storage.models import Trace as TraceRow
from tests.helpers.actors import make_actor
from tests.helpers.traces import add_document, chunk, import_traces, make_trace

REVIEWER = make_actor("reviewer", clearance=False, uid=11)
CLEARED = make_actor("reviewer", email="cleared@test.example", clearance=True, uid=12)
ADMIN = make_actor("admin", email="admin@test.example", clearance=True, uid=15)
UNCLEARED_ADMIN = make_actor("admin", email="plain-admin@test.example", clearance=False, uid=16)


def visible(engine: Engine, trace_id: str) -> bool:
    """Whether a user without clearance sees the trace, in the listing and by deep link."""
    listed = {r.trace_id for r in browse.list_traces(engine, REVIEWER, browse.TraceFilter())}
    try:
        opened = browse.get_trace(engine, REVIEWER, trace_id=trace_id) is not None
    except PermissionDenied:
        opened = False
    assert (trace_id in listed) == opened, "the listing and the deep link disagree"
    return opened


def pk_of(engine: Engine, trace_id: str) -> int:
    with engine.connect() as c:
        return int(c.execute(select(TraceRow.id).where(TraceRow.trace_id == trace_id)).scalar_one())


def doc_in(key: str, version: int, scope: str, title: str | None = None) -> DocumentIn:
    return DocumentIn(
        doc_id=key,
        version=version,
        title=title or f"Document {key}",
        authority="policy",
        owner="Tests",
        access_scope=scope,
        jurisdiction="EU",
        body=f"Version {version} of {key}.",
    )


# ---------------------------------------------------------------------------------------
# Documents


def test_a_trace_becomes_restricted_when_its_document_gets_a_restricted_version(
    any_engine: Engine,
) -> None:
    engine = any_engine
    add_document(engine, "POL-PUBLIC")
    import_traces(engine, [make_trace("quotes", chunks=[chunk("p1", doc="POL-PUBLIC")])])
    assert visible(engine, "quotes")

    corpus.add_version(engine, ADMIN, "POL-PUBLIC", 1, doc_in("POL-PUBLIC", 2, "restricted"))
    assert not visible(engine, "quotes")
    why = restricted.restriction(engine, ADMIN, pk_of(engine, "quotes"))
    assert why is not None and why.restricted
    assert why.reasons == ("cites restricted document POL-PUBLIC",)
    with pytest.raises(PermissionDenied):
        restricted.restriction(engine, REVIEWER, pk_of(engine, "quotes"))

    # any version counts: a later public version does not open what the restricted one said
    corpus.add_version(engine, ADMIN, "POL-PUBLIC", 2, doc_in("POL-PUBLIC", 3, "public"))
    assert not visible(engine, "quotes")


def test_the_traces_follow_in_the_same_transaction(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    add_document(engine, "POL-PUBLIC")
    import_traces(engine, [make_trace("quotes", chunks=[chunk("p1", doc="POL-PUBLIC")])])

    def broken(*_: Any) -> None:
        raise RuntimeError("recompute failed")

    monkeypatch.setattr(restricted_traces, "recompute", broken)
    with pytest.raises(RuntimeError, match="recompute failed"):
        corpus.add_version(engine, ADMIN, "POL-PUBLIC", 1, doc_in("POL-PUBLIC", 2, "restricted"))
    with engine.connect() as c:  # the version was not written either
        assert c.execute(select(func.max(Document.version))).scalar_one() == 1
    monkeypatch.undo()
    assert visible(engine, "quotes")


def test_a_filtered_chunk_of_a_document_made_restricted_keeps_the_trace_open(
    engine: Engine,
) -> None:
    add_document(engine, "POL-PUBLIC")
    add_document(engine, "POL-OTHER")
    items = [
        make_trace(
            "filtered",
            chunks=[chunk("p1", doc="POL-PUBLIC", filtered=True), chunk("o1", doc="POL-OTHER")],
        )
    ]
    import_traces(engine, items)
    corpus.add_version(engine, ADMIN, "POL-PUBLIC", 1, doc_in("POL-PUBLIC", 2, "restricted"))
    assert visible(engine, "filtered")  # its text never reached the context


def test_a_trace_naming_a_title_that_becomes_restricted_follows(any_engine: Engine) -> None:
    engine = any_engine
    items = [
        make_trace("names", answer_text="See the merger PLAN ALPHA memo for the dates."),
        make_trace("accents", answer_text="Le RÈGLEMENT INTÉRIEUR 2026 en parle."),
        make_trace("other", answer_text="Nothing to see here."),
    ]
    import_traces(engine, items)
    assert visible(engine, "names") and visible(engine, "accents")
    corpus.import_documents(
        engine,
        ADMIN,
        [
            doc_in("MEMO-MERGER", 1, "restricted", "Merger plan alpha"),
            doc_in("REG-2026", 1, "restricted", "Règlement intérieur 2026"),
        ],
    )
    assert not visible(engine, "names") and not visible(engine, "accents")
    assert visible(engine, "other")
    why = restricted.restriction(engine, CLEARED, pk_of(engine, "names"))
    assert why is not None
    assert why.reasons == ("names the title of restricted document MEMO-MERGER",)


# ---------------------------------------------------------------------------------------
# Documents the corpus has never seen


def test_unknown_documents_make_a_trace_restricted_until_cleared(any_engine: Engine) -> None:
    engine = any_engine
    import_traces(engine, [make_trace("unknown", chunks=[chunk("u1", doc="NEVER-SEEN")])])
    pk = pk_of(engine, "unknown")
    assert restricted.get_unknown_setting(engine).on  # never set: on (fail closed)
    assert not visible(engine, "unknown")
    why = restricted.restriction(engine, ADMIN, pk)
    assert why is not None
    assert why.reasons == ("cites document NEVER-SEEN, which the corpus has never seen",)

    # the setting off: open; on again: restricted (each in its own transaction, audited)
    setting, flips = restricted.set_unknown_documents(engine, ADMIN, False, 0)
    assert (setting.on, flips.opened, flips.restricted) == (False, 1, 0)
    assert visible(engine, "unknown")
    setting, flips = restricted.set_unknown_documents(engine, ADMIN, True, setting.version)
    assert (setting.on, flips.opened, flips.restricted) == (True, 0, 1)
    assert not visible(engine, "unknown")
    with pytest.raises(PermissionDenied, match="clearance"):
        restricted.set_unknown_documents(engine, UNCLEARED_ADMIN, False, setting.version)
    with pytest.raises(PermissionDenied):
        restricted.set_unknown_documents(engine, CLEARED, False, setting.version)

    # a person clears it
    flips = restricted.mark_trace(engine, ADMIN, pk, "cleared", "checked with the index team")
    assert flips.opened == 1 and visible(engine, "unknown")
    why = restricted.restriction(engine, ADMIN, pk)
    assert why is not None and why.reasons == () and why.mark == "cleared"
    assert why.marked_by == ADMIN.email and why.note == "checked with the index team"
    assert "Unknown documents cleared by admin@test.example" in why.mark_text()

    # the mark removed: restricted again; the document added publicly: open, no mark needed
    restricted.mark_trace(engine, ADMIN, pk, None, "the mark was a mistake")
    assert not visible(engine, "unknown")
    add_document(engine, "NEVER-SEEN")
    assert visible(engine, "unknown")
    with pytest.raises(InputError, match="nothing to clear"):
        restricted.mark_trace(engine, ADMIN, pk, "cleared", "again")


def test_a_chunk_that_names_no_document_counts_as_unknown(engine: Engine) -> None:
    import_traces(engine, [make_trace("anon", chunks=[chunk("a1", doc=None)])])  # type: ignore[arg-type]
    assert not visible(engine, "anon")
    why = restricted.restriction(engine, ADMIN, pk_of(engine, "anon"))
    assert why is not None and why.reasons == ("cites a chunk that names no document",)


def test_a_clear_never_overrides_a_restricted_document(engine: Engine) -> None:
    add_document(engine, "LEGAL-HOLD", scope="restricted", title="Legal hold procedure")
    items = [
        make_trace(
            "both", chunks=[chunk("l1", doc="LEGAL-HOLD"), chunk("u1", doc="NEVER-SEEN", rank=2)]
        )
    ]
    import_traces(engine, items)
    pk = pk_of(engine, "both")
    restricted.mark_trace(engine, ADMIN, pk, "cleared", "the unknown one is fine")
    assert not visible(engine, "both")
    why = restricted.restriction(engine, ADMIN, pk)
    assert why is not None and why.reasons == ("cites restricted document LEGAL-HOLD",)


# ---------------------------------------------------------------------------------------
# A person's mark


def test_an_admin_marks_a_trace_restricted_by_hand(any_engine: Engine) -> None:
    engine = any_engine
    add_document(engine, "POL-PUBLIC")
    import_traces(engine, [make_trace("hand", chunks=[chunk("p1", doc="POL-PUBLIC")])])
    pk = pk_of(engine, "hand")
    for who in (CLEARED, UNCLEARED_ADMIN):  # not an admin; an admin without clearance
        with pytest.raises(PermissionDenied):
            restricted.mark_trace(engine, who, pk, "restricted", "leaks a customer name")
    with pytest.raises(InputError, match="say why"):
        restricted.mark_trace(engine, ADMIN, pk, "restricted", "  ")
    with pytest.raises(InputError, match="unknown mark"):
        restricted.mark_trace(engine, ADMIN, pk, "secret", "x")
    assert visible(engine, "hand")

    flips = restricted.mark_trace(engine, ADMIN, pk, "restricted", "leaks a customer name")
    assert flips.restricted == 1 and not visible(engine, "hand")
    why = restricted.restriction(engine, ADMIN, pk)
    assert why is not None and why.reasons == ("marked restricted by admin@test.example",)
    with engine.connect() as c:
        log = c.execute(
            select(AuditLog.actor, AuditLog.action, AuditLog.after).where(
                AuditLog.entity == "trace", AuditLog.entity_id == str(pk)
            )
        ).one()
    assert log.actor == ADMIN.email and log.action == "mark"
    assert log.after["note"] == "leaks a customer name" and log.after["restricted"] is True

    # a rebuild keeps the mark; removing it opens the trace again
    assert restricted.recompute_all(engine).restricted == 0
    assert not visible(engine, "hand")
    restricted.mark_trace(engine, ADMIN, pk, None, "reviewed: no customer name")
    assert visible(engine, "hand")


# ---------------------------------------------------------------------------------------
# Rebuilding, and a stale flag


def _stale(engine: Engine) -> None:
    """A restricted document written straight into the table (a bulk SQL load): the
    traces quoting it keep stale flags until a rebuild."""

    def work(s: Any) -> None:
        s.add(
            Document(
                doc_key="POL-PUBLIC",
                version=2,
                title="Document POL-PUBLIC",
                body="now restricted",
                authority="policy",
                owner="Tests",
                access_scope="restricted",
                jurisdiction="EU",
                is_current=True,
                sha256="0" * 64,
            )
        )

    run_write(engine, work)


def test_recompute_restricted_command_counts_what_it_changed(
    sqlite_url: str, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    from review.cli import tracecli

    add_document(engine, "POL-PUBLIC")
    add_document(engine, "POL-OTHER")
    items = [
        make_trace(f"t{i}", chunks=[chunk(f"c{i}", doc="POL-PUBLIC" if i < 3 else "POL-OTHER")])
        for i in range(7)
    ]
    import_traces(engine, items)
    _stale(engine)
    with engine.begin() as c:  # and one flag wrongly set the other way
        c.execute(update(TraceRow).where(TraceRow.trace_id == "t6").values(restricted=True))
    # the stale flag still lists t0, but the deep link checks the rule, not only the flag
    assert "t0" in {r.trace_id for r in browse.list_traces(engine, REVIEWER, browse.TraceFilter())}
    with pytest.raises(PermissionDenied):
        browse.get_trace(engine, REVIEWER, trace_id="t0")

    monkeypatch.setenv("WORKBENCH_DATABASE_URL", sqlite_url)
    out = CliRunner().invoke(tracecli.recompute_restricted_cmd, ["--batch-size", "2"])
    assert out.exit_code == 0, out.output
    assert "7 traces checked: 3 became restricted, 1 became open" in out.output
    listed = {r.trace_id for r in browse.list_traces(engine, REVIEWER, browse.TraceFilter())}
    assert listed == {"t3", "t4", "t5", "t6"}
    out = CliRunner().invoke(tracecli.recompute_restricted_cmd, [])
    assert "7 traces checked: 0 became restricted, 0 became open" in out.output


def test_import_and_recompute_agree_on_the_demo(demo_engine: Engine) -> None:
    """The importer and the rebuild apply one rule: right after the demo's import a rebuild
    changes nothing, and the demo's traces stay mostly open to users without clearance (they
    cite the demo's own documents)."""
    with demo_engine.connect() as c:
        total = c.execute(select(func.count()).select_from(TraceRow)).scalar_one()
        closed = c.execute(
            select(func.count()).select_from(TraceRow).where(TraceRow.restricted.is_(True))
        ).scalar_one()
        unknown = c.execute(
            select(func.count(func.distinct(TraceChunk.trace_pk))).where(
                TraceChunk.filtered.is_(False),
                ~select(Document.id).where(Document.doc_key == TraceChunk.doc_id).exists(),
            )
        ).scalar_one()
    flips = restricted.recompute_all(demo_engine)
    assert (flips.restricted, flips.opened, flips.checked) == (0, 0, total)
    assert unknown == 0
    assert 0 < closed < total * 0.05
    assert browse.count_traces(demo_engine, REVIEWER, browse.TraceFilter()) == total - closed


def test_the_system_actor_may_mark(engine: Engine) -> None:
    """The command-line admin (SYSTEM) has the role and clearance."""
    import_traces(engine, [make_trace("sys")])
    restricted.mark_trace(engine, SYSTEM, pk_of(engine, "sys"), "restricted", "by the operator")
    assert not visible(engine, "sys")


@pytest.mark.postgres
def test_an_import_waits_for_a_corpus_change_in_flight_on_postgresql(pg_url: str) -> None:
    """PostgreSQL reads committed data only: an import batch that read the corpus while a
    restricted version was being committed would store a stale open flag. The flag writers'
    lock makes the batch wait and read the corpus after the commit."""
    import threading
    import time

    from storage.db import make_engine, migrate, write_session

    engine = make_engine(pg_url)
    migrate(engine)
    try:
        add_document(engine, "POL-PUBLIC")
        done: list[Any] = []
        with write_session(engine) as s:  # a corpus change, between its lock and its commit
            restricted_traces.lock(s, exclusive=True)
            s.add(
                Document(
                    doc_key="POL-PUBLIC",
                    version=2,
                    title="Document POL-PUBLIC",
                    body="now restricted",
                    authority="policy",
                    owner="Tests",
                    access_scope="restricted",
                    jurisdiction="EU",
                    sha256="0" * 64,
                )
            )
            s.flush()
            worker = threading.Thread(
                target=lambda: done.append(
                    import_traces(engine, [make_trace("late", chunks=[chunk("p", "POL-PUBLIC")])])
                )
            )
            worker.start()
            waiting = 0
            for _ in range(600):  # until the import waits on the lock (at most a minute)
                with engine.connect() as c:
                    waiting = c.execute(
                        select(func.count())
                        .select_from(text_table("pg_locks"))
                        .where(literal_column("locktype") == "advisory")
                        .where(literal_column("granted").is_(False))
                    ).scalar_one()
                if waiting:
                    break
                time.sleep(0.1)
            assert waiting == 1 and not done
        worker.join(timeout=60)
        assert done and done[0].restricted == 1
        assert not visible(engine, "late")
    finally:
        engine.dispose()


def text_table(name: str) -> Any:
    from sqlalchemy import table

    return table(name)
