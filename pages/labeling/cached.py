"""The labeling queue's progress and size, as the Label page and the Overview show them.

The label counts (one pass over the ready cases' labels, review.labels.counts.label_counts)
are kept per database, person, overlap and queue filter with the data stamp they are of. On
every run the stamp is read from the database (a label saved by another person or on
another server moves it) and review.labels.counts.kept_counts brings the kept counts up to
it: unchanged on a rerun, the next case or a decision key; moved by the labels added since
after a label is saved; counted again when anything else changed. What is kept here is only
the start of that: nothing in it is shown without being checked against the database.
Reservations expire with time and are written by every "next case":
review.labels.counts.queue_progress reads the live ones each time."""

from __future__ import annotations

import streamlit as st
from sqlalchemy import Engine

from review.core.database import database_url
from review.core.identity import Actor
from review.labels import counts, labeling
from review.labels.queue import NO_FILTER, QueueFilter

#: kept counts at most (one per person and filter in use): beyond it they start again
MOST_KEPT = 256

Key = tuple[str, str, int, QueueFilter]


@st.cache_resource(show_spinner=False)
def _kept() -> dict[Key, counts.Kept]:
    return {}


def queue_progress(
    engine: Engine, actor: Actor, q: QueueFilter = NO_FILTER
) -> tuple[labeling.Progress, int]:
    """My progress and the team's, and how many cases my queue holds (within ``q``): the
    same as labeling.progress and labeling.queue_size."""
    overlap = labeling.get_settings(engine).overlap
    kept = _kept()
    key = (database_url(), actor.email, overlap, q)
    now = counts.kept_counts(engine, actor.email, overlap, q, kept.get(key))
    if len(kept) >= MOST_KEPT:
        kept.clear()
    kept[key] = now
    return counts.queue_progress(engine, actor, now.counts, q)
