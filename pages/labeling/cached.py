"""The labeling queue's progress and size, as the Label page and the Overview show them: the
label counts are kept per database, data stamp, person, overlap and queue filter (one pass over
the ready cases' labels, review.labels.counts.label_counts), so a rerun, the next case or a
decision key does not count 200,000 labels again; the stamp is read from the database on every
run, so a label saved by another person or on another server moves it. Reservations expire
with time and are written by every "next case": review.labels.counts.queue_progress reads the
live ones each time."""

from __future__ import annotations

import streamlit as st
from sqlalchemy import Engine

from pages import ui
from review.core.database import database_url
from review.core.identity import Actor
from review.labels import counts, labeling
from review.labels.queue import NO_FILTER, QueueFilter


@st.cache_data(ttl=600, show_spinner=False, max_entries=64)
def _label_counts(
    url: str, stamp: tuple[int, ...], email: str, overlap: int, q: QueueFilter
) -> counts.LabelCounts:
    return counts.label_counts(ui.engine(), email, overlap, q)


def queue_progress(
    engine: Engine, actor: Actor, q: QueueFilter = NO_FILTER
) -> tuple[labeling.Progress, int]:
    """My progress and the team's, and how many cases my queue holds (within ``q``): the
    same as labeling.progress and labeling.queue_size."""
    overlap = labeling.get_settings(engine).overlap
    kept = _label_counts(database_url(), counts.stamp(engine), actor.email, overlap, q)
    return counts.queue_progress(engine, actor, kept, q)
