"""Cached look-ups of the Plans tab: the values a filter offers and a plan's population check
(cached per database URL; the check is cleared when a plan is created, drawn or recounted).
Both are keyed by the traces' data stamp, so traces imported or purged meanwhile (on this
page's server or by the command line) are shown on the next rerun; a plan's creation, draw
or recount changes no trace, so the filter values stay kept (reading them again cost 0.12 s
at 1M traces on the rerun after every plan created)."""

from __future__ import annotations

import streamlit as st
from sqlalchemy import Engine

from review.audits import plans as audit_plans
from review.traces import browse


@st.cache_data(ttl=300, show_spinner=False)
def _values(_engine: Engine, url: str, dim: str, stamp: str) -> list[str]:
    return audit_plans.dimension_values(_engine, dim)


def values(engine: Engine, dim: str) -> list[str]:
    """The values the traces hold for ``dim`` (a filter's choices)."""
    return _values(engine, str(engine.url), dim, browse.data_stamp(engine))


@st.cache_data(ttl=60, show_spinner="Counting the population…")
def _population_check(
    _engine: Engine, url: str, plan_id: int, status: str, stamp: str
) -> audit_plans.PopulationCheck:
    return audit_plans.check_population(_engine, plan_id)


def population_check(engine: Engine, plan: audit_plans.PlanView) -> audit_plans.PopulationCheck:
    """The plan's population counted again and compared with the stored counts."""
    stamp = browse.data_stamp(engine)
    return _population_check(engine, str(engine.url), plan.id, plan.status, stamp)


def forget_counts() -> None:
    _population_check.clear()
