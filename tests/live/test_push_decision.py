"""The push's decision of what to send (review.traces.live.push.plan_pushes), as a property:
through any sequence of newer verdicts by several reviewers, with each push acknowledged in
full or only in part, Phoenix (modelled as its upsert on name, span and identifier) ends up
holding exactly each reviewer's newest annotations plus ``withdrawn`` for what a newer verdict
dropped, and a push right after a complete one sends nothing."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from review.audits.pushback import VOCABULARY
from review.traces.live.push import (
    Key,
    Target,
    VerdictFacts,
    build_annotations,
    plan_pushes,
)

SOURCES = {1: Target(1, "phx", "http://127.0.0.1:6006", "p", None)}
ROOTS = {"a" * 32: [(1, "00000000000000a1")], "b" * 32: [(1, "00000000000000b2")]}
STAGES = list(VOCABULARY.stages)

verdicts = st.fixed_dictionaries(
    {
        "item": st.sampled_from([1, 2]),
        "reviewer": st.sampled_from(["r1@x.example", "r2@x.example"]),
        "verdict": st.sampled_from(list(VOCABULARY.verdicts)),
        "stages": st.lists(st.sampled_from(STAGES), unique=True, max_size=3),
        "notes": st.sampled_from(["", "a note", "another note"]),
        "claims": st.lists(
            st.sampled_from(["supported", "unsupported", "contradicted", None]), max_size=3
        ),
        # how much of the push Phoenix acknowledges: all of it, or the first n annotations
        "acked": st.one_of(st.none(), st.integers(min_value=0, max_value=6)),
    }
)


def _facts(v: dict[str, Any], vid: int) -> VerdictFacts:
    return VerdictFacts(
        plan_id=1,
        plan_name="p",
        item_id=v["item"],
        trace_id=("a" if v["item"] == 1 else "b") * 32,
        verdict_id=vid,
        reviewer=v["reviewer"],
        verdict=v["verdict"],
        restricted=False,
        stages=tuple(v["stages"]),
        notes=v["notes"],
        claims=tuple({"text": f"claim {i}", "verdict": c} for i, c in enumerate(v["claims"])),
    )


@settings(max_examples=150, deadline=None)
@given(st.lists(verdicts, min_size=1, max_size=8))
def test_phoenix_holds_each_reviewers_newest_annotations_and_a_second_push_sends_nothing(
    history: list[dict[str, Any]],
) -> None:
    phoenix: dict[tuple[str, str, str], dict[str, Any]] = {}  # (span, name, identifier)
    pushed: dict[Key, tuple[str | None, str | None]] = {}
    newest: dict[tuple[int, str], VerdictFacts] = {}
    ever: dict[tuple[int, str], set[str]] = {}
    for vid, v in enumerate(history, start=1):
        newest[(v["item"], v["reviewer"])] = _facts(v, vid)
        facts = list(newest.values())
        plan = plan_pushes(facts, VOCABULARY, SOURCES, ROOTS, pushed, None)
        sent = plan.pending.get(1, [])
        acked = sent if v["acked"] is None else sent[: v["acked"]]
        for p in acked:  # Phoenix upserts, the workbench records the digest
            a = p.annotation
            phoenix[(a.span_id, a.name, a.identifier)] = a.payload()
            pushed[p.key] = (a.digest, a.label)
            ever.setdefault((p.key[1], p.key[2]), set()).add(a.name)
    # one more push completes whatever was not acknowledged ...
    facts = list(newest.values())
    for p in plan_pushes(facts, VOCABULARY, SOURCES, ROOTS, pushed, None).pending.get(1, []):
        a = p.annotation
        phoenix[(a.span_id, a.name, a.identifier)] = a.payload()
        pushed[p.key] = (a.digest, a.label)
        ever.setdefault((p.key[1], p.key[2]), set()).add(a.name)
    # ... and the next sends nothing, counting everything as already there
    again = plan_pushes(facts, VOCABULARY, SOURCES, ROOTS, pushed, None)
    assert again.pending == {}
    want: dict[tuple[str, str, str], dict[str, Any]] = {}
    for (item, reviewer), f in newest.items():
        span = ROOTS[f.trace_id][0][1]
        built = build_annotations(f, span, VOCABULARY).annotations
        for a in built:
            want[(span, a.name, a.identifier)] = a.payload()
        names = {a.name for a in built}
        for name in ever.get((item, reviewer), set()) - names:
            held = phoenix[(span, name, reviewer)]
            assert held["result"]["label"] == "withdrawn", (name, held)
    current = {k: p for k, p in phoenix.items() if p["result"]["label"] != "withdrawn"}
    assert current == want
    assert again.already == len(want)  # a withdrawn one is not counted again
