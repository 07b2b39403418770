"""Cached reads of the Thresholds page: a run's outputs joined to their cases and gold labels
(review.evaluation.evalruns.outputs_frame), read once per database and data stamp
(evalruns.outputs_stamp: it moves with every output, case edit, label, adjudication or
document version), so a slider step or a pick on the Calibrate tab does not read them again.
The frame does not depend on who reads it (no clearance-dependent content is filtered in it),
so one copy serves every user."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st
from sqlalchemy import Engine

from review.core.taxonomy import Taxonomy
from review.evaluation import evalruns


@st.cache_data(ttl=600, show_spinner=False, max_entries=16)
def _outputs(_engine: Engine, _tax: Taxonomy, url: str, stamp: tuple[Any, ...]) -> pd.DataFrame:
    return evalruns.outputs_frame(_engine, int(stamp[0]), _tax)


def outputs(engine: Engine, tax: Taxonomy, run_id: int) -> pd.DataFrame:
    """The outputs frame of run ``run_id`` (a copy of the cached one: free to change)."""
    return _outputs(engine, tax, str(engine.url), evalruns.outputs_stamp(engine, run_id))
