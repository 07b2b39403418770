"""The "History" tab of the Thresholds page: every policy version with its signatures, a diff
of any two, the rollback form (product owners and compliance), the check of the sign-off
chain, the approved policy to export, the metrics each signer saw, and whether the policy in
force reproduces the decisions production logged."""

from __future__ import annotations

import streamlit as st
from sqlalchemy import Engine

from pages import ui
from review.admin import users
from review.core.errors import InputError
from review.core.identity import Actor, Permission
from review.policy import display as policy_display
from review.policy import inforce, signoff
from review.policy.inforce import PolicyInForce
from review.thresholds import display, thresholds
from review.thresholds import replay as trace_replay
from review.traces import browse


def _compare(engine: Engine, allv: list[signoff.VersionView], pif: PolicyInForce) -> None:
    """Any two versions (or the shipped file); by default the change in force: the version
    in force against the version it replaced (its parent), never against a proposal that was
    not approved. Every picker and header names a version the same way."""
    in_force_id = pif.version.id if pif.version is not None else None
    views = {v.id: v for v in allv}
    shipped = f"{policy_display.SHIPPED} (policies/no-answer-policy.yaml)"
    options: list[int | None] = [*views, None]
    change = policy_display.in_force_change(allv, in_force_id)
    if change is not None:
        before, after = change
        a_default, b_default = (before.id if before else None), after.id
        st.caption(
            ui.plain(
                policy_display.change_caption(
                    before, after, in_force_id, shipped=shipped, versions=allv
                )
            )
        )
    else:
        a_default, b_default = None, allv[0].id
        st.caption(
            "Nothing is approved yet: the newest version against the shipped file, which is "
            "in force."
        )

    def heading(vid: int | None) -> str:
        return policy_display.version_heading(
            views.get(vid) if vid is not None else None,
            in_force_id,
            shipped=shipped,
            versions=allv,
        )

    c1, c2 = st.columns(2)
    # keyed by the version in force: a new approval starts again from the change in force
    a = c1.selectbox(
        "Compare",
        options,
        index=options.index(a_default),
        format_func=heading,
        key=f"thr_hist_a_{in_force_id}",
    )
    b = c2.selectbox(
        "with",
        options,
        index=options.index(b_default),
        format_func=heading,
        key=f"thr_hist_b_{in_force_id}",
    )
    shipped_text = thresholds.shipped_text()
    a_text = views[a].yaml_text if a is not None else shipped_text
    b_text = views[b].yaml_text if b is not None else shipped_text
    changes = display.changes_frame(a_text, b_text, users.display_names(engine))
    if changes.empty:
        st.caption("The two versions set the same values.")
    else:
        ui.table(
            changes,
            hide_index=True,
            width="stretch",
            height=ui.table_height(len(changes), 12),
            column_config={
                "before": st.column_config.TextColumn(heading(a)),
                "after": st.column_config.TextColumn(heading(b)),
            },
        )
    with st.expander("The file's lines that differ (YAML, as signed)"):
        st.code(
            thresholds.diff(a_text, b_text, heading(a), heading(b)) or "(identical)",
            language="diff",
        )


def _rollback(engine: Engine, actor: Actor, earlier: list[int]) -> None:
    with st.form("thr_rollback"):
        st.markdown("**Roll back** to an earlier approved version (signed again)")
        back = st.selectbox("Version to go back to", earlier, key="thr_rollback_to")
        why = st.text_area("Why (goes into the change record)", key="thr_rollback_why")
        if st.form_submit_button("Propose the rollback"):
            with ui.reported():
                rid = thresholds.propose_rollback(engine, actor, int(back), why)
                n = signoff.get_version(engine, rid).number
                st.success(f"Proposed as version {n:d}: it waits for sign-off.")


def _export(engine: Engine) -> None:
    approved_yaml: str | None
    try:
        approved_yaml = thresholds.export_approved(engine)
    except InputError:  # nothing approved yet: nothing to export
        approved_yaml = None
    if approved_yaml:
        st.download_button(
            "Export the approved policy (YAML)",
            approved_yaml,
            file_name="no-answer-policy.yaml",
            mime="application/yaml",
        )


def _snapshots(allv: list[signoff.VersionView]) -> None:
    with st.expander("Metrics snapshot stored with each signature"):
        for v in allv:
            for s in v.signatures:
                st.caption(ui.plain(display.signature_caption(v, s)))
                st.code(display.snapshot_json(s), language="json")


def _reproduce(engine: Engine, actor: Actor, pif: PolicyInForce) -> None:
    """Replay the policy in force on the logged signals and compare with what was logged."""
    st.subheader("Does the policy in force reproduce production?")
    if not browse.can_view(actor):
        st.caption("Replaying on production traces is open to those who may read traces.")
        return
    st.caption(
        "The policy in force applied to the logged signals of every imported trace and "
        "compared with the decision each trace logged. A difference means the assistant did "
        "not decide as this policy says (another version, or a bug); a trace that did not log "
        "what the gate needs is counted as not replayable, never as an answer."
    )
    if not st.button("Replay the policy in force on the traces", key="thr_reproduce"):
        return
    with ui.reported():
        name = f"Version {pif.version.number}" if pif.version else "The shipped policy"
        r = trace_replay.reproduce_logged(engine, actor, pif.policy)
        banner = trace_replay.lacking_banner(r.missing_signals)
        if banner:
            st.warning(ui.plain(banner))
        st.caption(ui.plain(trace_replay.reproduction_text(r, name)))
        if not r.differing.empty:
            st.dataframe(r.differing, hide_index=True, width="stretch")
            st.dataframe(r.examples, hide_index=True, width="stretch")


def history_tab(engine: Engine, actor: Actor, pif: PolicyInForce) -> None:
    allv = signoff.versions(engine, inforce.KIND)
    if not allv:
        st.info("No versions yet.")
        _reproduce(engine, actor, pif)
        return
    in_force_id = pif.version.id if pif.version is not None else None
    ui.table(
        display.history_frame(allv, in_force_id, users.display_names(engine)),
        hide_index=True,
        width="stretch",
    )
    _compare(engine, allv, pif)
    in_force_number = pif.version.number if pif.version is not None else None
    earlier = display.rollback_choices(allv, in_force_number)
    if actor.can(Permission.propose_policy) and earlier:
        _rollback(engine, actor, earlier)
    problems = signoff.verify_chain(engine)
    if problems:
        ui.error(display.chain_message(problems))
    else:
        st.success(ui.plain(display.chain_message(problems)))
    _export(engine)
    _snapshots(allv)
    _reproduce(engine, actor, pif)
