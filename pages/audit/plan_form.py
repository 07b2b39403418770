"""The new-plan form of the Plans tab: the population filter, the strata and the sample, with a
preview of the population per stratum and the button that creates the plan."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import streamlit as st
from sqlalchemy import Engine

from pages import ui
from pages.audit.cached import forget_counts, values
from review.audits import display, forms, population
from review.audits import plans as audit_plans
from review.core import readable
from review.core.identity import Actor
from review.core.taxonomy import Taxonomy


def _terms(tax: Taxonomy, section: str) -> Callable[[str], str]:
    """How a picker's key of a taxonomy section reads: its label ("(none)" as it is)."""

    def label(key: str) -> str:
        return key if key == population.NONE else readable.term(tax, section, key)

    return label


def population_fields(engine: Engine, tax: Taxonomy) -> forms.PlanForm:
    """The population half of the form: which traces (an empty filter means any)."""
    st.caption("Population: which traces (leave a filter empty for any)")
    c1, c2 = st.columns(2)
    date_from = c1.date_input("From (UTC)", value=None, key="aud_from")
    date_to = c2.date_input("To, inclusive (UTC)", value=None, key="aud_to")
    c1, c2, c3 = st.columns(3)
    f_dec = c1.multiselect(
        "Decisions",
        [*tax.decisions, population.NONE],
        key="aud_f_dec",
        format_func=_terms(tax, "decisions"),
        select_all=False,
    )
    f_reason = c2.multiselect(
        "Reason codes",
        [*tax.reason_codes, population.NONE],
        format_func=_terms(tax, "reason_codes"),
        select_all=False,
    )
    f_feedback = c3.multiselect("User feedback", values(engine, "feedback"), key="aud_f_fb")
    c1, c2, c3 = st.columns(3)
    f_lang = c1.multiselect("Languages", values(engine, "language"))
    f_tier = c2.multiselect("Customer tiers", values(engine, "customer_tier"))
    f_doc = c3.multiselect("Document types", values(engine, "document_type"))
    c1, c2, c3 = st.columns(3)
    f_policy = c1.multiselect("Policy versions", values(engine, "policy_version"))
    f_model = c2.multiselect("Model versions", values(engine, "model_version"))
    f_index = c3.multiselect("Index versions", values(engine, "version.index"), key="aud_f_index")
    c1, c2, c3 = st.columns(3)
    f_prompt = c1.multiselect(
        "Prompt versions", values(engine, "version.prompt"), key="aud_f_prompt"
    )
    f_embedding = c2.multiselect(
        "Embedding models", values(engine, "version.embedding"), key="aud_f_embedding"
    )
    f_reranker = c3.multiselect(
        "Rerankers", values(engine, "version.reranker"), key="aud_f_reranker"
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
    return forms.PlanForm(
        date_from=date_from,
        date_to=date_to,
        decisions=f_dec,
        reason_codes=f_reason,
        feedback=f_feedback,
        languages=f_lang,
        customer_tiers=f_tier,
        document_types=f_doc,
        policy_versions=f_policy,
        model_versions=f_model,
        index_versions=f_index,
        prompt_versions=f_prompt,
        embedding_versions=f_embedding,
        reranker_versions=f_reranker,
        attribute_filter=f_attr,
        include_restricted=include_restricted,
    )


def sample_fields(form: forms.PlanForm) -> forms.PlanForm:
    """The sample half of the form: strata, allocation, size, seed, reviewers, blindness."""
    st.caption("Sample")
    strata = st.multiselect(
        "Strata",
        list(population.DIMENSIONS),
        format_func=lambda d: population.DIMENSIONS[d],
        help="Each combination of values is one stratum.",
        key="aud_strata",
    )
    attr_strata = st.text_input("Also stratify by trace attributes (comma-separated names)", "")
    c1, c2, c3, c4 = st.columns(4)
    allocation = c1.radio("Allocation", audit_plans.ALLOCATIONS, key="aud_alloc")
    total = int(c2.number_input("Sample size", 1, audit_plans.MAX_TOTAL, 100, key="aud_total"))
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
    return replace(
        form,
        strata=strata,
        attribute_strata=attr_strata,
        allocation=str(allocation),
        total=total,
        seed=seed,
        overlap=overlap,
        blind=blind,
        explicit=explicit,
    )


def preview(engine: Engine, form: forms.PlanForm) -> None:
    """The population per stratum the form would sample from."""
    flt = form.population_filter()
    counts = audit_plans.count_population(engine, flt, form.dimensions())
    st.caption(ui.plain(display.counts_caption(counts, flt)))
    frame = display.counts_frame(counts, form.dimensions(), ui.tax())
    if form.allocation == "explicit":  # the names the explicit sizes are written with
        frame.insert(1, "name for explicit sizes", [c.stratum for c in counts])
    st.dataframe(
        frame,
        hide_index=True,
        width="stretch",
        height=ui.table_height(len(counts), 12),
    )


def create(engine: Engine, actor: Actor, form: forms.PlanForm) -> None:
    """Create the plan, select it and say so."""
    spec = form.spec()
    new_id = ui.transact(
        lambda s: audit_plans.create_plan(s, actor, spec), prefix="Nothing was created. "
    )
    if new_id is None:
        return
    forget_counts()
    st.session_state["aud_want_plan"] = new_id
    ui.said(
        "aud_new_plan",
        f"Plan {spec.name.strip()!r} created. Check the allocation, then draw the sample.",
    )
    st.rerun()


def new_plan_form(engine: Engine, actor: Actor, tax: Taxonomy, expanded: bool) -> None:
    """The expander with the form; its buttons count the population (shown below the form)
    or create the plan."""
    with st.expander("New sampling plan", expanded=expanded), st.form("aud_new_plan"):
        name = st.text_input("Plan name", placeholder="July 2025 monthly review", key="aud_name")
        form = sample_fields(replace(population_fields(engine, tax), name=name))
        b1, b2 = st.columns(2)
        want_preview = b1.form_submit_button("Count the population")
        want_create = b2.form_submit_button("Create plan", type="primary")
    # what the buttons did, right under the form (and under the expander once it closes)
    here = ui.under("aud_new_plan")
    if want_preview or want_create:
        with here, ui.reported("Nothing was created. "):
            if want_preview:
                preview(engine, form)
            else:
                create(engine, actor, form)
