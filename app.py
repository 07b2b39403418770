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

from pages import ui
from review.admin import users
from review.core.errors import WorkbenchError
from review.core.identity import Actor, Role

USER_KEY = "wb_user_id"

# An emoji favicon is drawn in the browser; a Material icon here would be fetched from Google's
# font CDN on every page load (the workbench makes no request beyond its own server).
st.set_page_config(page_title="Abstention Workbench", page_icon="🚫", layout="wide")


def _auth_configured() -> bool:
    try:
        return "auth" in st.secrets
    except Exception:  # no secrets file at all
        return False


def _gate(title: str, body: Callable[[], None]) -> None:
    """Show one page instead of the workbench (still through st.navigation)."""

    def page() -> None:
        st.title("Abstention Workbench")
        body()

    st.navigation([st.Page(page, title=title, url_path="welcome", default=True)]).run()


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
            users.bootstrap_admin(engine, email, name)
            st.rerun()


def _who_local(engine: Engine) -> Actor | None:
    people = users.list_users(engine, include_inactive=False)
    if not people:
        _gate("Set up", lambda: _bootstrap_form(engine))
        return None
    by_id = {u.id: u for u in people}
    labels = {u.id: f"{u.name} · {', '.join(u.roles)}" for u in people}
    if len(set(labels.values())) < len(labels):
        labels = {u.id: f"{labels[u.id]} ({u.email})" for u in people}
    by_label = {v: k for k, v in labels.items()}
    # The chosen user lives in a plain session key: Streamlit drops the state of widgets in
    # the entrypoint when a pages/ folder exists, so the widget only reports changes.
    current = st.session_state.get(USER_KEY)
    wanted = st.query_params.get("as", "")
    if current is None and wanted.isdigit() and int(wanted) in by_id:
        current = int(wanted)  # a deep link made in local mode names who opened it
    if current not in by_id:
        current = people[0].id
    st.session_state[USER_KEY] = current
    st.session_state[ui.LOCAL_AS_KEY] = current

    def _changed() -> None:
        st.session_state[USER_KEY] = by_label[st.session_state["wb_user_pick"]]

    options = list(labels.values())
    with st.sidebar:
        st.selectbox(
            "Acting as",
            options,
            index=options.index(labels[current]),
            key="wb_user_pick",
            on_change=_changed,
        )
        st.caption(
            "Local mode: anyone with access to this app can pick any user. For a "
            "trusted single-team setup only; configure login in .streamlit/secrets.toml."
        )
    chosen = st.session_state[USER_KEY]
    st.query_params["as"] = str(chosen)
    return users.to_actor(by_id[chosen])


def _who_oidc(engine: Engine) -> Actor | None:
    if not st.user.is_logged_in:

        def login() -> None:
            st.write("Sign in with your organisation account to continue.")
            if st.button("Sign in", type="primary"):
                st.login()

        _gate("Sign in", login)
        return None
    email = str(st.user.get("email") or "")
    row = users.get_by_email(engine, email)
    if row is None or not row.active:

        def unknown() -> None:
            st.error(
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
        st.text(f"{row.name} · {', '.join(row.roles)}")
        if st.button("Sign out"):
            st.logout()
    return users.to_actor(row)


def main() -> None:
    try:
        ui.tax()
    except WorkbenchError as exc:
        message = str(exc)

        def broken() -> None:
            st.error("The workbench cannot start: the taxonomy file is invalid.")
            st.code(message, language=None)

        _gate("Cannot start", broken)
        return
    engine = ui.engine()
    actor = _who_oidc(engine) if _auth_configured() else _who_local(engine)
    if actor is None:
        st.session_state.pop(ui.ACTOR_KEY, None)
        return
    st.session_state[ui.ACTOR_KEY] = actor
    pages: dict[str, list[Any]] = {
        "Workbench": [
            st.Page(
                "pages/overview_page.py",
                title="Overview",
                icon=":material/home:",
                url_path="overview",
                default=True,
            ),
            st.Page(
                "pages/corpus_page.py",
                title="Corpus",
                icon=":material/description:",
                url_path="corpus",
            ),
            st.Page(
                "pages/cases_page.py", title="Cases", icon=":material/science:", url_path="cases"
            ),
            st.Page(
                "pages/builder_page.py",
                title="Case builder",
                icon=":material/construction:",
                url_path="builder",
            ),
        ],
        "Labels": [
            st.Page(
                "pages/labeling_page.py", title="Label", icon=":material/label:", url_path="label"
            ),
            st.Page(
                "pages/agreement_page.py",
                title="Agreement",
                icon=":material/handshake:",
                url_path="agreement",
            ),
            st.Page(
                "pages/adjudication_page.py",
                title="Adjudicate",
                icon=":material/gavel:",
                url_path="adjudicate",
            ),
        ],
        "Production": [
            st.Page(
                "pages/traces_page.py",
                title="Traces",
                icon=":material/receipt_long:",
                url_path="traces",
            ),
            st.Page(
                "pages/monitoring_page.py",
                title="Monitoring",
                icon=":material/monitoring:",
                url_path="monitoring",
            ),
        ],
        "Decide": [
            st.Page(
                "pages/runs_page.py", title="Runs", icon=":material/play_circle:", url_path="runs"
            ),
            st.Page(
                "pages/thresholds_page.py",
                title="Thresholds",
                icon=":material/tune:",
                url_path="thresholds",
            ),
            st.Page(
                "pages/wording_page.py",
                title="Wording",
                icon=":material/speaker_notes:",
                url_path="wording",
            ),
            st.Page(
                "pages/audit_page.py", title="Audit", icon=":material/fact_check:", url_path="audit"
            ),
            st.Page(
                "pages/review_page.py",
                title="Monthly review",
                icon=":material/event_note:",
                url_path="review",
            ),
        ],
    }
    if Role.admin in actor.roles:
        pages["Workbench"].append(
            st.Page(
                "pages/admin_page.py",
                title="Admin",
                icon=":material/admin_panel_settings:",
                url_path="admin",
            )
        )
    st.navigation(pages).run()


main()
