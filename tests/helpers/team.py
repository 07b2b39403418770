"""A team deployment's shared pieces for the browser tests of deploy/ (tests/deploy): a demo
database on the throwaway PostgreSQL, a person's browser held on one app server behind
haproxy, and a wait for a condition outside the browser."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator

import pytest
from playwright.sync_api import Browser, Page
from sqlalchemy import create_engine, text

from review.admin import users
from review.core.taxonomy import load_taxonomy
from review.demo import fixtures
from review.policy import inforce, signoff
from review.thresholds import signing
from storage.db import make_engine, migrate
from tests.helpers.browser import EXPECT_TIMEOUT_MS
from tests.helpers.haproxy import COOKIE, Proxy

PAULA = "paula.kim@brightwave.example"  # product owner
CHEN = "chen.li@brightwave.example"  # compliance
RAVI = "ravi.menon@brightwave.example"  # reviewer: imports traces
ADA = "ada.admin@brightwave.example"  # admin: sees every job


def demo_database(pg_server: str) -> str:
    """A fresh PostgreSQL database, migrated, with the demo company (a few traces) and the
    demo's pending proposal rejected, so the journey's proposal is the one waiting."""
    name = f"wb_team_{os.getpid()}"
    admin = create_engine(pg_server, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as c:
            c.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
            c.execute(text(f'CREATE DATABASE "{name}"'))
    finally:
        admin.dispose()
    url = pg_server.rsplit("/", 1)[0] + f"/{name}"
    eng = make_engine(url)
    try:
        migrate(eng)
        tax = load_taxonomy()
        fixtures.build_demo(eng, tax, trace_count=300, variants=False)
        chen = users.to_actor(users.get_by_email(eng, CHEN))  # type: ignore[arg-type]
        for v in signoff.versions(eng, inforce.KIND):
            if v.status == "pending":
                signing.sign_thresholds(
                    eng, chen, tax, v.id, "reject", note="Cleared for the journey."
                )
    finally:
        eng.dispose()
    return url


@contextlib.contextmanager
def person_on(browser: Browser, proxy: Proxy, server: str, *, stays: bool = True) -> Iterator[Page]:
    """A browser of one person (its own cookies), held on ``server`` (app1, app2): its
    sticky cookie is set to that server before the first request, as haproxy would have set
    it on an earlier visit. ``stays``: checked at the end to still name that server."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        context.add_cookies([{"name": COOKIE, "value": server, "url": proxy.base}])
        page = context.new_page()
        page.set_default_timeout(EXPECT_TIMEOUT_MS)
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        yield page
        assert errors == []
        # haproxy kept the browser on its server: a cookie naming a server that is down or
        # unknown would have been replaced by another server's
        if stays:
            assert [c["value"] for c in context.cookies() if c["name"] == COOKIE] == [server]
    finally:
        context.close()


def wait_for(what: str, check: Callable[[], bool], seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting: {what}")
        time.sleep(0.3)
