"""Abstention Workbench: the router (page config, migrate-on-start, identity, navigation)."""

from __future__ import annotations

import streamlit as st

from pages import ui
from review import users
from review.errors import InputError, PolicyFileError
from review.identity import Role

USER_KEY = "wb_user_id"

st.set_page_config(page_title="Abstention Workbench", page_icon="🛑", layout="wide")


def _auth_configured() -> bool:
    try:
        return "auth" in st.secrets
    except Exception:  # no secrets file at all
        return False


def _bootstrap_admin(engine) -> None:  # type: ignore[no-untyped-def]
    st.title("Abstention Workbench")
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
        try:
            users.bootstrap_admin(engine, email, name)
        except InputError as exc:
            st.error(str(exc))
        else:
            st.rerun()
    st.stop()


def _who_local(engine) -> None:  # type: ignore[no-untyped-def]
    people = users.list_users(engine, include_inactive=False)
    if not people:
        _bootstrap_admin(engine)
    by_id = {u.id: u for u in people}
    labels = {u.id: f"{u.name} · {', '.join(u.roles)}" for u in people}
    if len(set(labels.values())) < len(labels):
        labels = {u.id: f"{labels[u.id]} ({u.email})" for u in people}
    by_label = {v: k for k, v in labels.items()}
    # The chosen user lives in a plain session key: Streamlit drops the state of widgets in
    # the entrypoint when a pages/ folder exists, so the widget only reports changes.
    current = st.session_state.get(USER_KEY)
    if current not in by_id:
        current = people[0].id
        st.session_state[USER_KEY] = current

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
    st.session_state[ui.ACTOR_KEY] = users.to_actor(by_id[st.session_state[USER_KEY]])


def _who_oidc(engine) -> None:  # type: ignore[no-untyped-def]
    if not st.user.is_logged_in:
        st.title("Abstention Workbench")
        st.write("Sign in with your organisation account to continue.")
        if st.button("Sign in"):
            st.login()
        st.stop()
    email = str(st.user.get("email") or "")
    row = users.get_by_email(engine, email)
    if row is None or not row.active:
        st.title("Abstention Workbench")
        st.error(
            "Your account is not registered in this workbench (or is deactivated). "
            "Ask an administrator to add your email with a role."
        )
        st.text(email)
        if st.button("Sign out"):
            st.logout()
        st.stop()
    with st.sidebar:
        st.caption("Signed in as")
        st.text(f"{row.name} · {', '.join(row.roles)}")
        if st.button("Sign out"):
            st.logout()
    st.session_state[ui.ACTOR_KEY] = users.to_actor(row)


def main() -> None:
    try:
        ui.tax()
    except PolicyFileError as exc:
        st.error("The workbench cannot start: the taxonomy file is invalid.")
        st.code(str(exc), language=None)
        st.stop()
    engine = ui.engine()
    if _auth_configured():
        _who_oidc(engine)
    else:
        _who_local(engine)
    actor = ui.actor()
    pages = [
        st.Page(
            "pages/overview.py", title="Overview", icon="🏠", url_path="overview", default=True
        ),
        st.Page("pages/corpus.py", title="Corpus", icon="📄", url_path="corpus"),
        st.Page("pages/cases.py", title="Cases", icon="🧪", url_path="cases"),
    ]
    if Role.admin in actor.roles:
        pages.append(st.Page("pages/admin.py", title="Admin", icon="🔑", url_path="admin"))
    st.navigation(pages).run()


main()
