"""Claim-level review of an answer: cut it into atomic claims, then check citations and
verdicts claim by claim.

``split_claims`` is a rule-based sentence splitter for the prose assistants write: plain
sentences, Markdown bullets and numbered lists, short tables. It does not cut on
abbreviations (``e.g.``, ``i.e.``, ``Dr.``, ``U.S.``, ``No. 5``, ``vs.``), decimals
(``99.9 %``), version numbers (``2.1.3``), or an ellipsis that runs on in lower case; a
citation marker after the full stop (``... 14 days. [2]``) stays with its sentence. Every claim
carries its ``start``/``end`` offsets into the original text, so ``text[start:end]`` is the
claim exactly (it is never re-typed or normalised). Headings, code blocks and bits without a
letter or digit are not claims.

Known limits, by design of a rule-based splitter: a sentence that really ends with a dotted
abbreviation (``... in the U.S. Customers ...``) is not cut there, and a lower-case line that
follows a line without a bullet is read as the continuation of a wrapped sentence.

``citation_validity`` then combines the citations of each claim, the ids of the passages that
were actually in the context, and the reviewer's verdict per claim.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import pandas as pd

from review.core import readable
from review.core.errors import InputError
from review.core.terms import ClaimVerdict
from review.corpus import markdown

__all__ = [
    "VERDICTS",
    "CitationReport",
    "Claim",
    "ClaimCheck",
    "citation_validity",
    "claims_with_citations",
    "extract_citations",
    "split_claims",
]


@dataclass(frozen=True, slots=True)
class Claim:
    """One claim: its text and where it sits in the answer (``answer[start:end] == text``)."""

    text: str
    start: int
    end: int


# --- segmentation ------------------------------------------------------------------------------

# Abbreviations that are not the end of a sentence whatever follows (compared lower-case,
# without the final dot).
# fmt: off
_ALWAYS_ABBREV = frozenset({
    "eg", "ie", "cf", "vs", "viz", "dr", "mr", "mrs", "ms", "mx", "prof", "sr", "jr", "st",
    "mt", "approx", "ca", "incl", "excl", "esp", "resp", "al", "dept", "est", "gen", "lt",
    "col", "sgt", "capt", "rev", "hon",
})
# Abbreviations that do not end a sentence when a number follows ("No. 5", "Art. 7", "Jan. 3").
_NUMBER_ABBREV = frozenset({
    "no", "nos", "nr", "num", "art", "arts", "sec", "secs", "ch", "chap", "para", "paras",
    "p", "pp", "fig", "figs", "vol", "vols", "ref", "refs", "op", "tab", "eq", "v", "ver",
    "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
})
# fmt: on
_DOTTED = re.compile(r"^(?:[A-Za-z]\.)+[A-Za-z]$")  # U.S  e.g  i.e  a.m  N.Y
_BOUNDARY = re.compile(
    r"""
    (?P<term>(?<![.!?…])[.!?…]++|[。！？])  # the terminators: a whole run, matched once
                                            # (a run of n '?' before a letter was n² steps)
    (?P<close>["'”’»)\]*_]*)                # closing quotes, brackets, emphasis
    (?P<cite>(?:[ \t]*\[[^\[\]\n]{1,60}\](?!\())*)   # citation markers after the stop
    (?=\s|$)
    """,
    re.VERBOSE,
)
_BULLET = re.compile(
    r"""^[ \t]*(?:
        [-*+•‣◦▪▸–—]                       # - item, * item, • item
      | \(?\d{1,3}[.)]                     # 1. item, 2) item, (3) item
      | \(?[A-Za-z][)]                     # a) item, (b) item
      | [a-z]\.                            # a. item
      | >                                  # > quoted line
    )[ \t]+""",
    re.VERBOSE,
)
_OPENERS = "([{\"'“‘«*_"


_NEXT = re.compile(r"\S")
_LAST_TOKEN = re.compile(r"\S+\s*$")
_TOKEN_WINDOW = 200  # characters looked back for the word before a full stop


def _is_boundary(block: str, m: re.Match[str]) -> bool:
    # look at the next character and the word before without copying the rest of the block
    # (slices per stop made a long answer of many short sentences quadratic)
    after = _NEXT.search(block, m.end())
    if after is None:
        return True
    nxt = after.group()
    if nxt.islower():  # "e.g. the", "approx. ten", "wait... then"
        return False
    if m.group("term") != "." or m.group("close"):
        return True
    last = _LAST_TOKEN.search(block, max(0, m.start() - _TOKEN_WINDOW), m.start())
    token = last.group().rstrip() if last else ""
    token = token.lstrip(_OPENERS)
    low = token.lower()
    if _DOTTED.match(token) or low in _ALWAYS_ABBREV:
        return False
    return not (low in _NUMBER_ABBREV and (nxt.isdigit() or nxt == "#"))


def _sentences(text: str, start: int, end: int) -> Iterable[tuple[int, int]]:
    block = text[start:end]
    cut = 0
    for m in _BOUNDARY.finditer(block):
        if _is_boundary(block, m):
            yield start + cut, start + m.end()
            cut = m.end()
    yield start + cut, end


def _blocks(text: str) -> Iterable[tuple[int, int]]:
    """Line-level structure: paragraphs, list items, table rows -> (start, end) spans. Lines,
    headings and code fences are read as the corpus reads them (review.corpus.markdown)."""
    current: list[int] | None = None  # [start, end] of the open block
    in_code = False
    for line_start, line_end in markdown.lines(text):
        line = text[line_start:line_end]
        if markdown.FENCE.match(line):
            in_code = not in_code
            if current:
                yield current[0], current[1]
            current = None
            continue
        if in_code or not line.strip() or markdown.HEADING.match(line):
            if current:
                yield current[0], current[1]
            current = None
            continue
        bullet = _BULLET.match(line)
        body_start = line_start + (bullet.end() if bullet else len(line) - len(line.lstrip()))
        continues = current is not None and bullet is None and line.lstrip()[:1].islower()
        if continues and current is not None:
            current[1] = line_start + len(line)
            continue
        if current:
            yield current[0], current[1]
        current = [body_start, line_start + len(line)]
    if current:
        yield current[0], current[1]


def split_claims(text: str) -> list[Claim]:
    """Cut an answer into claims (sentences and list items) with offsets into ``text``."""
    if not isinstance(text, str):
        raise InputError(f"answer text must be a string, got {type(text).__name__}")
    claims: list[Claim] = []
    for b_start, b_end in _blocks(text):
        for s, e in _sentences(text, b_start, b_end):
            while s < e and text[s].isspace():
                s += 1
            while e > s and text[e - 1].isspace():
                e -= 1
            piece = text[s:e]
            if any(ch.isalnum() for ch in piece):
                claims.append(Claim(piece, s, e))
    return claims


# --- citations ---------------------------------------------------------------------------------

_ID = r"\^?[A-Za-z0-9][A-Za-z0-9_.:#/-]*"
_CITATION = re.compile(rf"\[\s*({_ID}(?:\s*[,;]\s*{_ID})*)\s*\](?!\()")


def extract_citations(text: str) -> list[str]:
    """Ids cited in ``text`` with bracket markers (``[2]``, ``[1, 3]``, ``[POL-REFUND]``,
    ``[^4]``), in order of first appearance. Markdown links ``[text](url)`` are not citations."""
    found: dict[str, None] = {}
    for m in _CITATION.finditer(text):
        for part in re.split(r"\s*[,;]\s*", m.group(1)):
            found.setdefault(part.lstrip("^"), None)
    return list(found)


def claims_with_citations(text: str) -> list[tuple[Claim, list[str]]]:
    """``split_claims`` with the ids each claim cites (input for ``citation_validity``)."""
    return [(c, extract_citations(c.text)) for c in split_claims(text)]


# --- verdicts ----------------------------------------------------------------------------------

VERDICTS: tuple[str, ...] = tuple(ClaimVerdict)
#: The verdicts that say the evidence does not back the claim.
_AGAINST = (ClaimVerdict.unsupported, ClaimVerdict.contradicted)
Status = Literal["pass", "fail", "unreviewed", "not_a_claim"]


@dataclass(frozen=True)
class ClaimCheck:
    """The outcome for one claim. ``passes`` is None while the claim is unreviewed (and for
    text the reviewer marked as not a claim, which is left out of the answer's result)."""

    index: int
    text: str
    cited_ids: tuple[str, ...]
    invalid_ids: tuple[str, ...]
    verdict: str | None
    status: Status
    passes: bool | None
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class CitationReport:
    """Per-claim checks and the answer-level result.

    ``answer_passes``: True when every claim is supported with valid citations, False as soon
    as one claim fails, None while the rest is unreviewed. ``citations_valid``: every cited id
    was in the context and every claim that cites something is supported (None while a citing
    claim is unreviewed). ``invalid_ids``: cited ids that were not in the context.
    """

    claims: tuple[ClaimCheck, ...]
    answer_passes: bool | None
    citations_valid: bool | None
    invalid_ids: tuple[str, ...]
    counts: Mapping[str, int] = field(default_factory=dict)

    def to_frame(self) -> pd.DataFrame:
        """One row per claim, for display."""
        return pd.DataFrame(
            [
                {
                    "claim": c.index + 1,
                    "text": c.text,
                    "cites": ", ".join(c.cited_ids),
                    "not_in_context": ", ".join(c.invalid_ids),
                    "verdict": c.verdict or "",
                    "status": c.status,
                    "problems": "; ".join(c.problems),
                }
                for c in self.claims
            ],
            columns=["claim", "text", "cites", "not_in_context", "verdict", "status", "problems"],
        )


def _norm_id(value: object) -> str:
    return str(value).strip()


def citation_validity(
    claims_with_cited_ids: Sequence[tuple[Claim | str, Iterable[str | int]]],
    context_ids: Iterable[str | int],
    verdicts: Sequence[str | None] | Mapping[int, str | None],
    *,
    require_citation: bool = False,
) -> CitationReport:
    """Check an answer claim by claim.

    ``claims_with_cited_ids``: (claim, ids it cites) in answer order; ``context_ids``: ids of
    the passages actually sent to the model; ``verdicts``: the reviewer's verdict per claim
    (by position, or a mapping from 0-based claim index; None or absent = not reviewed yet),
    one of ``VERDICTS``.

    A cited id that is not in the context is invalid and fails its claim. A claim passes only
    if it is supported and all its citations are valid (and, with ``require_citation``, it
    cites something). The answer passes only if every claim passes; ``not_a_claim`` text
    (a greeting, a lead-in) is left out.
    """
    n = len(claims_with_cited_ids)
    if isinstance(verdicts, Mapping):
        outside = [k for k in verdicts if not isinstance(k, int) or not 0 <= k < n]
        if outside:
            raise InputError(
                f"verdicts: {readable.plural(len(outside), 'claim number')} "
                f"{', '.join(map(repr, outside))} "
                f"{readable.plural(len(outside), 'does', 'do')} not exist "
                f"(the answer has {n} claims)"
            )
        by_index: list[str | None] = [verdicts.get(i) for i in range(n)]
    else:
        if len(verdicts) != n:
            raise InputError(
                f"verdicts: {len(verdicts)} verdicts given for {n} claims; give one per claim "
                "(None for not reviewed)"
            )
        by_index = list(verdicts)
    bad = [
        f"claim {i + 1}: {v!r}"
        for i, v in enumerate(by_index)
        if v is not None and v not in VERDICTS
    ]
    if bad:
        raise InputError(
            "verdicts: unknown verdict (" + "; ".join(bad) + "); use " + ", ".join(VERDICTS)
        )
    context = {_norm_id(c) for c in context_ids}

    checks: list[ClaimCheck] = []
    for i, ((claim, cited), verdict) in enumerate(
        zip(claims_with_cited_ids, by_index, strict=True)
    ):
        text = claim.text if isinstance(claim, Claim) else str(claim)
        cited_ids = tuple(dict.fromkeys(_norm_id(c) for c in cited))
        invalid = tuple(c for c in cited_ids if c not in context)
        problems = [f"cites {c!r}, which was not in the context" for c in invalid]
        status: Status
        if verdict == ClaimVerdict.not_a_claim:
            status = "fail" if invalid else "not_a_claim"
        elif verdict in _AGAINST:
            problems.insert(0, f"{verdict} by the evidence")
            status = "fail"
        elif require_citation and not cited_ids and verdict is not None:
            problems.append("no citation")
            status = "fail"
        elif invalid:
            status = "fail"
        elif verdict == ClaimVerdict.supported:
            status = "pass"
        else:
            status = "unreviewed"
        passes = {"pass": True, "fail": False}.get(status)
        checks.append(
            ClaimCheck(i, text, cited_ids, invalid, verdict, status, passes, tuple(problems))
        )

    statuses = [c.status for c in checks]
    if "fail" in statuses:
        answer_passes: bool | None = False
    elif "unreviewed" in statuses:
        answer_passes = None
    else:
        answer_passes = True

    all_invalid = tuple(dict.fromkeys(c for chk in checks for c in chk.invalid_ids))
    citing = [c for c in checks if c.cited_ids]
    citations_valid: bool | None
    if all_invalid or any(c.verdict in _AGAINST for c in citing):
        citations_valid = False
    elif any(c.verdict is None for c in citing):
        citations_valid = None
    else:
        citations_valid = True

    reviewable = [c for c in checks if c.verdict != ClaimVerdict.not_a_claim]
    counts = {
        "claims": len(reviewable),
        "supported": sum(c.verdict == ClaimVerdict.supported for c in reviewable),
        "unsupported": sum(c.verdict == ClaimVerdict.unsupported for c in reviewable),
        "contradicted": sum(c.verdict == ClaimVerdict.contradicted for c in reviewable),
        "unreviewed": sum(c.verdict is None for c in reviewable),
        "not_a_claim": len(checks) - len(reviewable),
        "passing": sum(c.status == "pass" for c in checks),
        "uncited": sum(not c.cited_ids for c in reviewable),
    }
    return CitationReport(tuple(checks), answer_passes, citations_valid, all_invalid, counts)
