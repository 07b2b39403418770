"""Issue 35, items 1 and 2: the builder on evidence from several documents, and on passages
imported as one long line.

Item 2: "Swap the year" on a passage stored as one line gave no preview for a minute (the
word diff of the whole line was quadratic) and its two candidates read the same ("line 1:
2018"). Candidates are now told apart by their context and a diff's work and size are bounded.
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from review.builder import diffs, forms
from review.builder.edits import OPERATORS
from review.builder.operator import Span

WORDS = ["the", "final", "of", "2018", "was", "played", "in", "Moscow", "14 days", "Team", "."]


def one_line(words: int, seed: int = 1) -> str:
    rng = random.Random(seed)
    return "2018 " + " ".join(rng.choice(WORDS) for _ in range(words)) + " in 2018 again."


# ------------------------------------------------------------------------------------------
# Item 2: candidates told apart, diffs bounded


def test_two_years_on_line_one_get_different_labels_with_their_words() -> None:
    body = "2018 World Cup: the final of 2018 was played in Moscow.\n\n2018\n"
    spans = OPERATORS["swap_year"].candidates(body)
    assert [forms.span_label(body, s) for s in spans][:2] == ["line 1: 2018", "line 1: 2018"]
    labels = forms.span_labels(body, spans)
    assert labels == [
        "line 1: 2018 · «2018» World Cup: the final of 2018 was…",
        "line 1: 2018 · 2018 World Cup: the final of «2018» was played in Moscow.",
        "line 3: 2018 · «2018»",
    ]


def test_the_same_words_twice_on_a_line_say_where_they_start() -> None:
    body = "Team 2018 Team 2018 Team 2018 Team"
    spans = OPERATORS["replace_tier"].candidates(body)
    labels = forms.span_labels(body, spans)
    assert len(set(labels)) == len(labels) == 4
    # a long sentence needs no context: its words tell it apart
    long = "The final of the tournament was played in Moscow on 15 July."
    assert forms.span_labels(long, [Span(0, len(long), long)]) == [f"line 1: {long}"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["2018", "2019", "Team", "x", "\n", "14 days"]), max_size=40))
def test_candidate_labels_are_always_unique(tokens: list[str]) -> None:
    body = " ".join(tokens)
    for name in ("swap_year", "replace_tier", "change_unit"):
        spans = OPERATORS[name].candidates(body)
        labels = forms.span_labels(body, spans)
        assert len(set(labels)) == len(labels), (name, body)


def test_an_operator_without_candidates_says_what_it_looks_for() -> None:
    assert forms.no_candidates("swap_year", "WC-2018@1") == (
        "Swap the year finds no year (1900-2099) standing as a word of its own in WC-2018@1, "
        "so it has nothing to preview here: choose another document or operator, or type the "
        "offsets of a span by hand (Custom offsets…)."
    )
    for name, op in OPERATORS.items():
        assert op.finds != "place to edit", name  # each operator names what it looks for


def test_a_change_in_a_long_line_is_shown_with_the_words_around_it() -> None:
    body = one_line(20_000)  # about 115,000 characters on line 1
    span = OPERATORS["swap_year"].candidates(body)[-1]
    pv = diffs.preview(body, "swap_year", span.start, span.end, {"to_year": 2017})
    (row,) = pv.rows
    assert row.change == "changed" and row.after.endswith(" in {+2017+} again.")
    assert row.before.startswith("…") and len(row.before) <= diffs.CONTEXT_CHARS + 40
    assert len(pv.before_excerpt) < 400 and len(pv.after_excerpt) < 400


def test_a_line_rewritten_whole_is_marked_whole_without_a_word_diff() -> None:
    a = " ".join(f"a{i}" for i in range(3_000))
    b = " ".join(f"b{i}" for i in range(3_000))
    before, after = diffs.mark_changes(a, b)
    assert before == f"[-{a}-]" and after == f"{{+{b}+}}"
    rows = diffs.diff_rows(f"same\n{a}\n{'x ' * 500}", f"same\n{b}\n{'x ' * 500}")
    assert rows[-1].change == "same" and rows[-1].before.endswith("…")
    assert len(rows[-1].before) <= 2 * diffs.CONTEXT_CHARS + 1


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.sampled_from(["a", "b", "2018", " ", ".", "Team", "x y"]), max_size=30),
    st.lists(st.sampled_from(["a", "b", "2019", " ", ".", "Business", "z"]), max_size=30),
)
def test_short_lines_are_marked_whole_and_unmarking_gives_them_back(
    left: list[str], right: list[str]
) -> None:
    a, b = "".join(left), "".join(right)
    before, after = diffs.mark_changes(a, b)
    assert before.replace("[-", "").replace("-]", "") == a
    assert after.replace("{+", "").replace("+}", "") == b
