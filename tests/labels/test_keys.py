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


def test_option_keys_are_distinct_and_never_a_key_a_button_binds(tax: Taxonomy) -> None:
    """Reasons (Label, Adjudicate) and the audit verdict and stage take keys shown on their
    options; none of them is a key a button of the same page takes, nor Streamlit's R."""
    from review.audits import forms, vocabulary
    from review.core.keys import OPTION_LETTERS, option_keys

    assert len(set(OPTION_LETTERS)) == len(OPTION_LETTERS)
    assert not set(OPTION_LETTERS) & set("jknprs")
    assert option_keys(3) == ["a", "b", "c"]
    assert option_keys(len(OPTION_LETTERS) + 1)[-1] == ""  # past the last letter: no key
    reasons = keys.reason_keys(tax)
    assert list(reasons) == list(tax.case_reason_codes())  # every reason has its letter
    label_page = {k.key for k in keys.label_keys(tax)}
    assert not set(reasons.values()) & label_page
    audit_options = [*forms.VERDICT_KEYS.values(), *forms.STAGE_KEYS.values()]
    assert (
        len(set(audit_options))
        == len(audit_options)
        == (len(vocabulary.VERDICTS) + len(vocabulary.STAGES))
    )
    audit_buttons = {*forms.CLAIM_KEYS.values(), "j", "k", "n", "s"}
    assert not set(audit_options) & audit_buttons
    lines = dict(forms.audit_key_lines())
    assert lines["A"].startswith("Verdict: ") and lines["5"].startswith("Stage")
