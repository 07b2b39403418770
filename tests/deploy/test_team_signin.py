"""Sign-in with an identity provider (``st.login``) through the team deployment of deploy/:
two app servers (serve.py) behind Debian's haproxy on deploy/haproxy.cfg, one throwaway
PostgreSQL, and a real OpenID Connect provider (oidc-provider-mock: Authlib's provider
server, run by the test) that the servers reach by its discovery document, as they would an
organisation's.

Every server reads the same secrets file (deploy/secrets.toml.example): ``[auth]`` with the
proxy's address as ``redirect_uri`` and one ``cookie_secret``. So a sign-in started on one
server is finished on the other (the sticky cookie is switched while the person is at the
provider), and the person signed in there is signed in on the first server too. An address
the provider did not verify, and one the workbench does not know, are refused with why.

Every browser assertion waits (``expect``); every process is stopped in ``finally``."""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.helpers.browser import chromium_page, stop_process, streamlit_server, wait_idle
from tests.helpers.haproxy import COOKIE, Proxy, free_port, haproxy
from tests.helpers.paths import ROOT
from tests.helpers.team import CHEN, PAULA, demo_database, person_on

pytestmark = [
    pytest.mark.browser,
    pytest.mark.xdist_group("team-deployment"),
    pytest.mark.timeout(900),
]

TIMEOUT = 60_000
COOKIE_SECRET = "team-signin-test-cookie-secret-0123456789abcdef"
#: the people the provider knows (its predefined users): their subject and claims
PEOPLE = [
    {"sub": "paula", "email": PAULA, "email_verified": True, "name": "Paula Kim"},
    # Chen's address, but the provider says it did not verify it: refused
    {"sub": "unverified", "email": CHEN, "email_verified": False},
    {"sub": "stranger", "email": "stranger@elsewhere.example", "email_verified": True},
]


@contextlib.contextmanager
def _provider(log: Path) -> Iterator[str]:
    """The OpenID Connect provider as a server process of its own (its command line), on a
    free port; yields its address once its discovery document answers."""
    args = [sys.executable, "-m", "oidc_provider_mock", "--port", str(free_port())]
    for person in PEOPLE:
        args += ["--user-claims", json.dumps(person)]
    base = f"http://127.0.0.1:{args[4]}"
    with log.open("w") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(
                    base + "/.well-known/openid-configuration", timeout=2
                ) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the identity provider did not start: {log.read_text()}")
            time.sleep(0.2)
        yield base
    finally:
        stop_process(proc)


@dataclass(frozen=True)
class Deployment:
    proxy: Proxy
    provider: str


def _secrets(path: Path, proxy_port: int, provider: str) -> Path:
    """The secrets file every server reads, as deploy/secrets.toml.example lays it out."""
    path.write_text(
        "[auth]\n"
        f'redirect_uri = "http://127.0.0.1:{proxy_port}/oauth2callback"\n'
        f'cookie_secret = "{COOKIE_SECRET}"\n'
        'client_id = "abstention-workbench"\n'
        'client_secret = "team-signin-test-client-secret"\n'
        f'server_metadata_url = "{provider}/.well-known/openid-configuration"\n',
        encoding="utf-8",
    )
    return path


def _example_keys() -> set[str]:
    text = (ROOT / "deploy" / "secrets.toml.example").read_text(encoding="utf-8")
    section = text.split("[auth]", 1)[1].split("\n[", 1)[0]
    return set(re.findall(r"^#? ?([a-z_]+) *=", section, re.M))


@pytest.fixture(scope="module")
def deployment(pg_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    tmp = tmp_path_factory.mktemp("signin")
    url = demo_database(pg_server)
    with contextlib.ExitStack() as stack:
        provider = stack.enter_context(_provider(tmp / "provider.log"))
        # the proxy's address goes into the servers' settings, so it is chosen first
        proxy_port = free_port()
        secrets = _secrets(tmp / "secrets.toml", proxy_port, provider)
        assert {
            "redirect_uri",
            "cookie_secret",
            "client_id",
            "client_secret",
            "server_metadata_url",
        } <= _example_keys()
        shared = {
            "WORKBENCH_DATABASE_URL": url,
            "WORKBENCH_POLICIES_DIR": str(ROOT / "policies"),
            "STREAMLIT_SECRETS_FILES": str(secrets),
            "STREAMLIT_SERVER_ENABLE_XSRF_PROTECTION": "true",
            "STREAMLIT_SERVER_ENABLE_CORS": "true",
        }
        one = stack.enter_context(streamlit_server(ROOT / "app.py", tmp, **shared))
        two = stack.enter_context(streamlit_server(ROOT / "app.py", tmp, **shared))
        apps = [b.removeprefix("http://") for b in (one, two)]
        proxy = stack.enter_context(haproxy(apps, tmp, port=proxy_port))
        yield Deployment(proxy, provider)


@pytest.fixture(scope="module")
def browser(deployment: Deployment) -> Iterator[Browser]:
    with chromium_page() as page:
        b = page.context.browser
        assert b is not None
        yield b


def _held_on(page: Page, proxy: Proxy, server: str) -> None:
    """Send the person's next requests to ``server``, as haproxy would after a failover."""
    page.context.add_cookies([{"name": COOKIE, "value": server, "url": proxy.base}])


def _sign_in_at_provider(page: Page, d: Deployment, subject: str, then_on: str) -> None:
    """From the workbench's sign-in gate to the provider and back: the sticky cookie is
    switched to ``then_on`` while the person is at the provider, so the provider sends them
    back to that server."""
    page.goto(d.proxy.base)
    wait_idle(page)
    expect(page.get_by_text("Sign in with your organisation account to continue.")).to_be_visible(
        timeout=TIMEOUT
    )
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Authorize Client")).to_be_visible(timeout=TIMEOUT)
    assert page.url.startswith(d.provider)
    _held_on(page, d.proxy, then_on)
    page.get_by_role("button", name=subject, exact=True).click()
    page.wait_for_url(re.compile(re.escape(d.proxy.base)), timeout=TIMEOUT)
    wait_idle(page)


def _server_of(page: Page) -> str:
    return next(c["value"] for c in page.context.cookies() if c["name"] == COOKIE)


def test_a_sign_in_started_on_one_server_finishes_on_the_other_and_holds_on_both(
    deployment: Deployment, browser: Browser
) -> None:
    d = deployment
    with person_on(browser, d.proxy, "app1", stays=False) as page:
        _sign_in_at_provider(page, d, "paula", then_on="app2")
        sidebar = page.get_by_test_id("stSidebar")
        expect(sidebar.get_by_text("Signed in as")).to_be_visible(timeout=TIMEOUT)
        expect(sidebar.get_by_text("Paula Kim · product owner")).to_be_visible(timeout=TIMEOUT)
        assert _server_of(page) == "app2"
        # back on the first server, which never saw the sign-in: still Paula
        _held_on(page, d.proxy, "app1")
        page.goto(f"{d.proxy.base}/thresholds")
        wait_idle(page)
        expect(page.get_by_role("heading", name="Thresholds", exact=True)).to_be_visible(
            timeout=TIMEOUT
        )
        expect(sidebar.get_by_text("Paula Kim · product owner")).to_be_visible(timeout=TIMEOUT)
        assert _server_of(page) == "app1"
        # a link naming someone else changes nothing with a provider: who signed in acts
        page.goto(f"{d.proxy.base}/?as=1")
        wait_idle(page)
        expect(sidebar.get_by_text("Paula Kim · product owner")).to_be_visible(timeout=TIMEOUT)
        sidebar.get_by_role("button", name="Sign out").click()
        # st.logout ends the session at the provider too (its end-session page), which
        # sends the browser back to the workbench
        expect(page.get_by_role("heading", name="End Session")).to_be_visible(timeout=TIMEOUT)
        page.get_by_role("button", name="End session").click()
        expect(
            page.get_by_text("Sign in with your organisation account to continue.")
        ).to_be_visible(timeout=TIMEOUT)
        # signed out on every server: the other one asks again too
        _held_on(page, d.proxy, "app2")
        page.goto(d.proxy.base)
        wait_idle(page)
        expect(
            page.get_by_text("Sign in with your organisation account to continue.")
        ).to_be_visible(timeout=TIMEOUT)
        expect(sidebar.get_by_text("Paula Kim · product owner")).to_have_count(0)


def test_an_unverified_or_unknown_address_is_refused_with_why(
    deployment: Deployment, browser: Browser
) -> None:
    d = deployment
    with person_on(browser, d.proxy, "app2", stays=False) as page:
        _sign_in_at_provider(page, d, "unverified", then_on="app1")
        expect(
            page.get_by_text(
                "This email address is not verified by the identity provider, so it is not "
                "accepted."
            )
        ).to_be_visible(timeout=TIMEOUT)
        expect(page.get_by_text("Signed in as")).to_have_count(0)
        page.get_by_role("button", name="Sign out").click()
        expect(page.get_by_role("heading", name="End Session")).to_be_visible(timeout=TIMEOUT)
        page.get_by_role("button", name="End session").click()
        _sign_in_at_provider(page, d, "stranger", then_on="app2")
        expect(
            page.get_by_text(re.compile(r"Your account is not registered in this workbench"))
        ).to_be_visible(timeout=TIMEOUT)
        expect(page.get_by_text("stranger@elsewhere.example")).to_be_visible(timeout=TIMEOUT)
        expect(page.get_by_text("Signed in as")).to_have_count(0)
