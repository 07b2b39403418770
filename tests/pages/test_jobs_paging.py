"""The Background work page a page at a time (AppTest on a temp-file database, real jobs in
the queue): the newest jobs first, "Older →" and "← Newer" step by keyset pages
(``?before=N`` / ``?after=N``), disabled at either end; exactly one page of jobs has no other
page; a job deleted between two pages moves no other job, so walking the pages shows every
job once; a person sees only the kinds they may."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pandas as pd
import pytest
from sqlalchemy import Engine, delete, insert
from sqlalchemy.orm import Session
from streamlit.testing.v1 import AppTest

from pages.jobs_page import PAGE_SIZE
from review.admin import users
from review.core.errors import InputError
from review.core.identity import SYSTEM, Actor
from review.jobs import catalog, queue
from storage.db import make_engine
from storage.models import Job, JobFile, User
from tests.helpers.pages import no_exception, page_app

JOBS = "pages/jobs_page.py"
ADMIN = "solo@example.org"  # the empty database's administrator
ANN = "ann@paging.example"  # an annotator: sees no kind of job


@pytest.fixture
def engine(empty_url: str) -> Iterator[Engine]:
    eng = make_engine(empty_url)
    users.add_user(eng, SYSTEM, ANN, "Ann", ["annotator"])
    yield eng
    eng.dispose()


def _actor(engine: Engine, email: str) -> Actor:
    row = users.get_by_email(engine, email)
    assert row is not None
    return users.to_actor(row)


def add_jobs(engine: Engine, n: int) -> list[int]:
    """``n`` queued rollup rebuilds started by the administrator; their ids, oldest first."""
    admin = _actor(engine, ADMIN)
    with Session(engine) as s:
        ids = [
            queue.submit(s, admin, catalog.maintenance.ROLLUP_REBUILD.name, {}) for _ in range(n)
        ]
        s.commit()
    return ids


def drop_job(engine: Engine, job_id: int) -> None:
    with Session(engine) as s:
        s.execute(delete(JobFile).where(JobFile.job_id == job_id))
        s.execute(delete(Job).where(Job.id == job_id))
        s.commit()


def shown(at: AppTest) -> list[int]:
    frames: list[pd.DataFrame] = [d.value for d in at.dataframe if "attempts" in d.value.columns]
    return [int(i) for i in frames[0]["job"]] if frames else []


def control(at: AppTest, label: str) -> Any:
    return next(b for b in at.button if b.label == label)


def ends(at: AppTest) -> tuple[bool, bool]:
    """Whether "← Newer" and "Older →" can be pressed."""
    return (not control(at, "← Newer").disabled, not control(at, "Older →").disabled)


def press(at: AppTest, label: str) -> AppTest:
    control(at, label).click().run()
    no_exception(at)
    return at


def test_the_pages_walk_down_and_back_up_to_the_newest(
    empty_url: str, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = add_jobs(engine, 2 * PAGE_SIZE + 1)
    newest = ids[::-1]
    at = page_app(empty_url, monkeypatch, JOBS, ADMIN).run()
    no_exception(at)
    assert shown(at) == newest[:PAGE_SIZE]
    assert ends(at) == (False, True)  # the first page: nothing newer
    press(at, "Older →")
    assert at.query_params["before"] == str(newest[PAGE_SIZE - 1])
    assert shown(at) == newest[PAGE_SIZE : 2 * PAGE_SIZE]
    assert ends(at) == (True, True)
    press(at, "Older →")
    assert shown(at) == newest[2 * PAGE_SIZE :] == [ids[0]]
    assert ends(at) == (True, False)  # the last page: nothing older
    press(at, "← Newer")
    assert at.query_params["after"] == str(ids[0])
    assert shown(at) == newest[PAGE_SIZE : 2 * PAGE_SIZE]
    assert ends(at) == (True, True)
    press(at, "← Newer")
    assert shown(at) == newest[:PAGE_SIZE]
    assert ends(at) == (False, True)
    assert "after" not in at.query_params and "before" not in at.query_params


def test_exactly_one_page_of_jobs_has_no_other_page(
    empty_url: str, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = add_jobs(engine, PAGE_SIZE)
    at = page_app(empty_url, monkeypatch, JOBS, ADMIN).run()
    no_exception(at)
    assert shown(at) == ids[::-1]
    assert ends(at) == (False, False)
    # one more job: the oldest moves to a second page
    [extra] = add_jobs(engine, 1)
    at.run()
    assert shown(at) == [extra, *ids[::-1]][:PAGE_SIZE]
    assert ends(at) == (False, True)
    press(at, "Older →")
    assert shown(at) == [ids[0]]
    assert ends(at) == (True, False)


def test_a_job_deleted_between_two_pages_moves_no_other(
    empty_url: str, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = add_jobs(engine, 2 * PAGE_SIZE + 3)
    newest = ids[::-1]
    at = page_app(empty_url, monkeypatch, JOBS, ADMIN).run()
    first = shown(at)
    # the job the next page starts after, and one on that page, go while the reader looks
    gone = (first[-1], newest[PAGE_SIZE + 3])
    for job_id in gone:
        drop_job(engine, job_id)
    left = [i for i in newest if i not in gone]
    press(at, "Older →")
    second = shown(at)
    press(at, "Older →")
    third = shown(at)
    assert ends(at) == (True, False)
    seen = first[:-1] + second + third
    assert len(seen) == len(set(seen))  # none twice
    assert sorted(seen, reverse=True) == left  # none skipped
    # an address naming a deleted job still opens the page older than it
    deep = page_app(empty_url, monkeypatch, JOBS, ADMIN, before=str(first[-1])).run()
    no_exception(deep)
    assert shown(deep) == [i for i in left if i < first[-1]][:PAGE_SIZE]
    # and one past every job shows the newest
    past = page_app(empty_url, monkeypatch, JOBS, ADMIN, after=str(newest[0])).run()
    no_exception(past)
    assert shown(past) == left[:PAGE_SIZE]
    assert ends(past)[0] is False


def test_a_person_pages_through_the_kinds_they_may_see_only(
    empty_url: str, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    add_jobs(engine, 3)
    at = page_app(empty_url, monkeypatch, JOBS, ANN).run()
    no_exception(at)
    assert shown(at) == []
    assert any("No background work you may see yet." in i.value for i in at.info)
    with Session(engine) as s:
        assert queue.recent(s, _actor(engine, ANN), before=10**6) == []


def test_keyset_pages_of_the_queue_on_both_engines(any_engine: Engine) -> None:
    """queue.recent's pages on SQLite and PostgreSQL: before, after, both refused."""
    with any_engine.begin() as c:
        c.execute(insert(User).values(id=1, email="a@k.example", name="A", roles=["admin"]))
    admin = _actor(any_engine, "a@k.example")
    with Session(any_engine) as s:
        ids = [queue.submit(s, admin, "rollup_rebuild", {}) for _ in range(7)]
        s.commit()
        assert [j.id for j in queue.recent(s, admin, limit=3)] == ids[:-4:-1]
        assert [j.id for j in queue.recent(s, admin, limit=3, before=ids[2])] == ids[1::-1]
        assert [j.id for j in queue.recent(s, admin, limit=3, after=ids[1])] == ids[4:1:-1]
        assert queue.recent(s, admin, limit=3, after=ids[-1]) == []
        with pytest.raises(InputError, match="not both"):
            queue.recent(s, admin, before=ids[3], after=ids[1])
