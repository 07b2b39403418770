"""An operator's parameters as form widgets, built from review.builder.forms.param_inputs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import streamlit as st

from review.builder.forms import param_inputs
from review.builder.operator import ParamField, ParamValue


def param_widgets(
    fields: Sequence[ParamField], defaults: Mapping[str, ParamValue], key: str
) -> dict[str, object]:
    """Widgets inside a form; returns what each holds by parameter name (read it with
    review.builder.forms.parse_param_values once the form is submitted)."""
    values: dict[str, object] = {}
    for p in param_inputs(fields, defaults):
        f = p.field
        wkey = f"{key}_{f.name}"
        if p.kind == "checkbox":
            values[f.name] = st.checkbox(p.label, value=bool(p.value), help=f.help, key=wkey)
        elif p.kind == "select":
            values[f.name] = st.selectbox(
                p.label, list(p.options), index=p.index, help=f.help, key=wkey
            )
        elif p.kind == "text_area":
            values[f.name] = st.text_area(p.label, str(p.value), help=f.help, key=wkey, height=80)
        else:
            values[f.name] = st.text_input(p.label, str(p.value), help=f.help, key=wkey)
    return values
