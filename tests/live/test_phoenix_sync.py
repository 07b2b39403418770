"""Sync from a real Phoenix: RAG traces sent with the OpenTelemetry SDK's OTLP exporter, read
back through Phoenix's REST API into the workbench's traces, on SQLite and on two Phoenix
servers sharing one PostgreSQL."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import Engine, func, select

from review.cli.main import main
from review.core.identity import Actor
from review.traces.live import phoenix as phx
from review.traces.live import sources
from review.traces.live.phoenix import SyncReport, sync_phoenix
from storage.db import get_engine, read_session
from storage.models import SourceSpan, Trace, TraceChunk, TraceSource
from tests.live.phoenix_server import (
    PHOENIX_GROUP,
    SPANS_PER_TRACE,
    PhoenixServer,
    RagTrace,
    phoenix,  # noqa: F401  (the module-scoped fixture)
    phoenix_server,
    rag_traces,
    send_rag_traces,
    start_phoenix,
    wait_for_spans,
)

pytestmark = [pytest.mark.timeout(1800), PHOENIX_GROUP]


def _source(engine: Engine, admin: Actor, server: PhoenixServer, project: str) -> int:
    return sources.add_source(
        engine,
        admin,
        kind="phoenix",
        name=f"{project} source",
        url=server.base_url,
        project=project,
        grace_seconds=0,
    ).id


def _sync(engine: Engine, admin: Actor, sid: int, **kw: Any) -> SyncReport:
    """A sync importing traces as soon as their root arrived: one Phoenix on SQLite commits
    spans in id order, so no overlap window is needed (the two-servers test sets one)."""
    kw.setdefault("grace_seconds", 0)
    kw.setdefault("overlap_seconds", 0)
    return sync_phoenix(engine, admin, sid, **kw)


def _expected(ids: list[str], sent: list[RagTrace]) -> dict[str, Any]:
    return {
        tid: (
            t.query,
            t.rewritten_query,
            t.decision,
            t.reason_code,
            t.answer,
            list(t.topics),
            {"model": t.model, "prompt": t.prompt, "index": t.index},
            [
                (c.chunk_id, c.doc_id, c.doc_version, n + 1, c.score, c.text)
                for n, c in enumerate(t.chunks)
            ],
        )
        for tid, t in zip(ids, sent, strict=True)
    }


def _stored(engine: Engine) -> dict[str, Any]:
    with read_session(engine) as s:
        out: dict[str, Any] = {}
        for row in s.scalars(select(Trace)):
            chunks = s.scalars(
                select(TraceChunk).where(TraceChunk.trace_pk == row.id).order_by(TraceChunk.rank)
            )
            out[row.trace_id] = (
                row.query,
                row.rewritten_query,
                row.decision,
                row.reason_code,
                row.answer_text,
                row.topics,
                row.versions,
                [(c.chunk_id, c.doc_id, c.doc_version, c.rank, c.score, c.text) for c in chunks],
            )
        return out


def _span_rows(engine: Engine) -> int:
    with read_session(engine) as s:
        return int(s.scalar(select(func.count()).select_from(SourceSpan)) or 0)


def _states(engine: Engine) -> dict[str, int]:
    with read_session(engine) as s:
        rows = s.execute(select(SourceSpan.state, func.count()).group_by(SourceSpan.state))
        return {str(state): int(n) for state, n in rows}


def _send(server: PhoenixServer, project: str, n: int, seed: int) -> dict[str, Any]:
    sent = rag_traces(n, seed=seed, tag=f"-{project}")
    ids = send_rag_traces(server.traces_url, sent, project=project)
    return _expected(ids, sent)


def test_sync_stores_every_trace_sent_and_a_second_sync_adds_nothing(
    phoenix: PhoenixServer,  # noqa: F811
    engine: Engine,
    admin: Actor,
) -> None:
    want = _send(phoenix, "p-basic", 12, seed=1)
    assert {d for (_, _, d, *_) in want.values()} == {"answer", "abstain"}
    wait_for_spans(phoenix.base_url, "p-basic", 12 * SPANS_PER_TRACE)
    sid = _source(engine, admin, phoenix, "p-basic")

    first = _sync(engine, admin, sid, page_size=7)
    assert first.error is None
    assert (first.spans_read, first.added, first.imported, first.rejected) == (36, 36, 12, 0)
    assert first.pages == 6  # 36 spans, 7 a page
    assert _stored(engine) == want

    again = _sync(engine, admin, sid, page_size=7)
    # the overlap reads the last window again; staging drops every span it has
    assert (again.error, again.added, again.imported, again.rejected) == (None, 0, 0, 0)
    assert again.duplicates == again.spans_read > 0
    assert _stored(engine) == want
    assert _span_rows(engine) == 36
    src = sources.get_source(engine, sid)
    assert src.last_error is None and src.spans_read == 36 and src.traces_added == 12

    # more spans later: only they are new
    more = _send(phoenix, "p-basic", 4, seed=2)
    wait_for_spans(phoenix.base_url, "p-basic", 16 * SPANS_PER_TRACE)
    third = _sync(engine, admin, sid, page_size=7)
    assert (third.added, third.imported) == (12, 4)
    assert _stored(engine) == want | more


def test_the_resume_point_moves_once_the_overlap_window_has_passed(
    phoenix: PhoenixServer,  # noqa: F811
    engine: Engine,
    admin: Actor,
) -> None:
    want = _send(phoenix, "p-window", 6, seed=3)
    wait_for_spans(phoenix.base_url, "p-window", 18)
    sid = _source(engine, admin, phoenix, "p-window")
    later = [0.0]  # seconds after now that the syncs below run at

    def sync() -> SyncReport:
        return _sync(
            engine,
            admin,
            sid,
            page_size=5,
            overlap_seconds=120,
            clock=lambda: time.time() + later[0],
        )

    r1 = sync()
    # every span read, no trace imported: each waits the window after its newest span
    assert (r1.spans_read, r1.added, r1.imported) == (18, 18, 0)
    later[0] = 10  # within the window: everything is read again
    assert (sync().spans_read, _stored(engine)) == (18, {})
    assert sources.get_source(engine, sid).cursor is None
    later[0] = 200  # a window after the first read: this sync reads past it once more...
    r3 = sync()
    assert (r3.spans_read, r3.imported) == (18, 6)
    assert sources.get_source(engine, sid).cursor is not None
    later[0] = 201  # ...and the next one resumes at the last span read (the cursor is inclusive)
    r4 = sync()
    assert (r4.spans_read, r4.added) == (1, 0)
    assert _stored(engine) == want


def test_a_sync_stopped_by_an_exception_completes_next_time(
    phoenix: PhoenixServer,  # noqa: F811
    engine: Engine,
    admin: Actor,
) -> None:
    want = _send(phoenix, "p-crash", 10, seed=4)
    wait_for_spans(phoenix.base_url, "p-crash", 30)
    sid = _source(engine, admin, phoenix, "p-crash")

    def crash(r: SyncReport) -> None:
        if r.pages == 2:
            raise RuntimeError("killed")

    with pytest.raises(RuntimeError, match="killed"):
        _sync(engine, admin, sid, page_size=4, after_page=crash)
    assert _span_rows(engine) == 8  # the two pages staged stay
    done = _sync(engine, admin, sid, page_size=4)
    assert done.error is None and done.added == 22
    assert _stored(engine) == want
    assert _span_rows(engine) == 30


def test_a_phoenix_stopped_mid_sync_leaves_an_error_and_the_next_sync_completes(
    tmp_path: Path, engine: Engine, admin: Actor
) -> None:
    work = tmp_path / "phoenix"
    server = start_phoenix(work)
    try:
        want = _send(server, "p-down", 8, seed=5)
        wait_for_spans(server.base_url, "p-down", 24)
        sid = _source(engine, admin, server, "p-down")

        def stop(r: SyncReport) -> None:
            if r.pages == 2:
                server.stop()

        client = phx.PhoenixClient(server.base_url, timeout=10)
        broken = _sync(engine, admin, sid, page_size=5, after_page=stop, client=client)
        assert broken.error is not None and "is not reachable" in broken.error
        # the pages fetched before Phoenix went down (the sync reads a page ahead) are staged
        assert 2 <= broken.pages < 5
        src = sources.get_source(engine, sid)
        assert src.last_error == broken.error
        assert _span_rows(engine) == 5 * broken.pages
        assert len(_stored(engine)) < 8

        server = start_phoenix(work, port=server.port)  # its SQLite file is kept
        done = _sync(engine, admin, sid, page_size=5)
        assert done.error is None and done.added == 24 - 5 * broken.pages
        assert _stored(engine) == want
        assert sources.get_source(engine, sid).last_error is None
    finally:
        server.stop()


def test_pages_over_the_size_limit_are_asked_for_again_smaller(
    phoenix: PhoenixServer,  # noqa: F811
    engine: Engine,
    admin: Actor,
) -> None:
    want = _send(phoenix, "p-big", 4, seed=8)
    wait_for_spans(phoenix.base_url, "p-big", 12)
    sid = _source(engine, admin, phoenix, "p-big")
    tiny = phx.PhoenixClient(phoenix.base_url, max_bytes=300)  # no span is that small
    r = _sync(engine, admin, sid, page_size=10, client=tiny)
    assert r.error is not None and "larger than 300 bytes was refused" in r.error
    assert r.spans_read == 0 and _span_rows(engine) == 0
    small = phx.PhoenixClient(phoenix.base_url, max_bytes=2500)  # 2 or 3 spans a page
    r = _sync(engine, admin, sid, page_size=10, client=small)
    assert r.error is None and r.spans_read == 12 and r.pages > 2
    assert _stored(engine) == want


def test_malformed_answers_from_a_phoenix_path_are_recorded_on_the_source(
    engine: Engine, admin: Actor
) -> None:
    # an address where nothing answers: the error is on the source, the position unchanged
    sid = sources.add_source(
        engine, admin, kind="phoenix", name="nowhere", url="http://127.0.0.1:9", project="p"
    ).id
    r = _sync(engine, admin, sid, client=phx.PhoenixClient("http://127.0.0.1:9", timeout=5))
    assert r.error is not None and "not reachable" in r.error
    src = sources.get_source(engine, sid)
    assert src.last_error == r.error and src.cursor is None


def test_an_unknown_project_says_so(
    phoenix: PhoenixServer,  # noqa: F811
    engine: Engine,
    admin: Actor,
) -> None:
    sid = _source(engine, admin, phoenix, "no-such-project")
    r = _sync(engine, admin, sid)
    assert r.error is not None and "HTTP 404" in r.error and "project name" in r.error


def test_two_phoenix_servers_on_one_postgresql_lose_nothing(
    tmp_path: Path, pg_url: str, engine: Engine, admin: Actor
) -> None:
    # one after the other: both migrating the same database at once crashes Phoenix
    # Phoenix commits a batch within a second of taking its ids: 8 s is a wide window, and
    # short enough that traces are imported while both servers are still writing
    window = 8.0
    with (
        phoenix_server(tmp_path / "a", database_url=pg_url) as a,
        phoenix_server(tmp_path / "b", database_url=pg_url) as b,
    ):
        sid = _source(engine, admin, a, "p-two")
        want: dict[str, Any] = {}
        errors: list[BaseException] = []
        imported_early = 0

        def send(server: PhoenixServer, seed: int) -> None:
            try:
                want.update(_send(server, "p-two", 15, seed))
            except BaseException as exc:  # reported below
                errors.append(exc)

        for round_ in range(5):
            writers = [
                threading.Thread(target=send, args=(a, 10 * round_ + 1)),
                threading.Thread(target=send, args=(b, 10 * round_ + 2)),
            ]
            for w in writers:
                w.start()
            if round_ == 0:  # Phoenix makes the project with its first span
                wait_for_spans(a.base_url, "p-two", 1)
            # sync while both servers write (the read side of the race), and at least 3 s a
            # round, so that traces are imported while later ones are still being written
            until = time.monotonic() + 3
            while any(w.is_alive() for w in writers) or time.monotonic() < until:
                r = _sync(engine, admin, sid, page_size=20, overlap_seconds=window)
                assert r.error is None
                imported_early += r.imported
                time.sleep(0.2)
            for w in writers:
                w.join()
            assert not errors, errors
        total = len(want) * SPANS_PER_TRACE
        assert len(want) == 150
        assert imported_early > 0
        wait_for_spans(b.base_url, "p-two", total)
        # a sync well past a window after the last span: every trace is complete and
        # imported (its clock runs 2 minutes ahead: the spans it stages itself, received on
        # the real clock while it reads, are inside its cutoff however long the read takes)
        last = _sync(
            engine,
            admin,
            sid,
            page_size=20,
            overlap_seconds=window,
            clock=lambda: time.time() + window + 120,
        )
        assert last.error is None
        assert _span_rows(engine) == total
        # no span came after its trace was imported (with no wait, one did: a child whose
        # batch committed just after the page that read its root)
        assert _states(engine) == {"imported": total}
        got = _stored(engine)
        wrong = {t: (got.get(t), want[t]) for t in want if got.get(t) != want[t]}
        assert not wrong, sorted(wrong.items())[:3]


def test_the_sync_command_creates_the_source_then_resumes_it(
    phoenix: PhoenixServer,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    want = _send(phoenix, "p-cli", 3, seed=6)
    wait_for_spans(phoenix.base_url, "p-cli", 9)
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    monkeypatch.setenv("WORKBENCH_DATABASE_URL", url)
    monkeypatch.setenv("TEST_PHOENIX_KEY", "not-needed-by-this-phoenix")
    args = ["sync", "phoenix", "--url", phoenix.base_url, "--project", "p-cli"]
    args += ["--grace", "0", "--overlap", "0"]
    r = CliRunner().invoke(main, [*args, "--api-key-env", "TEST_PHOENIX_KEY"])
    assert r.exit_code == 0, r.output
    assert "read 9 spans in 1 page (9 new, 0 read before); imported 3 traces" in r.output
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    assert "(0 new, 9 read before); imported 0 traces" in r.output
    engine = get_engine(url)
    (src,) = sources.list_sources(engine)
    assert (src.url, src.project, src.secret_name) == (
        phoenix.base_url,
        "p-cli",
        "TEST_PHOENIX_KEY",
    )
    assert _stored(engine) == want
    # the key itself is never stored
    with read_session(engine) as s:
        dump = " ".join(str(v) for row in s.execute(select(TraceSource)) for v in row)
    assert "not-needed-by-this-phoenix" not in dump

    bad = CliRunner().invoke(
        main, ["sync", "phoenix", "--url", "http://127.0.0.1:9", "--project", "x"]
    )
    assert bad.exit_code == 1 and "not reachable" in bad.output


def test_a_missing_secret_is_refused_before_any_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKBENCH_DATABASE_URL", f"sqlite:///{tmp_path / 'cli.db'}")
    monkeypatch.delenv("NO_SUCH_PHOENIX_KEY", raising=False)
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(
        main,
        [
            *("sync", "phoenix", "--url", "http://127.0.0.1:9", "--project", "x"),
            *("--api-key-env", "NO_SUCH_PHOENIX_KEY"),
        ],
    )
    assert r.exit_code == 1
    assert "secret 'NO_SUCH_PHOENIX_KEY': set the environment variable" in r.output
