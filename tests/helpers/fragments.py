"""Fragment reruns in AppTest, as the browser asks for them.

AppTest always reruns the whole script; the browser, when a widget inside a fragment changes,
asks for a rerun of that fragment alone (a rerun request naming the fragment:
``RerunData.fragment_id_queue``). :func:`fragment_reruns` makes AppTest's runs within a block
such requests. It reaches into AppTest (its fragment storage, and the rerun request its runner
builds); it is used by benchmarks/interaction.py and the page tests of fragments."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager

from streamlit.testing.v1 import AppTest, local_script_runner

__all__ = ["fragment_reruns"]


@contextmanager
def fragment_reruns(at: AppTest, key: str) -> Iterator[None]:
    """Within this block, a run of ``at`` reruns only the fragment registered under ``key``
    (``st.fragment(key=...)``) on the page it last drew; an ``st.rerun(scope="app")`` in it
    still reruns the whole page."""
    ids = at._fragment_storage.resolve_target(key)
    if not ids:
        raise RuntimeError(f"no fragment {key!r} on this page")
    plain = local_script_runner.RerunData  # type: ignore[attr-defined]
    local_script_runner.RerunData = functools.partial(  # type: ignore[attr-defined,assignment]
        plain, fragment_id_queue=list(ids)
    )
    try:
        yield
    finally:
        local_script_runner.RerunData = plain  # type: ignore[attr-defined]
