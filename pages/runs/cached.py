"""Cached reads of the Runs page, per database and data stamp (review.evaluation.runview.stamp:
it moves with every output, case edit, label, adjudication, document version or access
scope): a run's figures and tables, a comparison of two runs, and the drift of the question
families over every run. A rerun, a choice that only changes what is shown (a group, a
metric, a family) and the next viewer read the kept copy; nothing in them depends on who
reads (the page withholds what a viewer may not see when it shows them)."""

from __future__ import annotations

from typing import Any

import altair as alt
import pandas as pd
import streamlit as st
from sqlalchemy import Engine

from review.charts.runs import confusion_chart, intervals_chart
from review.core.taxonomy import Taxonomy
from review.evaluation import evalruns, execution, runmetrics, runview


@st.cache_data(ttl=600, show_spinner=False, max_entries=16)
def _one_run(
    _engine: Engine, _tax: Taxonomy, url: str, stamp: tuple[Any, ...], partial: bool
) -> runview.RunView:
    return runview.one_run(_engine, int(stamp[0]), _tax, partial_allowed=partial)


def one_run(
    engine: Engine, tax: Taxonomy, stamp: tuple[Any, ...], partial: bool
) -> runview.RunView:
    """The figures and tables of the run of ``stamp`` (review.evaluation.runview.stamp of its
    id; review.evaluation.runview.one_run)."""
    return _one_run(engine, tax, str(engine.url), stamp, partial)


@st.cache_resource(ttl=600, show_spinner=False, max_entries=16)
def _charts(
    _view: runview.RunView, _tax: Taxonomy, url: str, stamp: tuple[Any, ...], partial: bool
) -> tuple[alt.LayerChart, alt.LayerChart]:
    labels = {k: t.label for k, t in _tax.decisions.items()}
    return intervals_chart(_view.summary), confusion_chart(_view.confusion, labels)


def charts(
    engine: Engine, tax: Taxonomy, view: runview.RunView, stamp: tuple[Any, ...], partial: bool
) -> tuple[alt.LayerChart, alt.LayerChart]:
    """The run's intervals chart and its expected-vs-observed chart (review.charts.runs),
    built once per stamp and shared (Streamlit draws a chart without changing it)."""
    return _charts(view, tax, str(engine.url), stamp, partial)


@st.cache_data(ttl=600, show_spinner=False, max_entries=64)
def _by_group(
    _view: runview.RunView, url: str, stamp: tuple[Any, ...], group: str, partial: bool
) -> pd.DataFrame:
    return runmetrics.by_group(_view.frame, group, partial_allowed=partial)


def by_group(
    engine: Engine, view: runview.RunView, stamp: tuple[Any, ...], group: str, partial: bool
) -> pd.DataFrame:
    """runmetrics.by_group of ``view`` (the run of ``stamp``) by ``group``."""
    return _by_group(view, str(engine.url), stamp, group, partial)


@st.cache_data(ttl=600, show_spinner="Comparing the runs…", max_entries=16)
def _compare(
    _engine: Engine,
    _tax: Taxonomy,
    url: str,
    stamp_a: tuple[Any, ...],
    stamp_b: tuple[Any, ...],
    partial: bool,
) -> runview.Comparison:
    return runview.compare(_engine, int(stamp_a[0]), int(stamp_b[0]), _tax, partial_allowed=partial)


def compare(
    engine: Engine, tax: Taxonomy, run_a: int, run_b: int, partial: bool
) -> runview.Comparison:
    """Run ``run_b`` against run ``run_a`` (review.evaluation.runview.compare)."""
    stamps = runview.stamp(engine, run_a), runview.stamp(engine, run_b)
    return _compare(engine, tax, str(engine.url), *stamps, partial)


@st.cache_data(ttl=600, show_spinner=False, max_entries=4)
def _drift(_engine: Engine, _tax: Taxonomy, url: str, stamp: tuple[Any, ...]) -> pd.DataFrame:
    return runmetrics.family_drift(evalruns.family_history(_engine, _tax))


def drift(engine: Engine, tax: Taxonomy) -> tuple[pd.DataFrame, tuple[Any, ...]]:
    """runmetrics.family_drift over every run's outputs on a question family, and the stamp
    it was read at."""
    stamp = runview.stamp(engine, None)
    return _drift(engine, tax, str(engine.url), stamp), stamp


@st.cache_resource(ttl=600, show_spinner=False, max_entries=32)
def _drift_chart(
    _view: pd.DataFrame, url: str, stamp: tuple[Any, ...], metric: str, families: tuple[str, ...]
) -> alt.LayerChart:
    return runmetrics.drift_chart(_view, metric)


def drift_chart(
    engine: Engine,
    view: pd.DataFrame,
    stamp: tuple[Any, ...],
    metric: str,
    families: tuple[str, ...],
) -> alt.LayerChart:
    """runmetrics.drift_chart of ``view`` (the drift of ``stamp`` on ``families``, every one
    when empty), built once and shared."""
    return _drift_chart(view, str(engine.url), stamp, metric, families)


@st.cache_data(ttl=600, show_spinner=False, max_entries=4)
def _subset_choices(_engine: Engine, url: str, stamp: tuple[int, int, int]) -> dict[str, list[str]]:
    return execution.subset_choices(_engine)


def subset_choices(engine: Engine) -> dict[str, list[str]]:
    """The values each subset field of the run form takes among the ready cases
    (review.evaluation.execution.subset_choices: distinct values over every case, 0.3 s at
    50,000 cases), kept until a case is added or edited (execution.choices_stamp)."""
    return _subset_choices(engine, str(engine.url), execution.choices_stamp(engine))
