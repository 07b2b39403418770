"""Consistency checks over a family's variants: the decisive passage present only where the
evidence state says so, nothing restricted visible, claims covered as the state requires."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from review.builder.families import (
    Check,
    Variant,
    index_documents,
    merge_unique,
    norm_text,
    versioned_ref,
)
from review.core import readable

__all__ = ["family_checks", "repeats_fragment", "restricted_fragments", "restricted_text_in"]


# ------------------------------------------------------------------------------------------
# Consistency checks


_CLAUSE_RE = re.compile(r"(?<=[.!?;:])\s+")


def _fragments(passage: str) -> list[str]:
    """The passage, and each sentence or clause of six words or more in it (not questions).

    A leak rarely copies a whole passage: a sentence, or the part after a label ("Education:
    ..."), is enough to give the restricted fact away.
    """
    out = [norm_text(passage)]
    for line in passage.splitlines():
        if line.lstrip().startswith("#"):
            continue
        for sentence in _CLAUSE_RE.split(norm_text(line)):
            s = norm_text(sentence)
            if len(s.split()) >= 6 and not s.rstrip(" _").endswith("?") and s not in out:
                out.append(s)
    return [f for f in out if f]


def _name(v: Variant, i: int) -> str:
    key = v.case.get("key")
    return str(key) if key else f"#{i + 1} ({v.evidence_state or 'no evidence state'})"


def _leaks(passages: Sequence[str], visible: Sequence[tuple[str, str]]) -> list[str]:
    found: list[str] = []
    for passage in passages:
        for frag in _fragments(passage):
            for ref, body in visible:
                if frag in norm_text(body):
                    shown = frag if len(frag) <= 60 else frag[:57] + "..."
                    found.append(f"{shown!r} is visible in {ref}")
    return sorted(set(found))


def restricted_text_in(text: str, restricted: Sequence[str], allowed: Sequence[str] = ()) -> bool:
    """Whether ``text`` (a pipeline's answer) repeats a restricted passage or one of its
    sentences or clauses of six words or more, ignoring any that an ``allowed`` (visible)
    document also contains. The same fragments as :func:`family_checks` uses for leaks."""
    if not text.strip() or not restricted:
        return False
    return repeats_fragment(text, restricted_fragments(restricted), allowed)


def restricted_fragments(restricted: Sequence[str]) -> tuple[str, ...]:
    """The fragments :func:`restricted_text_in` looks for in each of ``restricted`` (in
    order, each once): worked out once for many texts checked against the same passages."""
    out: dict[str, None] = {}
    for body in restricted:
        out.update(dict.fromkeys(_fragments(body)))
    return tuple(out)


def repeats_fragment(text: str, fragments: Sequence[str], allowed: Sequence[str] = ()) -> bool:
    """:func:`restricted_text_in` over fragments already worked out
    (:func:`restricted_fragments`)."""
    if not text.strip() or not fragments:
        return False
    said = norm_text(text)
    shown = [norm_text(b) for b in allowed]
    return any(frag in said and not any(frag in b for b in shown) for frag in fragments)


def _visible_decisive(v: Variant) -> list[tuple[str, int]]:
    return [
        (r["doc_id"], r["version"])
        for r in v.case.get("documents", [])
        if r["visibility"] == "visible" and r["role"] == "decisive"
    ]


def _decisive_refs(present: Sequence[Variant]) -> list[tuple[str, int]]:
    """The visible decisive documents of the evidence-present case(s), each once."""
    out: list[tuple[str, int]] = []
    for v in present:
        out.extend(r for r in _visible_decisive(v) if r not in out)
    return out


def _decisive_accounted(v: Variant, decisive: Sequence[tuple[str, int]], name: str) -> Check:
    """A variant that edits away or hides one decisive document of the evidence-present case
    while another still shows (unchanged) does not take the evidence away: the answer is
    still there. Flagged so that the expert edits the others too or expects an answer."""
    visible = {
        (r["doc_id"], r["version"])
        for r in v.case.get("documents", [])
        if r["visibility"] == "visible"
    }
    kept = [d for d in decisive if d in visible]
    lost = [d for d in decisive if d not in visible]
    replaced = [d for d in _visible_decisive(v) if d not in decisive]
    gone = ", ".join(versioned_ref(*d) for d in lost)
    if lost and kept and not replaced:
        still = ", ".join(versioned_ref(*d) for d in kept)
        verbs = ("is", "carries") if len(lost) == 1 else ("are", "carries")
        verbs = (verbs[0], "carries" if len(kept) == 1 else "carry")
        return Check(
            "decisive_documents_accounted",
            False,
            f"{gone} {verbs[0]} edited or hidden here but {still} still {verbs[1]} the answer "
            f"(decisive and visible): the evidence is not gone. Expect an answer, or edit "
            f"{still} too",
            name,
        )
    if lost and not kept:
        return Check(
            "decisive_documents_accounted",
            True,
            f"no decisive document still carries the answer: {gone} "
            f"{'is' if len(lost) == 1 else 'are'} edited or hidden here",
            name,
        )
    return Check(
        "decisive_documents_accounted",
        True,
        "every decisive document of the evidence-present case is accounted for",
        name,
    )


def _copies(v: Variant) -> dict[tuple[str, int], tuple[str, int]]:
    """The variant's edited copies and the documents they were made from."""
    out: dict[tuple[str, int], tuple[str, int]] = {}
    for e in v.edits:
        key, _, ver = (e.result_ref or "").partition("@")
        if key and ver.isdigit():
            out[(key, int(ver))] = (e.doc_id, e.version)
    return out


def _decisive_contested(v: Variant, decisive: Sequence[tuple[str, int]], name: str) -> Check:
    """Which decisive documents of the evidence-present case a conflicted variant leaves
    usable. A copy that neither controls nor is controlled (same date and authority) contests
    its original; a decisive document without one still settles the answer alone, so the
    evidence does not conflict. Flagged so that the expert contests the others too or expects
    an answer. A copy the original controls (older, lower authority) leaves it usable."""
    rows = v.case.get("documents", [])
    visible = {(r["doc_id"], r["version"]) for r in rows if r["visibility"] == "visible"}
    roles = {(r["doc_id"], r["version"]): r["role"] for r in rows}
    copies = {c: src for c, src in _copies(v).items() if c in visible and src in decisive}
    contested = [d for d in decisive if d in copies.values()]
    unresolved = any(roles.get(c) == "decisive" for c in copies)
    usable = [d for d in decisive if d in visible]
    refs = ", ".join(versioned_ref(*d) for d in contested)
    if not unresolved:
        return Check(
            "decisive_documents_accounted",
            True,
            f"{readable.count(len(usable), 'decisive document')} still control"
            f"{'s' if len(usable) == 1 else ''} the answer here: "
            f"{', '.join(versioned_ref(*d) for d in usable) or 'none'}"
            + (f" (each controls its conflicting copy: {refs})" if contested else ""),
            name,
        )
    free = [d for d in usable if d not in contested]
    if free:
        still = ", ".join(versioned_ref(*d) for d in free)
        verb = "carries" if len(free) == 1 else "carry"
        return Check(
            "decisive_documents_accounted",
            False,
            f"{refs} {'is' if len(contested) == 1 else 'are'} contested here by a copy that "
            f"neither controls, but {still} still {verb} the answer uncontested (decisive and "
            f"visible): the evidence does not conflict. Expect an answer, or contest {still} too",
            name,
        )
    return Check(
        "decisive_documents_accounted",
        True,
        f"no decisive document settles the answer alone: {refs} "
        f"{'is' if len(contested) == 1 else 'are'} contested here by a copy that neither "
        "controls",
        name,
    )


def family_checks(
    variants: Sequence[Variant], documents: Iterable[Mapping[str, Any]]
) -> list[Check]:
    """Checks on a family; the variants' own new documents are included automatically."""
    docs = index_documents(documents)
    for v in variants:
        docs.update(index_documents(v.new_documents))
    checks: list[Check] = []
    present = [v for v in variants if v.evidence_state == "present"]
    checks.append(
        Check(
            "one_present",
            len(present) == 1,
            f"{readable.count(len(present), 'evidence-present variant')}; a family needs exactly "
            "one",
        )
    )
    families = {v.case.get("family") for v in variants}
    checks.append(
        Check(
            "same_family",
            len(families) == 1 and None not in families,
            f"family keys: {', '.join(sorted(str(f) for f in families)) or 'none'}",
        )
    )
    base_passages = [v.decisive_passage for v in present if v.decisive_passage]
    decisive = _decisive_refs(present)
    for i, v in enumerate(variants):
        name = _name(v, i)
        if len(decisive) > 1 and v.evidence_state == "conflicted" and _copies(v):
            checks.append(_decisive_contested(v, decisive, name))
        elif len(decisive) > 1 and v.evidence_state != "present":
            checks.append(_decisive_accounted(v, decisive, name))
        visible: list[tuple[str, str]] = []
        missing: list[str] = []
        scope_problems: list[str] = []
        scopes = set(v.case.get("identity", {}).get("scopes", []))
        for r in v.case.get("documents", []):
            ref = versioned_ref(r["doc_id"], r["version"])
            d = docs.get((r["doc_id"], r["version"]))
            if d is None:
                missing.append(ref)
                continue
            if r["visibility"] == "visible":
                visible.append((ref, d["body"]))
            scope = d.get("access_scope")
            if scope:
                if r["visibility"] == "visible" and scope not in scopes:
                    scope_problems.append(
                        f"{ref} is visible but its scope {scope!r} is not granted"
                    )
                if r["visibility"] == "forbidden" and scope in scopes:
                    scope_problems.append(f"{ref} is forbidden but its scope {scope!r} is granted")
        checks.append(
            Check(
                "documents_known",
                not missing,
                f"no text for {', '.join(missing)}" if missing else "every document has its text",
                name,
            )
        )
        checks.append(
            Check(
                "visibility_matches_scopes",
                not scope_problems,
                "; ".join(scope_problems) or "visibility agrees with the identity's scopes",
                name,
            )
        )
        passages = merge_unique([v.decisive_passage] if v.decisive_passage else [], base_passages)
        if v.evidence_state == "present":
            if not passages:
                checks.append(
                    Check("present_shows_passage", False, "no decisive passage recorded", name)
                )
            else:
                shown = all(
                    any(norm_text(p) in norm_text(b) for _r, b in visible) for p in passages
                )
                checks.append(
                    Check(
                        "present_shows_passage",
                        shown,
                        "the decisive passage is in a visible document"
                        if shown
                        else "the decisive passage is in no visible document",
                        name,
                    )
                )
        rule = {"forbidden": "forbidden_no_leak", "removed": "removed_no_passage"}.get(
            v.evidence_state or ""
        )
        if rule is None:
            continue
        if not passages:
            checks.append(
                Check(
                    rule,
                    False,
                    "cannot be verified: no decisive passage recorded (give passage= to "
                    "present_variant or to the builder)",
                    name,
                )
            )
            continue
        leaks = _leaks(passages, visible)
        ok_text = (
            "no restricted text in any visible document"
            if rule == "forbidden_no_leak"
            else "the decisive passage is in no visible document"
        )
        checks.append(Check(rule, not leaks, "; ".join(leaks) or ok_text, name))
    return checks
