"""Cached look-ups of the traces list's pickers: the values of the filterable columns and
of the version components (cached per database URL and data stamp; cleared by an import or
a purge)."""

from __future__ import annotations

import streamlit as st
from sqlalchemy import Engine

from review.traces import facets as trace_facets


@st.cache_data(ttl=300, show_spinner=False)
def _facets(_engine: Engine, url: str, stamp: str) -> dict[str, list[str]]:
    return trace_facets.facet_values(_engine)


@st.cache_data(ttl=300, show_spinner=False)
def _version_keys(_engine: Engine, url: str, stamp: str) -> dict[str, list[str]]:
    return trace_facets.version_keys(_engine)


def facets(engine: Engine, stamp: str) -> dict[str, list[str]]:
    """The values each filterable column holds (see trace_facets.facet_values)."""
    return _facets(engine, str(engine.url), stamp)


def version_keys(engine: Engine, stamp: str) -> dict[str, list[str]]:
    """Version components and their values (see trace_facets.version_keys)."""
    return _version_keys(engine, str(engine.url), stamp)


def forget_facets() -> None:
    """After a purge: the pickers' column values are read again."""
    _facets.clear()


def forget() -> None:
    """After an import: every picker's values are read again."""
    _facets.clear()
    _version_keys.clear()
