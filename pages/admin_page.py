"""Admin: users, roles and clearance (audited), the labeling, adjudication and restricted-trace
settings, the rebuilds of the restricted flags and the monitoring rollup (background jobs),
and the audit log."""

from __future__ import annotations

import streamlit as st
from sqlalchemy import Engine

from pages import job_controls, ui
from pages.traces.restriction_panel import unknown_documents_form
from review.admin import changelog, navigation, users
from review.core import readable
from review.core.errors import StaleWriteError, WorkbenchError
from review.core.identity import ROLE_HELP, Actor, Permission, Role
from review.labels import adjudication, labeling

ROLE_NAMES = [r.value for r in Role]
ROLE_HELP_TEXT = "\n".join(f"- **{readable.humanize(r.value)}**: {h}" for r, h in ROLE_HELP.items())


def add_user_form(engine: Engine, actor: Actor) -> None:
    with st.form("admin_add_user", clear_on_submit=True):
        st.subheader("Add a user")
        email = st.text_input("Email")
        name = st.text_input("Name")
        roles = st.multiselect(
            "Roles",
            ROLE_NAMES,
            format_func=readable.humanize,
            help=ROLE_HELP_TEXT,
            select_all=False,
        )
        clearance = st.checkbox("Clearance for restricted content")
        add = st.form_submit_button("Add user", type="primary")
    here = ui.under("admin_add_user")  # what the form did, right under it
    if add:
        with ui.reported(where=here):
            u = users.add_user(engine, actor, email, name, roles, clearance)
            ui.said("admin_add_user", f"Added {u.email}.")
            st.rerun()


def change_roles_form(engine: Engine, actor: Actor, people: list[users.UserView]) -> None:
    st.subheader("Change roles")
    if not people:
        return
    by_id = {u.id: u for u in people}
    pick: int = st.selectbox(
        "User", list(by_id), format_func=lambda i: by_id[i].email, key="admin_pick"
    )
    target = by_id[pick]
    # remember the version the form was opened on, so a concurrent change is refused
    opened = st.session_state.setdefault(f"admin_opened_{pick}", target.version)
    with st.form(f"admin_edit_{pick}"):
        new_name = st.text_input("Name", target.name)
        new_roles = st.multiselect(
            "Roles",
            ROLE_NAMES,
            default=list(target.roles),
            format_func=readable.humanize,
            help=ROLE_HELP_TEXT,
            select_all=False,
        )
        new_clear = st.checkbox("Clearance for restricted content", target.clearance)
        new_active = st.checkbox("Active", target.active)
        save = st.form_submit_button("Save")
    here = ui.under("admin_edit")  # what the form did, right under it
    if not save:
        return
    try:
        users.update_user(
            engine,
            actor,
            pick,
            int(opened),
            name=new_name,
            roles=new_roles,
            clearance=new_clear,
            active=new_active,
        )
    except WorkbenchError as exc:
        ui.show_error(exc, where=here)
        if isinstance(exc, StaleWriteError):
            st.session_state.pop(f"admin_opened_{pick}", None)
    else:
        st.session_state.pop(f"admin_opened_{pick}", None)
        ui.said("admin_edit", f"Saved {target.email}.")
        st.rerun()


def users_tab(engine: Engine, actor: Actor) -> None:
    people = users.list_users(engine)
    st.dataframe(users.users_frame(people), hide_index=True, width="stretch")
    left, right = st.columns(2)
    with left:
        add_user_form(engine, actor)
    with right:
        change_roles_form(engine, actor, people)


def settings_tab(engine: Engine, actor: Actor) -> None:
    cfg = labeling.get_settings(engine)
    st.session_state.setdefault("admin_label_opened", cfg.version)
    with st.form("admin_labeling"):
        overlap = st.number_input("Independent labels per case (overlap)", 1, 10, cfg.overlap)
        minutes = st.number_input(
            "Reservation of an opened case (minutes)", 1, 24 * 60, cfg.reservation_minutes
        )
        save_cfg = st.form_submit_button("Save labeling settings")
    here = ui.under("admin_labeling")
    if save_cfg:
        with ui.reported(where=here):
            labeling.set_settings(
                engine,
                actor,
                int(overlap),
                int(minutes),
                int(st.session_state["admin_label_opened"]),
            )
            st.session_state.pop("admin_label_opened", None)
            ui.said("admin_labeling", "Labeling settings saved.")
            st.rerun()


def adjudication_form(engine: Engine, actor: Actor) -> None:
    """Whether a reviewer may adjudicate a case they labeled themselves (off by default)."""
    cfg = adjudication.get_settings(engine)
    st.session_state.setdefault("admin_adj_opened", cfg.version)
    with st.form("admin_adjudication"):
        allowed = st.checkbox(
            "Reviewers may adjudicate cases they labeled themselves",
            cfg.self_adjudication,
            help="Off: a case a reviewer labeled waits for another reviewer's gold label.",
        )
        save = st.form_submit_button("Save adjudication setting")
    here = ui.under("admin_adjudication")
    if save:
        with ui.reported(where=here):
            adjudication.set_settings(
                engine, actor, bool(allowed), int(st.session_state["admin_adj_opened"])
            )
            st.session_state.pop("admin_adj_opened", None)
            ui.said("admin_adjudication", "Adjudication setting saved.")
            st.rerun()


def runs_section(engine: Engine) -> None:
    total = changelog.count_runs(engine)
    if not total:
        return
    st.subheader("Imports and purges")
    st.caption(
        "Each run is logged when it starts, after every committed batch and when it ends. "
        "A run that never ended is shown as interrupted, with the counts of its last "
        "committed batch; running it again completes it."
    )
    page = ui.paginate(total, "admin_runs", page_size=10)
    rows = changelog.recent_runs(engine, page=page)
    interrupted = [r for r in rows if r.status == "interrupted" and r.resumed_by is None]
    if interrupted:
        st.warning(
            f"{readable.count(len(interrupted), 'run')} on this page "
            f"{readable.plural(len(interrupted), 'was', 'were')} interrupted and not resumed: "
            "run them again to complete them."
        )
    st.dataframe(changelog.runs_frame(rows), hide_index=True, width="stretch")


def audit_log_tab(engine: Engine) -> None:
    runs_section(engine)
    st.subheader("Change log")
    ents = changelog.entities(engine)
    entity = st.selectbox(
        "Entity", ["", *ents], format_func=lambda v: v or "(all)", key="admin_audit_entity"
    )
    progress = st.checkbox(
        "Show progress entries (one per committed batch of an import or purge)",
        key="admin_audit_progress",
    )
    total = changelog.count_entries(engine, entity or None, progress)
    page = ui.paginate(total, "admin_audit")
    rows = changelog.entries(engine, entity or None, page=page, progress=progress)
    if not rows:
        st.info("No changes recorded yet.")
        return
    names = users.display_names(engine)
    st.dataframe(changelog.entries_frame(rows, names), hide_index=True, width="stretch")


REBUILDS = (
    (
        "admin_rebuild_restricted",
        "restricted_rebuild",
        "Rebuild the restricted flags",
        "Checks every trace's restricted flag against the rule and the corpus as they are now. "
        "Document changes and marks keep the flags in step; run it after a restore, an upgrade "
        "or a bulk load of traces or documents (workbench recompute-restricted).",
    ),
    (
        "admin_rebuild_rollup",
        "rollup_rebuild",
        "Rebuild the monitoring rollup",
        "Recounts the daily monitoring rollup from the traces. Imports and purges keep it in "
        "step; run it after writing traces into the database by other means "
        "(workbench rebuild-rollup).",
    ),
    (
        "admin_rebuild_agreement",
        "agreement_rebuild",
        "Rebuild the agreement figures",
        "Recounts the Agreement page's stored figures from the labels and the cases. Labeling "
        "and case edits keep them in step; run it after writing labels, slices or categories "
        "into the database by other means, or the page counts from every label "
        "(workbench labels rebuild-agreement).",
    ),
)


def maintenance_section(engine: Engine, actor: Actor) -> None:
    """The three rebuilds, each a background job (minutes on millions of traces): its
    progress, Cancel and outcome are said under its button."""
    st.subheader("Maintenance")
    for control, kind, label, caption in REBUILDS:
        st.caption(ui.plain(caption))
        pressed = st.button(ui.plain(label), key=control)
        here = ui.under(control)
        if pressed:
            with ui.reported("Nothing was rebuilt. ", where=here), st.spinner("Rebuilding…"):
                job_controls.start(engine, actor, control, kind, {}, job_controls.result_text)
                st.rerun()
        job_controls.watch(engine, actor, control, kind, job_controls.result_text, where=here)


def main() -> None:
    engine = ui.engine()
    actor = ui.actor()
    st.title("Admin")
    if not actor.can(Permission.manage_users):
        ui.not_for_you("Managing users", navigation.holders(Permission.manage_users), actor)
        return
    tab_users, tab_settings, tab_upkeep, tab_audit = st.tabs(
        ["Users and roles", "Settings", "Maintenance", "Audit log"]
    )
    with tab_users:
        users_tab(engine, actor)
    with tab_settings:
        settings_tab(engine, actor)
        adjudication_form(engine, actor)
        unknown_documents_form(engine, actor)
    with tab_upkeep:
        maintenance_section(engine, actor)
    with tab_audit:
        audit_log_tab(engine)


if __name__ == "__main__":
    main()
