"""Monthly review: the month's signals, audit and decisions; findings, actions; the report."""

from __future__ import annotations

import datetime as dt
from typing import Any, cast

import altair as alt
import pandas as pd
import streamlit as st
from sqlalchemy import Engine

from pages import integrity, ui
from review.admin import users
from review.core import readable
from review.core.errors import WorkbenchError
from review.core.identity import Actor, Role
from review.core.taxonomy import Taxonomy
from review.evaluation import evalruns
from review.monthly import records, report, reviews, validation

NONE = "(none)"


MONTH_KEY = "rev_month"  # the review picker's state
GOTO_KEY = "rev_goto"  # a month to switch to on the next run (set after the picker is drawn)


@st.cache_data(ttl=600, show_spinner=False, max_entries=4)
def _gate_part(
    _engine: Engine, _tax: Taxonomy, _run: evalruns.RunRow, url: str, stamp: tuple[Any, ...]
) -> report.GatePart:
    return report.gate_part(_engine, _tax, _run)


@st.cache_data(ttl=600, show_spinner=False, max_entries=8)
def _live_context(
    _engine: Engine, _tax: Taxonomy, url: str, stamp: tuple[Any, ...]
) -> report.MonthContext:
    known = report.live_outputs_stamp(stamp)  # read once per script run

    def gate_of(run: evalruns.RunRow) -> report.GatePart:
        return _gate_part(_engine, _tax, run, url, report.gate_stamp(_engine, run, known))

    return report.live_context(_engine, _tax, str(stamp[0]), gate_of=gate_of)


def month_context(engine: Engine, tax: Taxonomy, month: str) -> report.MonthContext:
    """The month's context (report.month_context). A live one is read once per data stamp
    (report.live_stamp), and its newest run's gate and chart once per that run's stamp
    (report.gate_stamp: the same for every month after the run), so a rerun, a finding
    added or another month opened does not gather them again; people's names are read
    afresh."""
    url = str(engine.url)

    def live(m: str) -> report.MonthContext:
        got = _live_context(engine, tax, url, report.live_stamp(engine, m))
        return report.with_names(engine, got)

    return report.month_context(engine, tax, month, live=live)


def pick_month(engine: Engine, actor: Actor, can_write: bool) -> str | None:
    sessions = reviews.list_sessions(engine)
    months = [s.month for s in sessions]
    today = dt.date.today()
    if st.session_state.get(GOTO_KEY) in months:  # a month just opened: show it
        st.session_state[MONTH_KEY] = st.session_state.pop(GOTO_KEY)
    c1, c2 = st.columns([2, 1])
    picked: str | None = c1.selectbox(
        "Review",
        months,
        index=0 if months else None,
        key=MONTH_KEY,
        format_func=lambda m: f"{m} · {next(s.status for s in sessions if s.month == m)}",
        placeholder="No reviews yet",
    )
    if can_write:
        with c2.form("rev_open"):
            new_month = st.text_input(
                "Open the review of month (YYYY-MM)", f"{today.year:04d}-{today.month:02d}"
            )
            go = st.form_submit_button("Open review")
        here = ui.under("rev_open", where=c2)  # what the form did, right under it
        if go:
            with here, ui.reported():
                view, created = reviews.open_month(engine, actor, new_month.strip())
                # the picker is already drawn in this run: switch to the month in the next
                st.session_state[GOTO_KEY] = view.month
                ui.said(
                    "rev_open",
                    f"Opened the review of {view.month}."
                    if created
                    else f"The review of {view.month} already exists: switched to it.",
                )
                st.rerun()
    return picked


def _coloured(df: pd.DataFrame) -> Any:
    """A table with its pass/fail cells in colour, like the badges."""
    results = [c for c in ("result",) if c in df.columns]
    return df.style.map(report.result_style, subset=results) if results else df


def month_tab(ctx: report.MonthContext, sections: dict[str, pd.DataFrame]) -> None:
    titles = [t for t in sections if t.startswith("Release gate")]
    titles += [t for t, _ in ctx.extra_sections] + ["Policy and wording changes"]
    for title in titles:
        st.subheader(ui.plain(title))
        if title.startswith("Release gate") and report.gate_basis(ctx):
            st.caption(ui.plain(report.gate_basis(ctx)))
        df = sections[title]
        if df.empty:
            st.caption(ui.plain(report.empty_note(ctx, title)))
        else:
            st.dataframe(_coloured(df), hide_index=True, width="stretch")
    for title, chart in ctx.charts:
        st.subheader(ui.plain(title))
        st.altair_chart(cast(alt.Chart, chart), width="stretch")


def people_and_summary(
    engine: Engine, actor: Actor, view: records.SessionView, writable: bool
) -> None:
    emails = [u.email for u in users.list_users(engine, include_inactive=False)]
    names = users.display_names(engine)
    if not writable:
        people = ", ".join(readable.person(a, names) for a in view.attendees)
        st.caption("Attendees: " + ui.plain(people or "—"))
        ui.text(view.summary or "—", label="Summary")
        return
    with st.form(f"rev_people_{view.id}"):
        attendees = st.multiselect(
            "Attendees",
            emails,
            default=[a for a in view.attendees if a in emails],
            format_func=lambda e: readable.person(e, names),
        )
        summary = st.text_area("Summary", view.summary)
        if st.form_submit_button("Save attendees and summary"):
            with ui.reported():
                reviews.update_session(
                    engine, actor, view.id, view.version, attendees=attendees, summary=summary
                )
                st.rerun()


def findings(
    engine: Engine, actor: Actor, view: records.SessionView, can_write: bool, writable: bool
) -> None:
    st.subheader("Findings")
    if view.findings:
        st.dataframe(
            report.findings_frame(view, users.display_names(engine)),
            hide_index=True,
            width="stretch",
        )
        if can_write:
            c1, c2 = st.columns([2, 1])
            fid = c1.selectbox(
                "Carry a finding into the next month",
                [f.id for f in view.findings],
                key="rev_carry",
            )
            if c2.button("Carry into next month"):
                with ui.reported():
                    reviews.carry_finding(engine, actor, int(fid))
                    st.success(f"Carried into {ui.plain(records.next_month(view.month))}.")
    else:
        st.caption("(no findings yet)")
    if writable:
        with st.form(f"rev_finding_{view.id}", clear_on_submit=True):
            text = st.text_area("Finding")
            sev = st.selectbox("Severity", records.SEVERITIES, index=1)
            links = st.text_area(
                "Links, one per line as kind:reference (kinds: "
                + ui.plain(", ".join(records.LINK_KINDS))
                + "), e.g. case:CASE-005"
            )
            if st.form_submit_button("Add finding"):
                with ui.reported():
                    reviews.add_finding(
                        engine, actor, view.id, text, sev, records.parse_links(links)
                    )
                    st.rerun()


def actions(
    engine: Engine,
    actor: Actor,
    view: records.SessionView,
    sections: dict[str, pd.DataFrame],
    writable: bool,
) -> None:
    st.subheader("Actions")
    if view.actions:
        st.dataframe(sections["Actions"], hide_index=True, width="stretch")
    else:
        st.caption("(no actions yet)")
    if writable:
        with st.form(f"rev_action_{view.id}", clear_on_submit=True):
            text = st.text_input("Action")
            c1, c2 = st.columns(2)
            role = c1.selectbox("Owner role", [r.value for r in Role])
            due = c2.date_input("Due date", dt.date.today() + dt.timedelta(days=30))
            if st.form_submit_button("Add action"):
                with ui.reported():
                    reviews.add_action(engine, actor, view.id, text, role, due)
                    st.rerun()


def validation_tab(
    engine: Engine, actor: Actor, tax: Taxonomy, view: records.SessionView, writable: bool
) -> None:
    st.caption(
        "A dry run, by someone other than the author of the policy version it "
        "applies: each chosen case is re-decided from the gate signals its output logged, "
        "with that version, then checked: the share of answerable cases answered (with or "
        "without caveat) and of unanswerable cases given their expected behaviour, against "
        "the policy's targets; every refusal carries a reason and uses approved wording. "
        "Infrastructure failures and outputs that logged no signals count as failures. The "
        "result is stored with the review, with who ran it and on which version."
    )
    if view.validation:
        banner = validation.lacking_banner(view.validation)
        if banner:
            st.warning(ui.plain(banner))
        st.markdown("Result: " + readable.badge(view.validation.get("passed")))
        st.dataframe(
            _coloured(report.validation_frame(view, users.display_names(engine))),
            hide_index=True,
            width="stretch",
        )
        lacked = validation.lacking_frame(view.validation)
        if not lacked.empty:
            st.caption(ui.plain(validation.lacking_listed_caption(view.validation)))
            st.dataframe(lacked, hide_index=True, width="stretch")
    runs = evalruns.list_runs(engine)
    choices: list[tuple[int | None, str]] = []
    if writable and runs:
        try:
            choices = validation.validation_choices(engine)
        except WorkbenchError as exc:  # the policy in force was edited in the database
            ui.show_error(exc, "No dry run can be made: ")
    if choices:
        labels = [label for _, label in choices]
        with st.form(f"rev_validate_{view.id}"):
            version_label = st.selectbox("Policy version to dry-run", labels)
            c1, c2, c3 = st.columns(3)
            run_name = c1.selectbox("Run", [r.name for r in runs])
            split = c2.selectbox("Cases", ["validation", "test", "train", "all"])
            calibration = c3.selectbox(
                "Author's calibration run (counts within one case)",
                [NONE, *(r.name for r in runs)],
            )
            chosen = st.text_area(
                "Or the chosen cases: their keys, separated by spaces, commas or lines "
                "(for example 30 answerable and 10 unanswerable)",
                key=f"rev_validate_keys_{view.id}",
            )
            go = st.form_submit_button("Run and store the validation check")
        if go:
            run = next(r for r in runs if r.name == run_name)
            base = next((r.id for r in runs if r.name == calibration), None)
            number = choices[labels.index(version_label)][0]
            keys = validation.parse_case_keys(chosen)
            with ui.reported():
                result = validation.run_validation(
                    engine,
                    actor,
                    tax,
                    run.id,
                    split,
                    validation.refusal_templates(engine),
                    policy_version=number,
                    case_keys=keys or None,
                    calibration_run_id=base,
                )
                reviews.store_validation(engine, actor, view.id, result)
                st.rerun()
    if writable:
        st.divider()
        close_review(engine, actor, tax, view)


def close_review(engine: Engine, actor: Actor, tax: Taxonomy, view: records.SessionView) -> None:
    """Closing asks first: it cannot be undone."""
    confirm_key = f"rev_confirm_close_{view.id}"
    if not st.session_state.get(confirm_key):
        if st.button("Close this review…", help="Asks for confirmation first."):
            st.session_state[confirm_key] = True
            st.rerun()
        return
    with st.container(border=True):
        st.warning(
            f"Close the review of {ui.plain(view.month)}? This cannot be undone: the review "
            "becomes read-only for everyone, and the month's tables and charts are kept as "
            "they are now."
        )
        c1, c2, _ = st.columns([1, 1, 2])
        if c1.button("Yes, close it for good", type="primary"):
            st.session_state.pop(confirm_key, None)
            with ui.reported():
                reviews.close_session(engine, actor, view.id, view.version, tax)
                st.rerun()
        if c2.button("Cancel"):
            st.session_state.pop(confirm_key, None)
            st.rerun()


def report_tab(view: records.SessionView, ctx: report.MonthContext) -> None:
    st.download_button(
        "Download the report (self-contained HTML)",
        lambda: ui.charts_exported(lambda: report.export_html(view, ctx)),
        file_name=f"monthly-review-{view.month}.html",
        mime="text/html",
    )
    md, _ = report.export_markdown(view, ctx, render_images=False)
    st.download_button(
        "Download Markdown with PNG charts (zip)",
        lambda: ui.charts_exported(lambda: report.markdown_zip(view, ctx)),
        file_name=f"monthly-review-{view.month}.zip",
        mime="application/zip",
    )
    st.caption("Both files come from the same data; the HTML opens without any network access.")
    st.code(md, language=None)


def main() -> None:
    engine = ui.engine()
    actor = ui.actor()
    tax = ui.tax()
    can_write = any(r in actor.roles for r in reviews.REVIEW_ROLES)
    st.title("Monthly review")
    integrity.chain_banner(engine)
    picked = pick_month(engine, actor, can_write)
    if picked is None:
        st.info(
            "No monthly review yet. Open one for a month to gather its alerts, audits, "
            "release gate and policy changes in one record."
        )
        return
    view = reviews.get_session(engine, picked)
    if view is None:
        ui.error(f"There is no review of {picked}.")
        return
    ctx = month_context(engine, tax, picked)
    if view.closed:
        kept = (
            " The month's tables and charts are shown as they were when it was closed."
            if ctx.frozen_tables is not None
            else ""
        )
        when = f"{view.closed_at:%Y-%m-%d %H:%M}" if view.closed_at else "?"
        closer = readable.person(view.closed_by, ctx.names)
        st.info(f"Closed by {ui.plain(closer)} on {when}: read-only.{kept}")
    writable = can_write and not view.closed
    tab_month, tab_record, tab_validate, tab_report = st.tabs(
        ["The month", "Findings and actions", "Validation check", "Report"]
    )
    sections = dict(report.report_sections(view, ctx))
    with tab_month:
        month_tab(ctx, sections)
    with tab_record:
        people_and_summary(engine, actor, view, writable)
        findings(engine, actor, view, can_write, writable)
        actions(engine, actor, view, sections, writable)
    with tab_validate:
        validation_tab(engine, actor, tax, view, writable)
    with tab_report:
        report_tab(view, ctx)


if __name__ == "__main__":
    main()
