"""Audit: reproducible stratified samples of production traces, a reviewer queue with verdicts
and claim-by-claim review, population estimates, promotion to cases, export."""

from __future__ import annotations

import datetime as dt
import io
from typing import Any

import altair as alt
import pandas as pd
import streamlit as st

from pages import ui
from review.audits import estimates, export, items, population, promote, queue, verdicts, vocabulary
from review.audits import plans as audit_plans
from review.core import terms
from review.core.errors import InputError, WorkbenchError
from review.core.identity import Permission
from review.core.terms import PlanStatus
from review.wording import production

engine = ui.engine()
actor = ui.actor()
tax = ui.tax()
can_audit = actor.can(Permission.audit)
PAGE_SIZE = 25
NOT_JUDGED = "(not judged)"


def next_uid() -> int:
    """A widget-key id for a claim row that stays unique across reruns of this session."""
    st.session_state["aud_uid"] = int(st.session_state.get("aud_uid", 0)) + 1
    return int(st.session_state["aud_uid"])


st.title("Audit")
st.caption(
    "Sample production traces reproducibly, judge each one (claim by claim for answers), and "
    "read the failure rates weighted back to the whole population."
)


@st.cache_data(ttl=300, show_spinner=False)
def _values(url: str, dim: str) -> list[str]:
    return audit_plans.dimension_values(engine, dim)


def values(dim: str) -> list[str]:
    return _values(str(engine.url), dim)


@st.cache_data(ttl=60, show_spinner="Counting the population…")
def _population_check(url: str, plan_id: int, status: str) -> audit_plans.PopulationCheck:
    return audit_plans.check_population(engine, plan_id)


def forget_counts() -> None:
    _population_check.clear()
    _values.clear()


def pct(v: Any) -> str:
    return "—" if v is None or pd.isna(v) else f"{100 * float(v):.1f} %"


# messages go into one fixed slot above the tabs, so the tabs keep their place (and the tab
# the reviewer is on) whether or not a message is shown
top = st.container()
flash = st.session_state.pop("aud_flash", None)
if flash:
    top.success(ui.plain(flash))

plans = audit_plans.list_plans(engine)
by_id = {p.id: p for p in plans}

# deep links: ?item=ID opens an item (and its plan), ?plan=ID selects a plan
deep_item = ui.query_int("item")
if deep_item is not None and st.session_state.get("aud_deep_done") != deep_item:
    st.session_state["aud_deep_done"] = deep_item
    with ui.reported(where=top):
        view = items.get_item(engine, actor, deep_item)
        if view is None:
            top.error(f"Audit item {deep_item} does not exist.")
        else:
            st.session_state["aud_plan"] = view.plan_id
            if can_audit and view.plan_status == PlanStatus.open:
                queue.reserve_item(engine, actor, deep_item)
            st.session_state[f"aud_item_{view.plan_id}"] = deep_item
deep_plan = ui.query_int("plan")
if deep_plan in by_id and "aud_plan" not in st.session_state:
    st.session_state["aud_plan"] = deep_plan

plan_id: int | None = None
if "aud_want_plan" in st.session_state:  # a plan just created: select it
    st.session_state["aud_plan"] = st.session_state.pop("aud_want_plan")
if plans:
    ids = [p.id for p in plans]
    if st.session_state.get("aud_plan") not in ids:
        st.session_state["aud_plan"] = ids[0]
    plan_id = st.selectbox(
        "Audit batch",
        ids,
        format_func=lambda i: (
            f"{by_id[i].name} · {by_id[i].status} · {by_id[i].complete}/{by_id[i].items} audited"
        ),
        key="aud_plan",
    )
    st.query_params["plan"] = str(plan_id)
plan = by_id.get(plan_id) if plan_id is not None else None

tab_plans, tab_queue, tab_est, tab_export = st.tabs(["Plans", "My queue", "Estimates", "Export"])

# ---------------------------------------------------------------------------------------------
# Plans

with tab_plans:
    if can_audit:
        with st.expander("New sampling plan", expanded=not plans):
            with st.form("aud_new_plan"):
                name = st.text_input(
                    "Plan name", placeholder="July 2025 monthly review", key="aud_name"
                )
                st.caption("Population: which traces (leave a filter empty for any)")
                c1, c2 = st.columns(2)
                date_from = c1.date_input("From (UTC)", value=None, key="aud_from")
                date_to = c2.date_input("To, inclusive (UTC)", value=None, key="aud_to")
                c1, c2, c3 = st.columns(3)
                f_dec = c1.multiselect(
                    "Decisions", [*tax.decisions, population.NONE], key="aud_f_dec"
                )
                f_reason = c2.multiselect("Reason codes", [*tax.reason_codes, population.NONE])
                f_feedback = c3.multiselect("User feedback", values("feedback"), key="aud_f_fb")
                c1, c2, c3 = st.columns(3)
                f_lang = c1.multiselect("Languages", values("language"))
                f_tier = c2.multiselect("Customer tiers", values("customer_tier"))
                f_doc = c3.multiselect("Document types", values("document_type"))
                c1, c2, c3 = st.columns(3)
                f_policy = c1.multiselect("Policy versions", values("policy_version"))
                f_model = c2.multiselect("Model versions", values("model_version"))
                f_index = c3.multiselect(
                    "Index versions", values("version.index"), key="aud_f_index"
                )
                c1, c2, c3 = st.columns(3)
                f_prompt = c1.multiselect(
                    "Prompt versions", values("version.prompt"), key="aud_f_prompt"
                )
                f_embedding = c2.multiselect(
                    "Embedding models", values("version.embedding"), key="aud_f_embedding"
                )
                f_reranker = c3.multiselect(
                    "Rerankers", values("version.reranker"), key="aud_f_reranker"
                )
                f_attr = st.text_input(
                    "Trace attribute filter (key=value1,value2)",
                    help="For example region=EU,UK. One attribute.",
                    key="aud_f_attr",
                )
                include_restricted = st.checkbox(
                    "Include restricted traces (only reviewers with clearance audit them)",
                    value=True,
                )
                st.caption("Sample")
                strata = st.multiselect(
                    "Strata",
                    list(population.DIMENSIONS),
                    format_func=lambda d: population.DIMENSIONS[d],
                    help="Each combination of values is one stratum.",
                    key="aud_strata",
                )
                attr_strata = st.text_input(
                    "Also stratify by trace attributes (comma-separated names)", ""
                )
                c1, c2, c3, c4 = st.columns(4)
                allocation = c1.radio("Allocation", audit_plans.ALLOCATIONS, key="aud_alloc")
                total = int(
                    c2.number_input("Sample size", 1, audit_plans.MAX_TOTAL, 100, key="aud_total")
                )
                seed = int(c3.number_input("Seed", 0, audit_plans.MAX_SEED, 0, key="aud_seed"))
                overlap = int(c4.number_input("Reviewers per trace", 1, 5, 1, key="aud_overlap"))
                blind = st.checkbox(
                    "Blind review: a reviewer sees other verdicts only after giving theirs",
                    value=True,
                )
                explicit = st.text_area(
                    "Explicit sizes (one 'stratum: size' per line; only for explicit)",
                    height=90,
                    key="aud_explicit",
                )
                b1, b2 = st.columns(2)
                preview = b1.form_submit_button("Count the population")
                create = b2.form_submit_button("Create plan", type="primary")
            if preview or create:
                with ui.reported("Nothing was created. "):
                    attributes: tuple[tuple[str, tuple[str, ...]], ...] = ()
                    if f_attr.strip():
                        key, sep, vals = f_attr.partition("=")
                        if not sep or not key.strip() or not vals.strip():
                            raise InputError("attribute filter: write key=value1,value2")
                        attributes = (
                            (key.strip(), tuple(v.strip() for v in vals.split(",") if v.strip())),
                        )
                    flt = population.PopulationFilter(
                        date_from=date_from if isinstance(date_from, dt.date) else None,
                        date_to=date_to if isinstance(date_to, dt.date) else None,
                        decisions=tuple(f_dec),
                        reason_codes=tuple(f_reason),
                        feedback=tuple(f_feedback),
                        languages=tuple(f_lang),
                        customer_tiers=tuple(f_tier),
                        document_types=tuple(f_doc),
                        policy_versions=tuple(f_policy),
                        model_versions=tuple(f_model),
                        index_versions=tuple(f_index),
                        prompt_versions=tuple(f_prompt),
                        embedding_versions=tuple(f_embedding),
                        reranker_versions=tuple(f_reranker),
                        attributes=attributes,
                        include_restricted=include_restricted,
                    )
                    dims = tuple(strata) + tuple(
                        f"attr.{a.strip()}" for a in attr_strata.split(",") if a.strip()
                    )
                    if preview:
                        counts = audit_plans.count_population(engine, flt, dims)
                        st.caption(
                            ui.plain(
                                f"{sum(c.count for c in counts)} traces in "
                                f"{len(counts)} strata ({flt.describe()})"
                            )
                        )
                        st.dataframe(
                            pd.DataFrame(
                                [{"stratum": c.stratum, "traces": c.count} for c in counts],
                                columns=["stratum", "traces"],
                            ),
                            hide_index=True,
                            width="stretch",
                            height=ui.table_height(len(counts), 12),
                        )
                    else:
                        spec = audit_plans.PlanSpec(
                            name=name,
                            filter=flt,
                            strata=dims,
                            allocation=str(allocation),
                            total=total,
                            seed=seed,
                            explicit_sizes=(
                                audit_plans.parse_explicit_sizes(explicit)
                                if allocation == "explicit"
                                else None
                            ),
                            overlap=overlap,
                            blind=blind,
                        )
                        new_id = audit_plans.create_plan(engine, actor, spec)
                        forget_counts()
                        st.session_state["aud_want_plan"] = new_id
                        st.session_state["aud_flash"] = (
                            f"Plan {spec.name.strip()!r} created. Check the allocation, "
                            "then draw the sample."
                        )
                        st.rerun()
    else:
        st.info("Plans are created and drawn by reviewers; you can read them and the estimates.")

    if not plans:
        st.info(
            "No sampling plans yet. A reviewer creates one above from the imported production "
            "traces."
        )
    else:
        st.dataframe(
            pd.DataFrame(
                [
                    {
                        "plan": p.name,
                        "status": p.status,
                        "population": p.population_total,
                        "sample": sum(p.allocation.values()),
                        "audited": p.complete,
                        "verdicts": p.verdicts,
                        "strata": ", ".join(p.spec.strata) or "none",
                        "allocation": p.spec.allocation,
                        "seed": p.spec.seed,
                        "population filter": p.spec.filter.describe(),
                        "created by": p.created_by,
                        "created": p.created_at,
                    }
                    for p in plans
                ]
            ),
            hide_index=True,
            width="stretch",
            height=ui.table_height(len(plans), 8),
        )
    if plan is not None:
        st.subheader(ui.plain(plan.name))
        st.caption(
            f"{plan.status} · {plan.spec.allocation} allocation of {plan.spec.total} · seed "
            f"{plan.spec.seed} · {plan.spec.overlap} reviewer(s) per trace · "
            f"{'blind' if plan.spec.blind else 'open'} review · population counted "
            f"{plan.counted_at[:16].replace('T', ' ')} UTC · fingerprint {plan.fingerprint[:17]}…"
        )
        st.dataframe(
            plan.strata_frame(),
            hide_index=True,
            width="stretch",
            height=ui.table_height(len(plan.population), 10),
            column_config={
                "weight": st.column_config.NumberColumn(
                    "weight (population / sample)", format="%.2f"
                )
            },
        )
        check = _population_check(str(engine.url), plan.id, plan.status)
        if check.changed:
            st.warning(
                ui.plain(check.message())
                + (
                    " Recount before drawing."
                    if plan.status == PlanStatus.planned
                    else " The sample and its weights keep the counts of the draw."
                )
            )
        else:
            st.caption(ui.plain(check.message()))
        if can_audit:
            c1, c2, c3 = st.columns(3)
            if plan.status == PlanStatus.planned:
                if c1.button("Draw the sample", type="primary", key="aud_draw"):
                    try:
                        res = audit_plans.draw_plan(engine, actor, plan.id)
                    except WorkbenchError as exc:
                        forget_counts()
                        st.error(ui.plain(exc))
                    else:
                        st.session_state["aud_flash"] = (
                            f"Drew {res.items} traces into {plan.name!r}; the queue is open."
                        )
                        st.rerun()
                if c2.button("Recount the population", key="aud_recount"):
                    with ui.reported():
                        audit_plans.recount_plan(engine, actor, plan.id)
                        forget_counts()
                        st.session_state["aud_flash"] = "Population counted again."
                        st.rerun()
            if plan.status == PlanStatus.open and c1.button("Close the batch", key="aud_close"):
                with ui.reported():
                    audit_plans.close_plan(engine, actor, plan.id)
                    st.session_state["aud_flash"] = f"{plan.name!r} is closed."
                    st.rerun()
            if plan.status != PlanStatus.planned and c3.button(
                "Check reproducibility", key="aud_verify"
            ):
                same = audit_plans.verify_sample(engine, plan.id)
                if same is True:
                    st.success("Drawing this plan again gives exactly the stored sample.")
                elif same is None:
                    st.warning("The population changed, so a new draw would differ.")
                else:
                    st.error("A new draw differs from the stored sample.")
        if plan.status != PlanStatus.planned:
            n_items = queue.count_items(engine, plan.id)
            page = ui.paginate(n_items, f"aud_items_{plan.id}", PAGE_SIZE)
            rows = queue.list_items(engine, plan.id, page, PAGE_SIZE)
            st.dataframe(
                pd.DataFrame(
                    [
                        {
                            "#": r.position,
                            "trace": r.trace_id,
                            "stratum": r.stratum,
                            "decision": r.decision,
                            "feedback": r.feedback,
                            "restricted": r.restricted,
                            "verdicts": r.reviewers,
                            "verdict": vocabulary.VERDICTS.get(r.outcome or "", ""),
                            "held by": r.reserved_by or "",
                            "open": ui.link("audit", item=r.id),
                        }
                        for r in rows
                    ]
                ),
                hide_index=True,
                width="stretch",
                height=ui.table_height(len(rows)),
                column_config={"open": st.column_config.LinkColumn("open", display_text="open")},
            )

# ---------------------------------------------------------------------------------------------
# My queue


def claims_key(item_id: int) -> str:
    return f"aud_claims_{item_id}"


def start_claims(view: items.ItemView, mine: verdicts.VerdictView | None) -> None:
    drafts = (
        mine.claim_drafts
        if mine and mine.claims
        else items.propose_claims(view.answer_text, view.citations)
    )
    st.session_state[claims_key(view.id)] = [
        {"uid": next_uid(), "text": d.text, "cited": ", ".join(d.cited), "verdict": d.verdict}
        for d in drafts
    ]


def show_item(view: items.ItemView) -> None:
    st.subheader(f"Trace {ui.plain(view.trace_id)}")
    st.caption(
        ui.plain(
            f"item {view.position} of {plan.items if plan else '?'} · stratum {view.stratum} · "
            f"{view.at:%Y-%m-%d %H:%M} UTC · decision {view.decision or '—'}"
            f"{' (' + view.reason_code + ')' if view.reason_code else ''} · feedback "
            f"{view.feedback or '—'}{' · RESTRICTED' if view.restricted else ''}"
        )
    )
    ui.text(view.query, label="Query")
    if view.rewritten_query:
        ui.text(view.rewritten_query, label="Rewritten query")
    ui.text(view.answer_text or "(no text)", label="What the assistant said")
    signals = {
        "ranking mode": view.ranking_mode,
        "hits after filter": view.hits_after_filter,
        "top score": view.top_score,
        "answerable": view.answerable,
        "ambiguous": view.ambiguous,
        "ungrounded": view.ungrounded,
        **{f"version: {k}": v for k, v in view.versions.items()},
    }
    st.dataframe(
        pd.DataFrame(
            [{"signal": k, "value": "—" if v is None else str(v)} for k, v in signals.items()]
        ),
        hide_index=True,
        width="stretch",
        height=ui.table_height(len(signals), 8),
    )
    st.caption(f"Retrieved chunks ({len(view.chunks)}; {len(view.context_ids)} reached the model)")
    if view.chunks:
        st.dataframe(
            pd.DataFrame(
                [
                    {
                        "rank": c.rank,
                        "chunk": c.chunk_id,
                        "document": f"{c.doc_id}@{c.doc_version}" if c.doc_id else "",
                        "score": c.score,
                        "in context": not c.filtered,
                        "text": c.text,
                    }
                    for c in view.chunks
                ]
            ),
            hide_index=True,
            width="stretch",
            height=ui.table_height(len(view.chunks), 10),
        )
    else:
        st.info("Retrieval returned nothing for this request.")


def claim_editor(view: items.ItemView) -> list[items.ClaimDraft]:
    key = claims_key(view.id)
    rows: list[dict[str, Any]] = st.session_state[key]
    st.caption(
        "Each claim with the chunk ids it cites (comma-separated). The answer passes only if "
        "every claim is supported by a chunk that was in the context."
    )
    drafts: list[items.ClaimDraft] = []
    remove: int | None = None
    for n, row in enumerate(rows, start=1):
        uid = row["uid"]
        c1, c2, c3, c4 = st.columns([6, 3, 2, 1])
        row["text"] = c1.text_area(
            f"Claim {n}", row["text"], key=f"aud_ct_{view.id}_{uid}", height=68
        )
        row["cited"] = c2.text_input(
            f"Cites (claim {n})", row["cited"], key=f"aud_cc_{view.id}_{uid}"
        )
        opts = [NOT_JUDGED, *terms.CLAIM_VERDICTS]
        chosen = c3.selectbox(
            f"Verdict (claim {n})",
            opts,
            index=opts.index(row["verdict"]) if row["verdict"] in opts else 0,
            key=f"aud_cv_{view.id}_{uid}",
        )
        row["verdict"] = None if chosen == NOT_JUDGED else chosen
        if c4.button("✕", key=f"aud_cr_{view.id}_{uid}", help=f"Remove claim {n}"):
            remove = uid
        drafts.append(
            items.ClaimDraft(
                row["text"],
                tuple(x.strip() for x in row["cited"].split(",") if x.strip()),
                row["verdict"],
            )
        )
    if remove is not None:
        st.session_state[key] = [r for r in rows if r["uid"] != remove]
        st.rerun()
    b1, b2, _ = st.columns([1, 1, 3])
    if b1.button("Add a claim", key=f"aud_add_{view.id}"):
        rows.append({"uid": next_uid(), "text": "", "cited": "", "verdict": None})
        st.rerun()
    if b2.button("Split the answer again", key=f"aud_resplit_{view.id}"):
        start_claims(view, None)
        st.rerun()
    if drafts and all(d.text.strip() for d in drafts):
        report = items.check_claims(drafts, view.context_ids)
        frame = report.to_frame()
        st.dataframe(
            frame, hide_index=True, width="stretch", height=ui.table_height(len(frame), 10)
        )
        verdict_text = {True: "passes", False: "fails", None: "not decided yet"}
        st.caption(
            f"Answer {verdict_text[report.answer_passes]} · citations valid: "
            f"{ {True: 'yes', False: 'no', None: 'not yet'}[report.citations_valid] } · "
            f"{report.counts.get('supported', 0)} of {report.counts.get('claims', 0)} "
            "claims supported"
        )
    return drafts


with tab_queue:
    if not can_audit:
        st.info("Auditing is for reviewers. Your roles do not include it.")
    elif plan is None:
        st.info("No audit batch yet: create and draw a plan on the Plans tab.")
    elif plan.status == PlanStatus.planned:
        st.info("This plan is not drawn yet: draw the sample on the Plans tab.")
    else:
        prog = queue.progress(engine, actor, plan.id)
        c1, c2, c3 = st.columns(3)
        c1.metric("Judged by me", prog.mine)
        c2.metric(f"Traces with {prog.overlap} verdict(s)", f"{prog.complete} / {prog.items}")
        c2.progress(prog.complete / prog.items if prog.items else 0.0)
        c3.metric("Verdicts in all", prog.verdicts)
        if prog.waiting_for_clearance:
            st.caption(
                f"{prog.waiting_for_clearance} restricted trace(s) wait for a reviewer with "
                "clearance."
            )
        item_key = f"aud_item_{plan.id}"
        skipped_key = f"aud_skipped_{plan.id}"
        st.session_state.setdefault(skipped_key, [])

        def load_next() -> None:
            assert plan is not None
            nxt = queue.next_item(engine, actor, plan.id, exclude=st.session_state[skipped_key])
            st.session_state[item_key] = nxt
            if nxt is None:
                st.query_params.pop("item", None)
            else:
                st.query_params["item"] = str(nxt)

        item_id = st.session_state.get(item_key)
        if plan.status != PlanStatus.open:
            st.info(f"This batch is {ui.plain(plan.status)}: no more verdicts are taken.")
        if item_id is None:
            if plan.status == PlanStatus.open and st.button(
                "Next trace", type="primary", key="aud_next0"
            ):
                load_next()
                st.rerun()
            if st.session_state[skipped_key] and st.button("Bring skipped traces back"):
                st.session_state[skipped_key] = []
                st.rerun()
            if prog.complete >= prog.items and prog.items:
                st.success("Every trace of this batch has its verdicts.")
        else:
            try:
                view = items.get_item(engine, actor, int(item_id))
            except WorkbenchError as exc:
                st.error(ui.plain(exc))
                view = None
            if view is not None and view.plan_id != plan.id:
                view = None
            if view is None:
                st.session_state[item_key] = None
                if st.button("Next trace", key="aud_next_missing"):
                    load_next()
                    st.rerun()
            else:
                show_item(view)
                wording = production.trace_findings(engine, actor, view.trace_pk)
                if wording.findings:
                    with st.container(border=True):
                        st.markdown("**Refusal wording check** (the wording in force)")
                        st.caption(
                            "The final text breaks these wording rules; if they hold, the "
                            "verdict is a wording violation."
                        )
                        st.dataframe(
                            pd.DataFrame(
                                [
                                    {
                                        "rule": f.rule,
                                        "excerpt": f.excerpt,
                                        "why": f.explanation,
                                    }
                                    for f in wording.findings
                                ]
                            ),
                            hide_index=True,
                            width="stretch",
                        )
                mine = verdicts.my_verdict(engine, actor, view.id)
                st.divider()
                st.subheader("Your verdict" + (" (edit)" if mine else ""))
                verdict_opts = list(vocabulary.VERDICTS)
                verdict = st.radio(
                    "Verdict",
                    verdict_opts,
                    index=verdict_opts.index(mine.verdict) if mine else None,
                    format_func=lambda v: vocabulary.VERDICTS[v],
                    key=f"aud_verdict_{view.id}",
                )
                stages = st.multiselect(
                    "Where it failed (stage)",
                    list(vocabulary.STAGES),
                    default=list(mine.stages) if mine else [],
                    format_func=lambda s: vocabulary.STAGES[s],
                    key=f"aud_stages_{view.id}",
                    help="Required for a false refusal, an unsupported or a partially "
                    "supported answer; empty for a correct refusal or a supported answer.",
                )
                notes = st.text_area(
                    "Notes",
                    mine.notes if mine else "",
                    key=f"aud_notes_{view.id}",
                    height=80,
                    help="Required for a leak or a wording violation; never paste restricted text.",
                )
                has_answer = bool(view.answer_text.strip())
                review_claims = st.checkbox(
                    "Review the answer claim by claim",
                    value=bool(mine.claims) if mine else view.decision in ("answer", "partial"),
                    key=f"aud_claimreview_{view.id}",
                    disabled=not has_answer,
                )
                drafts: list[items.ClaimDraft] = []
                if review_claims and has_answer:
                    if claims_key(view.id) not in st.session_state:
                        start_claims(view, mine)
                    drafts = claim_editor(view)
                b1, b2, _ = st.columns([1, 1, 3])
                save = b1.button(
                    "Save verdict",
                    type="primary",
                    key=f"aud_save_{view.id}",
                    disabled=verdict is None or plan.status != PlanStatus.open,
                )
                if b2.button("Skip", key=f"aud_skip_{view.id}"):
                    queue.release_item(engine, actor, view.id)
                    st.session_state[skipped_key].append(view.id)
                    load_next()
                    st.rerun()
                if save and verdict is not None:
                    with ui.reported("Nothing was saved. "):
                        verdicts.submit_verdict(
                            engine,
                            actor,
                            view.id,
                            verdicts.VerdictIn(str(verdict), tuple(stages), notes, tuple(drafts)),
                            mine.id if mine else None,
                        )
                        st.session_state["aud_flash"] = f"Saved your verdict on {view.trace_id}."
                        st.rerun()
                if mine is not None:
                    if plan.status == PlanStatus.open and st.button(
                        "Next trace", type="primary", key="aud_next"
                    ):
                        load_next()
                        st.rerun()
                    others = verdicts.item_verdicts(engine, actor, view.id) or []
                    st.caption("Current verdicts on this trace")
                    st.dataframe(
                        pd.DataFrame(
                            [
                                {
                                    "reviewer": o.reviewer,
                                    "verdict": vocabulary.VERDICTS[o.verdict],
                                    "stages": ", ".join(o.stages),
                                    "notes": o.notes,
                                    "claims supported": sum(
                                        c.get("verdict") == "supported" for c in o.claims
                                    ),
                                    "claims": len(o.claims),
                                    "when": o.created_at,
                                }
                                for o in others
                            ]
                        ),
                        hide_index=True,
                        width="stretch",
                    )
                    with st.expander("Turn this trace into an evaluation case"):
                        if mine.promoted_case_id:
                            st.markdown(
                                f"Promoted to [case {mine.promoted_case_id}]"
                                f"({ui.link('cases', case=mine.promoted_case_id)})."
                            )
                        elif not actor.can(Permission.edit_cases):
                            st.caption("Creating cases needs a role that edits cases.")
                        else:
                            st.caption(
                                "A draft case: the query as the question, the retrieved "
                                "documents found in the corpus as evidence (forbidden where "
                                "authorization filtered them), your verdict as the suggested "
                                "expected decision."
                            )
                            split = st.selectbox(
                                "Split", list(tax.splits), index=1, key=f"aud_split_{view.id}"
                            )
                            if st.button("Promote to a case", key=f"aud_promote_{view.id}"):
                                with ui.reported():
                                    cid = promote.promote_to_case(
                                        engine, actor, view.id, tax, split=str(split)
                                    )
                                    st.session_state["aud_flash"] = (
                                        f"Draft case {cid} created from {view.trace_id}."
                                    )
                                    st.rerun()
                    with st.expander("My verdict history on this trace"):
                        st.dataframe(
                            pd.DataFrame(
                                [
                                    {
                                        "verdict": vocabulary.VERDICTS[h.verdict],
                                        "stages": ", ".join(h.stages),
                                        "when": h.created_at,
                                        "replaces": h.replaces_id,
                                    }
                                    for h in verdicts.verdict_history(engine, actor, view.id)
                                    if h.reviewer == actor.email
                                ]
                            ),
                            hide_index=True,
                            width="stretch",
                        )
                elif view.blind:
                    st.caption("Blind review: other verdicts appear after you save yours.")

# ---------------------------------------------------------------------------------------------
# Estimates

with tab_est:
    if plan is None or plan.status == PlanStatus.planned:
        st.info("Estimates appear once a plan is drawn and its traces are audited.")
    else:
        report = estimates.estimates(engine, plan.id)
        c1, c2, c3, c4 = st.columns(4)
        c1.metric("Population", report.population)
        c2.metric("Sampled", report.sampled)
        c3.metric("Audited", report.audited)
        c4.metric("Reviewers disagree", report.disagreements)
        if report.audited == 0:
            st.info("No trace of this batch has a verdict yet.")
        else:
            rates = report.rates
            if (rates["unsampled_share"] > 0).any():
                share = float(rates["unsampled_share"].iloc[0])
                st.warning(
                    f"{pct(share)} of the population lies in strata with no audited trace "
                    "yet; the weighted rates cover the rest."
                )
            shown = pd.DataFrame(
                {
                    "verdict": rates["label"],
                    "count": rates["count"],
                    "audited": rates["audited"],
                    "sample rate": rates["sample_rate"].map(pct),
                    "sample 95 % (Wilson)": [
                        f"{pct(lo)} – {pct(hi)}"
                        for lo, hi in zip(rates["sample_lo"], rates["sample_hi"], strict=True)
                    ],
                    "population rate (weighted)": rates["population_rate"].map(pct),
                    "population 95 %": [
                        f"{pct(lo)} – {pct(hi)}"
                        for lo, hi in zip(
                            rates["population_lo"], rates["population_hi"], strict=True
                        )
                    ],
                    "≈ traces": rates["estimated_traces"],
                }
            )
            st.subheader("Rates")
            st.dataframe(shown, hide_index=True, width="stretch", height=ui.table_height(7))
            head = rates[rates["verdict"].isin(vocabulary.HEADLINE)]
            long = pd.concat(
                [
                    pd.DataFrame(
                        {
                            "verdict": head["label"],
                            "kind": "population (weighted)",
                            "rate": head["population_rate"],
                            "lo": head["population_lo"],
                            "hi": head["population_hi"],
                        }
                    ),
                    pd.DataFrame(
                        {
                            "verdict": head["label"],
                            "kind": "sample (raw)",
                            "rate": head["sample_rate"],
                            "lo": head["sample_lo"],
                            "hi": head["sample_hi"],
                        }
                    ),
                ]
            )
            base = alt.Chart(long).encode(
                y=alt.Y("verdict:N", title=None, axis=alt.Axis(labelLimit=320)),
                yOffset="kind:N",
                color=alt.Color("kind:N", title=None),
            )
            chart = base.mark_rule().encode(
                x=alt.X("lo:Q", title="rate", axis=alt.Axis(format="%")), x2="hi:Q"
            ) + base.mark_point(filled=True).encode(x="rate:Q")
            st.altair_chart(chart, width="stretch")
            st.subheader("By stratum")
            st.dataframe(
                report.strata.rename(columns=vocabulary.VERDICTS),
                hide_index=True,
                width="stretch",
                height=ui.table_height(len(report.strata), 12),
                column_config={"weight": st.column_config.NumberColumn(format="%.2f")},
            )
            st.subheader("By slice")
            c1, c2 = st.columns(2)
            dim = c1.selectbox(
                "Slice by",
                list(estimates.SLICE_DIMS),
                format_func=lambda d: population.DIMENSIONS[d],
                key="aud_slice_dim",
            )
            which = c2.selectbox(
                "Rate of",
                list(vocabulary.VERDICTS),
                format_func=lambda v: vocabulary.VERDICTS[v],
                key="aud_slice_verdict",
            )
            sl = estimates.by_slice(engine, plan.id, str(dim), str(which))
            for col in ("sample_rate", "population_rate"):
                sl[col] = sl[col].map(pct)
            sl["sample 95 %"] = [
                f"{pct(a)} – {pct(b)}"
                for a, b in zip(sl.pop("sample_lo"), sl.pop("sample_hi"), strict=True)
            ]
            sl["population 95 %"] = [
                f"{pct(a)} – {pct(b)}"
                for a, b in zip(sl.pop("population_lo"), sl.pop("population_hi"), strict=True)
            ]
            sl = sl.rename(
                columns={
                    "sample_rate": "sample rate",
                    "population_rate": "population rate (weighted)",
                    "estimated_traces_in_slice": "≈ traces in slice",
                }
            )
            st.dataframe(sl, hide_index=True, width="stretch", height=ui.table_height(len(sl), 12))
            st.caption(
                "Weights are population / audited traces per stratum; slices that cut across "
                "strata use the ratio estimator. Intervals are 95 %."
            )

# ---------------------------------------------------------------------------------------------
# Export

with tab_export:
    if plan is None:
        st.info("Nothing to export yet.")
    else:
        st.caption(
            "The batch with its plan (filter, strata, allocation, seed, population counts, "
            "fingerprint), the sample in queue order and the current verdicts."
            + ("" if actor.clearance else " Text of restricted traces is left out for you.")
        )
        stem = "".join(ch if ch.isalnum() else "-" for ch in plan.name).strip("-").lower()
        if st.button("Prepare the export files", key="aud_export"):
            jsonl, csv_buf = io.StringIO(), io.StringIO()
            export.export_jsonl(engine, actor, plan.id, jsonl)
            export.export_csv(engine, actor, plan.id, csv_buf)
            st.session_state["aud_export_files"] = (plan.id, jsonl.getvalue(), csv_buf.getvalue())
        files = st.session_state.get("aud_export_files")
        if files and files[0] == plan.id:
            c1, c2 = st.columns(2)
            c1.download_button(
                "Download JSONL", files[1], f"audit-{stem}.jsonl", "application/jsonl"
            )
            c2.download_button("Download CSV", files[2], f"audit-{stem}.csv", "text/csv")
