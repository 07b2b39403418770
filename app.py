"""Abstention Workbench: the router (page config, migrate-on-start, identity, navigation).

Every run ends in ``st.navigation``: when nobody may see the workbench yet (no users, not
signed in, invalid policy file) the navigation holds a single gate page. Never stopping
before it matters: a run without ``st.navigation`` makes Streamlit fall back to serving the
files in pages/ directly, without this router's identity check.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import streamlit as st
from sqlalchemy import Engine
from streamlit.runtime.scriptrunner import get_script_run_ctx
from streamlit.util import calc_hash

from pages import ui
from review.admin import navigation, signin, users
from review.admin.navigation import PageSpec
from review.core.errors import PermissionDenied, WorkbenchError
from review.core.identity import Actor, Permission, Role, roles_text
from review.traces import browse

USER_KEY = "wb_user_id"

# An emoji favicon is drawn in the browser; a Material icon here would be fetched from Google's
# font CDN on every page load (the workbench makes no request beyond its own server).
st.set_page_config(page_title="Abstention Workbench", page_icon="🚫", layout="wide")


# The one table of pages. ``work``: whose daily work the page is (listed first for them);
# ``open_to``: who can use it (empty: everyone); the others reach it by link only, where the
# page says who uses it (review/admin/navigation.py orders the menu per person).
_ANNOTATE = frozenset({Role.annotator})
_REVIEW = frozenset({Role.reviewer})
_DECIDE = frozenset({Role.product_owner, Role.compliance})
PAGES = (
    PageSpec("Workbench", "overview_page.py", "Overview", "home", "overview"),
    PageSpec("Workbench", "corpus_page.py", "Corpus", "description", "corpus"),
    PageSpec("Workbench", "cases_page.py", "Cases", "science", "cases"),
    PageSpec("Workbench", "builder_page.py", "Case builder", "construction", "builder"),
    PageSpec(
        "Workbench",
        "admin_page.py",
        "Admin",
        "admin_panel_settings",
        "admin",
        work=frozenset({Role.admin}),
        open_to=navigation.holders(Permission.manage_users),
    ),
    PageSpec("Workbench", "jobs_page.py", "Background work", "work_history", "jobs"),
    PageSpec(
        "Labels",
        "labeling_page.py",
        "Label",
        "label",
        "label",
        work=_ANNOTATE,
        open_to=navigation.holders(Permission.label),
    ),
    PageSpec("Labels", "agreement_page.py", "Agreement", "handshake", "agreement"),
    PageSpec(
        "Labels",
        "adjudication_page.py",
        "Adjudicate",
        "gavel",
        "adjudicate",
        work=_REVIEW,
        open_to=navigation.holders(Permission.adjudicate),
    ),
    PageSpec(
        "Labels",
        "exchange_page.py",
        "Labels in and out",
        "swap_horiz",
        "label-exchange",
        open_to=navigation.holders(Permission.exchange_labels),
    ),
    PageSpec(
        "Production",
        "traces_page.py",
        "Traces",
        "receipt_long",
        "traces",
        open_to=browse.VIEW_ROLES,
    ),
    PageSpec(
        "Production",
        "monitoring_page.py",
        "Monitoring",
        "monitoring",
        "monitoring",
        open_to=browse.VIEW_ROLES,
    ),
    PageSpec("Decide", "thresholds_page.py", "Thresholds", "tune", "thresholds", work=_DECIDE),
    PageSpec("Decide", "wording_page.py", "Wording", "speaker_notes", "wording", work=_DECIDE),
    PageSpec("Decide", "runs_page.py", "Runs", "play_circle", "runs", work=_DECIDE),
    PageSpec("Decide", "audit_page.py", "Audit", "fact_check", "audit", work=_REVIEW),
    PageSpec("Decide", "review_page.py", "Monthly review", "event_note", "review", work=_REVIEW),
)


def _page(spec: PageSpec, *, hidden: bool = False) -> Any:
    return st.Page(
        f"pages/{spec.file}",
        title=spec.title,
        icon=f":material/{spec.icon}:",
        url_path=spec.url_path,
        visibility="hidden" if hidden else "visible",
    )


def _current_page() -> str | None:
    """The address of the page this run opens (a link's path, or the page the browser is on),
    as Streamlit's run context states it; None when it does not say."""
    manager = getattr(get_script_run_ctx(), "pages_manager", None)
    name = getattr(manager, "intended_page_name", None)
    script = getattr(manager, "intended_page_script_hash", None)
    for spec in PAGES:
        if spec.url_path == name or (script and calc_hash(spec.url_path) == script):
            return spec.url_path
    return None


def _pages(actor: Actor) -> dict[str, list[Any]]:
    """The navigation of the workbench for ``actor``: the home page and their own work first
    (no header, so it cannot be collapsed), then the rest by section; the pages they cannot
    use are registered hidden, so a link to one opens it and it says who uses it (and the
    page they are on is listed, so it is always in the sidebar)."""
    plan = navigation.menu(PAGES, actor.roles, _current_page())
    out = {name: [_page(spec) for spec in specs] for name, specs in plan.sections}
    out.setdefault(navigation.MINE, []).extend(_page(spec, hidden=True) for spec in plan.hidden)
    out[navigation.MINE].insert(0, _front_door(out))
    return out


def _front_door(sections: dict[str, list[Any]]) -> Any:
    """The app's root address ("/"): it opens the home page at its own address.

    Streamlit serves its default page at "/" only, so a default Overview would answer
    /overview (the address links, bookmarks and the gate use) with "Page not found". Overview
    is an ordinary page instead, and the root switches to it keeping the query (``as``)."""
    home = next(p for pages in sections.values() for p in pages if p.url_path == navigation.HOME)

    def front_door() -> None:
        st.switch_page(home, query_params=st.query_params.to_dict())

    return st.Page(
        front_door, title=home.title, url_path="start", default=True, visibility="hidden"
    )


def _auth_configured() -> bool:
    try:
        return "auth" in st.secrets
    except Exception:  # no secrets file at all
        return False


def _workbench_setting(name: str) -> bool:
    """A yes/no setting of the deployment's ``[workbench]`` secrets section (off if absent)."""
    try:
        return bool(st.secrets.get("workbench", {}).get(name, False))
    except Exception:  # no secrets file at all
        return False


def _gate(title: str, body: Callable[[], None]) -> None:
    """Show one page instead of the workbench (still through st.navigation).

    The gate answers at the address of every page, so a deep link (``/cases?case=7``) keeps
    its address and query while the person signs in or picks their name; the next run, with
    someone acting, opens the page the link names."""

    def page() -> None:
        st.title("Abstention Workbench")
        body()

    gate = [st.Page(page, title=title, url_path="welcome", default=True)]
    gate += [st.Page(page, title=title, url_path=spec.url_path) for spec in PAGES]
    st.navigation(gate, position="hidden").run()


def _bootstrap_form(engine: Engine) -> None:
    st.info(
        "The database has no users yet. Create the first administrator account; "
        "that person can then add the team on the Admin page. "
        "(Or load the demo company with `workbench seed-demo`.)"
    )
    with st.form("bootstrap_admin"):
        email = st.text_input("Email")
        name = st.text_input("Name")
        ok = st.form_submit_button("Create administrator")
    if ok:
        with ui.reported():
            created = users.bootstrap_admin(engine, email, name)
            st.session_state[USER_KEY] = created.id  # the person who created it acts as it
            st.rerun()


_LOCAL_NOTE = (
    "Local mode: anyone with access to this app can pick any user. For a trusted "
    "single-team setup only; configure login in .streamlit/secrets.toml."
)


def _labels(people: list[users.UserView]) -> dict[int, str]:
    labels = {u.id: f"{u.name} · {', '.join(r.replace('_', ' ') for r in u.roles)}" for u in people}
    if len(set(labels.values())) < len(labels):
        labels = {u.id: f"{labels[u.id]} ({u.email})" for u in people}
    return labels


def _picker(labels: dict[int, str], refused: str | None) -> None:
    """The first page of a local-mode session: who is working (nobody is assumed)."""
    if refused:
        ui.error(refused)
    st.subheader("Who is working?")
    with st.form("wb_pick_user"):
        chosen = st.selectbox(
            "Your name",
            list(labels),
            index=None,
            format_func=labels.__getitem__,
            placeholder="Pick your name",
        )
        go = st.form_submit_button("Continue", type="primary")
    st.caption(_LOCAL_NOTE)
    if go:
        if chosen is None:
            ui.error("Pick your name first.")
            return
        st.session_state[USER_KEY] = chosen
        st.query_params["as"] = str(chosen)
        st.rerun()


def _confirm_switch(
    people: dict[int, users.UserView], choice: signin.LocalChoice, labels: dict[int, str]
) -> None:
    """A link named someone other than the user acting: ask before switching to them."""
    assert choice.confirm is not None and choice.instead_of is not None
    wanted, acting = people[choice.confirm], people[choice.instead_of]
    st.subheader(f"Continue as {ui.plain(_person(wanted))}?")
    st.write(
        f"The link you opened acts as {ui.plain(labels[wanted.id])}, but this browser was "
        f"acting as {ui.plain(labels[acting.id])}. A link never switches who is working "
        "without asking."
    )
    left, right = st.columns(2)
    yes = left.button(f"Continue as {ui.plain(_person(wanted))}", type="primary")
    no = right.button(f"Stay as {ui.plain(_person(acting))}")
    st.caption(_LOCAL_NOTE)
    if yes or no:
        chosen = wanted.id if yes else acting.id
        st.session_state[USER_KEY] = chosen
        st.query_params["as"] = str(chosen)
        st.rerun()


def _person(user: users.UserView) -> str:
    """'Ada Okafor (admin)': a user as the switch question names them."""
    return f"{user.name} ({', '.join(r.replace('_', ' ') for r in user.roles)})"


# Remembers in the browser whom it acts as (a session cookie holding the user id), so that a
# link opened in a new session can be checked against it. A constant: it copies the ``as`` of
# the address into the cookie while the "Acting as" picker is on the page, that is, while a
# user acts (never on the switch question, which does not draw the picker). The cookie's name
# is signin.REMEMBER_COOKIE (tests/pages/test_signin_pages.py keeps the two the same).
_REMEMBER_SCRIPT = (
    "<script>(function () {"
    " if (window.__wbActing) { return; } window.__wbActing = true;"
    " setInterval(function () {"
    "  if (!document.querySelector('.st-key-wb_user_pick')) { return; }"
    "  var who = new URLSearchParams(window.location.search).get('as');"
    "  if (who && /^[0-9]{1,10}$/.test(who)) {"
    "   document.cookie = 'wb_acting=' + who + '; path=/; SameSite=Strict';"
    "  }"
    " }, 250);"
    "})();</script>"
)


def _who_local(engine: Engine) -> Actor | None:
    people = users.list_users(engine, include_inactive=False)
    if not people:
        _gate("Set up", lambda: _bootstrap_form(engine))
        return None
    by_id = {u.id: u for u in people}
    labels = _labels(people)
    by_label = {v: k for k, v in labels.items()}
    # The chosen user lives in a plain session key: Streamlit drops the state of widgets in
    # the entrypoint when a pages/ folder exists, so the widget only reports changes.
    remembered = signin.remembered_user(
        st.context.cookies.get(signin.REMEMBER_COOKIE), by_id.keys()
    )
    choice = signin.local_choice(
        st.query_params.get("as"), st.session_state.get(USER_KEY), by_id.keys(), remembered
    )
    if choice.confirm is not None:
        _gate("Switch user?", lambda: _confirm_switch(by_id, choice, labels))
        return None
    if choice.user_id is None:
        st.session_state.pop(USER_KEY, None)
        st.session_state.pop(ui.LOCAL_AS_KEY, None)
        _gate("Who is working?", lambda: _picker(labels, choice.refused))
        return None
    current = choice.user_id
    st.session_state[USER_KEY] = current
    st.session_state[ui.LOCAL_AS_KEY] = current

    def _changed() -> None:
        # the person's own switch: the address follows it before the next run reads it, so
        # the old ``as`` is not taken for a link naming someone else
        picked = by_label[st.session_state["wb_user_pick"]]
        st.session_state[USER_KEY] = picked
        st.query_params["as"] = str(picked)

    options = list(labels.values())
    with st.sidebar:
        st.selectbox(
            "Acting as",
            options,
            index=options.index(labels[current]),
            key="wb_user_pick",
            on_change=_changed,
        )
        st.caption(_LOCAL_NOTE)
        chosen = st.session_state[USER_KEY]
        st.html(_REMEMBER_SCRIPT, unsafe_allow_javascript=True)
    st.query_params["as"] = str(chosen)
    return users.to_actor(by_id[chosen])


def _network_warning() -> None:
    """Local mode on an address other machines can reach, or reached through a reverse
    proxy (a team deployment, deploy/): said on every page."""
    if signin.through_proxy(st.context.headers):
        st.warning(
            "This workbench is open to the network in local mode, through a reverse proxy: "
            "anyone who can reach the proxy can act as any user, administrators included. "
            "Configure login ([auth] in the secrets file every server reads: deploy/README.md)."
        )
    elif signin.network_open(st.get_option("server.address")):
        st.warning(
            "This workbench is open to the network in local mode: anyone who can reach this "
            "address can act as any user, administrators included. Configure login in "
            ".streamlit/secrets.toml, or start it on 127.0.0.1 (the default of `make run`)."
        )


def _who_oidc(engine: Engine) -> Actor | None:
    if not st.user.is_logged_in:

        def login() -> None:
            st.write("Sign in with your organisation account to continue.")
            if st.button("Sign in", type="primary"):
                st.login()

        _gate("Sign in", login)
        return None
    try:
        email = signin.verified_email(
            st.user,
            provider_verifies_email=_workbench_setting("provider_verifies_email"),
        )
    except PermissionDenied as exc:
        reason = str(exc)

        def unverified() -> None:
            ui.error(reason)
            if st.button("Sign out"):
                st.logout()

        _gate("Not accepted", unverified)
        return None
    row = users.get_by_email(engine, email)
    if row is None or not row.active:

        def unknown() -> None:
            ui.error(
                "Your account is not registered in this workbench (or is deactivated). "
                "Ask an administrator to add your email with a role."
            )
            st.text(email)
            if st.button("Sign out"):
                st.logout()

        _gate("Not registered", unknown)
        return None
    with st.sidebar:
        st.caption("Signed in as")
        st.text(f"{row.name} · {roles_text(row.roles)}")
        if st.button("Sign out"):
            st.logout()
    return users.to_actor(row)


def main() -> None:
    try:
        ui.tax()
    except WorkbenchError as exc:
        message = str(exc)

        def broken() -> None:
            ui.error("The workbench cannot start: the taxonomy file is invalid.")
            st.code(message, language=None)

        _gate("Cannot start", broken)
        return
    try:
        engine = ui.engine()
    except WorkbenchError as exc:  # e.g. the migration lock was held past WORKBENCH_MIGRATE_WAIT
        reason = str(exc)

        def waiting() -> None:
            ui.error("The workbench cannot open its database yet.")
            st.code(reason, language=None)
            st.caption("Reload this page to try again.")

        _gate("Cannot start", waiting)
        return
    local = not _auth_configured()
    if local:
        _network_warning()
    actor = _who_local(engine) if local else _who_oidc(engine)
    if actor is None:
        st.session_state.pop(ui.ACTOR_KEY, None)
        return
    st.session_state[ui.ACTOR_KEY] = actor
    st.navigation(_pages(actor), expanded=True).run()


main()
