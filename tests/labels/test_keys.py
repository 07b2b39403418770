"""The Label page's keys: one per decision in the taxonomy's order, none bound twice, each one
Streamlit can bind (or, for `?`, listed beside its bindable twin)."""

from __future__ import annotations

from streamlit.elements.lib.shortcut_utils import normalize_shortcut

from review.core.taxonomy import Taxonomy
from review.labels import keys


def test_decisions_get_the_digits_in_the_taxonomys_order(tax: Taxonomy) -> None:
    got = keys.decision_keys(tax)
    assert list(got) == list(tax.decisions)
    assert list(got.values()) == [str(i) for i in range(1, len(tax.decisions) + 1)]


def test_every_key_is_bindable_and_bound_once(tax: Taxonomy) -> None:
    listed = keys.label_keys(tax)
    bound = [normalize_shortcut(k.key) for k in listed]
    assert len(set(bound)) == len(bound)
    does = {k.shows: k.does for k in listed}
    assert does["Ctrl+Enter"].startswith("Submit")
    assert "? or K" in does and "P" in does
