"""Traces: import production traces, filter and page through them, open one (?trace=ID).

Every text that came from production (questions, chunks, context, answers, claims, ids, file
names, error messages quoting them) is shown with st.text, st.code or in dataframe cells.
"""

from __future__ import annotations

import datetime as dt
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from pages import ui
from review.core import uploads
from review.core.errors import (
    InputError,
    PermissionDenied,
    WorkbenchError,
)
from review.core.identity import Permission
from review.traces import browse, importer, retention
from review.traces.formats import FORMATS
from review.traces.model import FEEDBACK_VALUES

engine = ui.engine()
actor = ui.actor()
tax = ui.tax()
NEGATIVE = "(any negative)"
P = "traces_"  # session-state prefix


@st.cache_data(ttl=300, show_spinner=False)
def _facets(url: str, stamp: str) -> dict[str, list[str]]:
    return browse.facet_values(engine)


@st.cache_data(ttl=300, show_spinner=False)
def _version_keys(url: str, stamp: str) -> dict[str, list[str]]:
    return browse.version_keys(engine)


def _yes(v: object) -> str:
    return "—" if v is None else ("yes" if v else "no")


def _frame(rows: list[tuple[str, object]]) -> pd.DataFrame:
    return pd.DataFrame([(k, "—" if v is None else str(v)) for k, v in rows], columns=["", "value"])


def show_trace(pk: int) -> None:
    try:
        view = browse.get_trace(engine, actor, pk=pk)
    except WorkbenchError as exc:
        st.error(ui.plain(exc))
        return
    if view is None:
        st.error(f"Trace {pk} does not exist (it may have been purged by the retention rule).")
        return
    st.subheader(f"Trace {view.id}")
    st.text(f"{view.trace_id} · {view.at:%Y-%m-%d %H:%M:%S} UTC")
    if view.restricted:
        st.warning("Restricted trace: you see it because you have clearance. Do not share it.")
    dec = tax.decisions.get(view.decision or "")
    c1, c2, c3, c4 = st.columns(4)
    c1.metric("Decision", dec.label if dec else (view.decision or "not logged"))
    c2.metric("Top score", "—" if view.top_score is None else f"{view.top_score:.3f}")
    hits = view.hits_after_filter
    c3.metric("Hits after filtering", "—" if hits is None else hits)
    c4.metric("Chunks retrieved", len(view.chunks) + view.hidden_chunks)
    st.caption("Reason code")
    if view.reason_code:
        st.text(f"{view.reason_code}: {tax.definition('reason_codes', view.reason_code)}")
    else:
        st.text("(none logged)")
    if view.caveat:
        st.info("Answered with a caveat (reason support_below_threshold).")
    if view.missing_reason:
        st.error(
            "This decision has no logged reason: every decision other than an answer must log one."
        )

    ui.text(view.query, label="Question")
    if view.rewritten_query:
        ui.text(view.rewritten_query, label="Rewritten query (sent to retrieval)")
    ui.text(view.answer_text or "(no text)", label="Final text shown to the user")

    st.caption("Citations: each claim of the answer and the chunks it cites")
    if view.citations:
        st.dataframe(
            pd.DataFrame(
                [
                    {
                        "claim": c.claim,
                        "cites": ", ".join(c.chunk_ids) or "(nothing)",
                        "valid": c.valid,
                        "problems": "; ".join(c.problems),
                    }
                    for c in view.citations
                ]
            ),
            hide_index=True,
            width="stretch",
        )
    else:
        st.text("(no citations logged)")

    st.caption("Retrieved chunks, in rank order")
    if view.chunks:
        st.dataframe(
            pd.DataFrame(
                [
                    {
                        "rank": c.rank,
                        "score": c.score,
                        "chunk": c.chunk_id,
                        "document": c.doc_id,
                        "version": c.doc_version,
                        "effective": c.effective_date.isoformat() if c.effective_date else None,
                        "filtered by authorization": c.filtered,
                        "in context": _yes(c.in_context),
                        "cited": c.cited,
                        "text": c.text,
                    }
                    for c in view.chunks
                ]
            ),
            hide_index=True,
            width="stretch",
            column_config={
                "score": st.column_config.NumberColumn(format="%.3f"),
                "text": st.column_config.TextColumn(width="large"),
            },
        )
        with st.expander("Chunk texts in full"):
            for c in view.chunks:
                flag = " (filtered by authorization)" if c.filtered else ""
                ui.text(c.text or "(no text logged)", label=f"#{c.rank or '?'}{flag}")
                st.caption("chunk id")
                st.code(c.chunk_id, language=None)
    else:
        st.text("(no chunks retrieved)" if not view.hidden_chunks else "(no chunks you may see)")
    if view.hidden_chunks:
        st.caption(
            f"{view.hidden_chunks} chunk(s) removed by the authorization filter are hidden: "
            "they are shown only to users with clearance."
        )
    with st.expander("Context sent to the model"):
        st.text(view.context_sent or "(not logged)")

    left, right = st.columns(2)
    with left:
        st.caption("Signals the decision gate saw")
        st.dataframe(
            _frame(
                [
                    ("ranking mode", view.ranking_mode),
                    ("hits after filtering", view.hits_after_filter),
                    ("top score", view.top_score),
                    ("answerable (model)", _yes(view.answerable)),
                    ("ambiguous (model)", _yes(view.ambiguous)),
                    ("ungrounded (groundedness check)", _yes(view.ungrounded)),
                    ("feedback", view.feedback),
                    ("user role", view.user_role),
                    ("identity scopes", ", ".join(view.identity_scopes) or None),
                ]
            ),
            hide_index=True,
            width="stretch",
        )
    with right:
        st.caption("Versions")
        st.dataframe(_frame(sorted(view.versions.items())), hide_index=True, width="stretch")
        st.caption("Attributes (slices)")
        st.dataframe(_frame(sorted(view.attributes.items())), hide_index=True, width="stretch")
        st.caption("Redacted on import")
        st.dataframe(
            _frame(sorted(view.redactions.items()) or [("nothing", None)]),
            hide_index=True,
            width="stretch",
        )
        st.caption("Imported from")
        st.text(f"{view.import_source or '—'} at {view.imported_at:%Y-%m-%d %H:%M} UTC")


def import_panel() -> None:
    with st.expander("Import traces", expanded=browse.total_traces(engine) == 0):
        st.caption(
            "Canonical JSONL, OpenTelemetry OTLP/JSON lines (OpenInference or GenAI attributes), "
            "Langfuse observation exports or a flat CSV. A file lands whole or nothing is "
            "written and the line and field are named; with “skip bad lines” the rest is "
            "imported and the rejected lines can be downloaded. Re-importing adds nothing."
        )
        with st.form("traces_import", clear_on_submit=True):
            up = st.file_uploader(
                "Trace file",
                type=["jsonl", "ndjson", "json", "csv", "txt"],
                max_upload_size=uploads.widget_limit_mb(),
            )
            c1, c2, c3 = st.columns(3)
            fmt = c1.selectbox("Format", ["auto", *FORMATS], format_func=lambda f: f"{f}")
            skip_bad = c2.checkbox("Skip bad lines (and report them)")
            redact = True
            if actor.clearance:
                redact = c3.checkbox("Redact personal data", value=True)
            else:
                c3.caption("Personal data is redacted on import.")
            go = st.form_submit_button("Import traces", type="primary")
        if go:
            run_import(up, fmt, skip_bad, redact)
        done = st.session_state.get(f"{P}report")
        if done:
            st.success("Import finished.")
            st.text(done["summary"])
            if done.get("problems"):
                st.caption("First rejected lines")
                st.code("\n".join(done["problems"]), language=None)
            if done.get("rejects"):
                st.download_button(
                    "Download the rejected lines (JSONL)",
                    done["rejects"],
                    file_name="rejected-lines.jsonl",
                    mime="application/jsonl",
                )
        rows = importer.recent_imports(engine, limit=8)
        if rows:
            st.caption("Recent imports")
            st.dataframe(
                pd.DataFrame(
                    [
                        {
                            "id": r.id,
                            "source": r.source,
                            "format": r.format,
                            "status": r.status,
                            "added": r.added,
                            "skipped": r.skipped,
                            "rejected": r.rejected,
                            "redacted": ", ".join(
                                f"{v} {k}" for k, v in sorted(r.redactions.items()) if v
                            ),
                            "by": r.actor,
                            "started": r.started_at.strftime("%Y-%m-%d %H:%M"),
                        }
                        for r in rows
                    ]
                ),
                hide_index=True,
                width="stretch",
            )


def run_import(up: Any, fmt: str, skip_bad: bool, redact: bool) -> None:
    st.session_state.pop(f"{P}report", None)
    if up is None:
        st.error("Choose a file to import.")
        return
    data = up.getvalue()
    try:
        uploads.check_upload(up.name, len(data))
    except WorkbenchError as exc:
        st.error(ui.plain(exc))
        st.caption("Use the command line for large files: workbench import-traces FILE")
        return
    bar = st.progress(0.0, text="Checking the file…")

    def progress(phase: str, done: int, total: int | None) -> None:
        if phase == "checking":
            bar.progress(0.0, text=f"Checking the file… {done:,} trace(s) read")
        elif total:
            bar.progress(min(1.0, done / total), text=f"Writing… {done:,} of {total:,}")

    with tempfile.TemporaryDirectory(prefix="wb-rejects-") as tmp:
        rejects = Path(tmp) / "rejects.jsonl" if skip_bad else None
        try:
            report = importer.import_bytes(
                engine,
                actor,
                data,
                up.name,
                fmt,
                tax=tax,
                skip_bad=skip_bad,
                rejects_path=rejects,
                redact=redact,
                progress=progress,
            )
        except InputError as exc:
            bar.empty()
            st.error("Nothing was imported. The file has a problem:")
            st.code(str(exc), language=None)
            return
        except PermissionDenied as exc:
            bar.empty()
            st.error(ui.plain(exc))
            return
        bar.progress(1.0, text="Done")
        saved = rejects.read_bytes() if rejects is not None and rejects.exists() else b""
    st.session_state[f"{P}report"] = {
        "summary": report.summary(),
        "problems": report.problems,
        "rejects": saved if report.rejected else b"",
    }
    _facets.clear()
    _version_keys.clear()


def retention_panel() -> None:
    if not actor.can(Permission.manage_users):
        return
    with st.expander("Retention"):
        r = retention.get_retention(engine)
        # the version the form was opened at: a save after someone else's is refused
        opened = int(st.session_state.setdefault(f"{P}retention_version", r.version))
        if r.days is None:
            st.caption("No retention rule is set: traces are kept until someone purges them.")
        else:
            st.caption(
                f"Traces older than {r.days} day(s) are deleted when a purge runs "
                f"(set by {r.updated_by or '—'})."
            )
        with st.form("traces_retention"):
            days = st.number_input(
                "Keep traces for (days; 0 = no rule)",
                min_value=0,
                max_value=retention.MAX_RETENTION_DAYS,
                value=r.days or 0,
                step=1,
            )
            save = st.form_submit_button("Save retention rule")
        if save:
            try:
                retention.set_retention(engine, actor, int(days) or None, opened)
            except WorkbenchError as exc:
                st.error(ui.plain(exc))
                st.session_state[f"{P}retention_version"] = r.version  # now showing theirs
            else:
                st.session_state.pop(f"{P}retention_version", None)
                st.session_state[f"{P}flash"] = "Retention rule saved."
                st.rerun()
        if r.days is not None:
            sure = st.checkbox(
                f"I understand that traces older than {r.days} day(s) will be deleted "
                "(traces in audit samples are kept)",
                key=f"{P}purge_sure",
            )
            if st.button("Purge now", disabled=not sure):
                with ui.reported():
                    result = retention.apply_retention(engine, actor)
                    if result is not None:
                        st.session_state[f"{P}flash"] = result.summary()
                    _facets.clear()
                    st.rerun()


FILTER_PARAMS = (
    "from", "to", "decision", "reason", "negative", "feedback", "ungrounded", "empty",
    "missing_reason", "caveat", "vkey", "vval", "q", *browse.COLUMN_FILTERS,
)  # fmt: skip


def _init_from_query() -> None:
    """Deep links (e.g. from a monitoring alert) set the filters, once per distinct link."""
    q = st.query_params
    link = tuple(sorted((k, q[k]) for k in FILTER_PARAMS if k in q))
    if st.session_state.get(f"{P}applied") == link:
        return
    st.session_state[f"{P}applied"] = link
    if not link:
        return
    _reset_filters()

    def day(name: str) -> dt.date | None:
        try:
            return dt.date.fromisoformat(q.get(name, ""))
        except ValueError:
            return None

    if day("from"):
        st.session_state[f"{P}from"] = day("from")
    if day("to"):
        st.session_state[f"{P}to"] = day("to")
    if q.get("decision"):
        st.session_state[f"{P}decisions"] = [
            d for d in q["decision"].split(",") if d in tax.decisions or d == "(none)"
        ]
    if q.get("reason") in tax.reason_codes:
        st.session_state[f"{P}reason"] = q["reason"]
    if q.get("negative") == "1":
        st.session_state[f"{P}feedback"] = NEGATIVE
    elif q.get("feedback"):
        st.session_state[f"{P}feedback"] = q["feedback"]
    for flag, key in (
        ("ungrounded", "ungrounded"),
        ("empty", "empty"),
        ("missing_reason", "missing"),
        ("caveat", "caveat"),
    ):
        if q.get(flag) == "1":
            st.session_state[f"{P}{key}"] = True
    for name in browse.COLUMN_FILTERS:
        if q.get(name):
            st.session_state[f"{P}{name}"] = q[name]
    if q.get("vkey") and q.get("vval"):
        st.session_state[f"{P}vkey"] = q["vkey"]
        st.session_state[f"{P}vval"] = q["vval"]
    if q.get("q"):
        st.session_state[f"{P}q"] = q["q"]


def _reset_filters() -> None:
    keep = {f"{P}report", f"{P}applied", f"{P}flash"}
    for k in list(st.session_state):
        if isinstance(k, str) and k.startswith(P) and k not in keep:
            del st.session_state[k]


def _select(label: str, key: str, values: list[str], col: Any) -> str | None:
    current = st.session_state.get(f"{P}{key}")
    options = ["", *values]
    if current and current not in options:
        options.append(current)  # from a deep link: keep it selectable
    value = col.selectbox(label, options, key=f"{P}{key}", format_func=lambda v: v or "(any)")
    return value or None


def filters() -> tuple[browse.TraceFilter, str]:
    stamp = browse.data_stamp(engine)
    facets = _facets(str(engine.url), stamp)
    vkeys = _version_keys(str(engine.url), stamp)
    with st.container(border=True):
        c0, c1, c2, c3 = st.columns([3, 1, 1, 1])
        text = c0.text_input("Search question, answer or trace id", key=f"{P}q")
        date_from = c1.date_input("From", value=None, key=f"{P}from")
        date_to = c2.date_input("To (inclusive)", value=None, key=f"{P}to")
        sort = c3.selectbox(
            "Sort", list(browse.SORTS), format_func=browse.SORTS.__getitem__, key=f"{P}sort"
        )
        c0, c1, c2, c3 = st.columns([2, 1, 1, 1])
        decisions = c0.multiselect(
            "Decision",
            [*tax.decisions, "(none)"],
            key=f"{P}decisions",
            format_func=lambda d: tax.decisions[d].label if d in tax.decisions else "(not logged)",
        )
        reason = c1.selectbox(
            "Reason code",
            ["", *tax.reason_codes],
            key=f"{P}reason",
            format_func=ui.fmt_option(tax.reason_codes),
        )
        feedback_options = ["", NEGATIVE, *FEEDBACK_VALUES]
        extra = [v for v in facets.get("feedback", []) if v not in feedback_options]
        feedback = c2.selectbox(
            "Feedback",
            feedback_options + extra,
            key=f"{P}feedback",
            format_func=lambda v: v or "(any)",
        )
        ranking_mode = _select("Ranking mode", "ranking_mode", facets["ranking_mode"], c3)
        with st.expander("More filters: versions, slices, scores, flags"):
            c0, c1, c2, c3 = st.columns(4)
            policy_version = _select(
                "Policy version", "policy_version", facets["policy_version"], c0
            )
            model_version = _select("Model", "model_version", facets["model_version"], c1)
            vkey = _select("Other version", "vkey", list(vkeys), c2)
            vval = _select("… with value", "vval", vkeys.get(vkey or "", []), c3)
            c0, c1, c2, c3 = st.columns(4)
            language = _select("Language", "language", facets["language"], c0)
            tier = _select("Customer tier", "customer_tier", facets["customer_tier"], c1)
            doc_type = _select("Document type", "document_type", facets["document_type"], c2)
            user_role = _select("User role", "user_role", facets["user_role"], c3)
            c0, c1, _ = st.columns([1, 1, 2])
            score_min = c0.number_input("Top score at least", value=None, key=f"{P}smin")
            score_max = c1.number_input("Top score at most", value=None, key=f"{P}smax")
            c0, c1, c2, c3, c4 = st.columns(5)
            ungrounded = c0.checkbox("Ungrounded", key=f"{P}ungrounded")
            empty = c1.checkbox("Empty retrieval", key=f"{P}empty")
            missing = c2.checkbox("No logged reason", key=f"{P}missing")
            caveat = c3.checkbox("Caveat answers", key=f"{P}caveat")
            restricted_only = (
                c4.checkbox("Restricted only", key=f"{P}restricted") if actor.clearance else False
            )
    flt = browse.TraceFilter(
        date_from=date_from if isinstance(date_from, dt.date) else None,
        date_to=date_to if isinstance(date_to, dt.date) else None,
        decisions=tuple(decisions),
        reason_code=reason or None,
        feedback=feedback if feedback and feedback != NEGATIVE else None,
        negative_feedback=feedback == NEGATIVE,
        ranking_mode=ranking_mode,
        policy_version=policy_version,
        model_version=model_version,
        language=language,
        customer_tier=tier,
        document_type=doc_type,
        user_role=user_role,
        version_key=vkey,
        version_value=vval,
        score_min=score_min,
        score_max=score_max,
        text=text,
        ungrounded=ungrounded,
        empty_retrieval=empty,
        missing_reason=missing,
        caveat=caveat,
        restricted_only=restricted_only,
    )
    return flt, sort


def trace_list() -> None:
    flt, sort = filters()
    if flt.date_from and flt.date_to and flt.date_from > flt.date_to:
        st.error("The “From” date is after the “To” date.")
        return
    total = browse.count_traces(engine, actor, flt)
    page = ui.paginate(total, "traces")
    rows = browse.list_traces(engine, actor, flt, page=page, sort=sort)
    if not rows:
        if browse.total_traces(engine) == 0:
            st.info("No production traces yet: import a file above.")
        else:
            st.info("No traces match these filters.")
        return
    st.dataframe(
        pd.DataFrame(
            [
                {
                    "open": ui.link("traces", trace=r.id),
                    "time (UTC)": r.at.strftime("%Y-%m-%d %H:%M"),
                    "question": r.query,
                    "decision": r.decision or "(not logged)",
                    "reason": r.reason_code or "",
                    "top score": r.top_score,
                    "mode": r.ranking_mode,
                    "hits": r.hits_after_filter,
                    "feedback": r.feedback or "",
                    "policy": r.policy_version,
                    "restricted": r.restricted,
                }
                for r in rows
            ]
        ),
        hide_index=True,
        width="stretch",
        height=ui.table_height(len(rows)),
        column_config={
            "open": st.column_config.LinkColumn("open", display_text="open"),
            "top score": st.column_config.NumberColumn(format="%.3f"),
            "question": st.column_config.TextColumn(width="large"),
        },
    )
    if not actor.clearance:
        st.caption("Restricted traces are left out: they are shown only to users with clearance.")


st.title("Traces")
if not browse.can_view(actor):
    st.info(
        "Production traces are shown to reviewers, product owners, compliance and admins. "
        "Ask an administrator for one of those roles if you need to see them."
    )
    st.stop()

trace_param = ui.query_int("trace")
if trace_param is not None:
    if st.button("← All traces"):
        del st.query_params["trace"]
        st.rerun()
    show_trace(trace_param)
    st.stop()

flash = st.session_state.pop(f"{P}flash", None)
if flash:
    st.success(flash)
if actor.can(Permission.import_traces):
    import_panel()
retention_panel()
_init_from_query()
if st.button("Clear filters", key=f"{P}clear"):
    _reset_filters()
    for name in FILTER_PARAMS:
        if name in st.query_params:
            del st.query_params[name]
    st.session_state[f"{P}applied"] = ()
    st.rerun()
trace_list()
