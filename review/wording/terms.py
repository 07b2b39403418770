"""The corpus terms the wording lint needs (restricted titles, document ids) and lint
snapshots, frames, caret lines and reports of a wording set."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
from sqlalchemy import Engine, select

from review.core import clearance
from review.core.identity import Role
from review.wording.findings import Finding, excerpt, rule_title
from review.wording.lint import lint_set
from review.wording.messages import WordingSet, needs_compliance
from review.wording.versions import changed_keys
from storage.db import read_session
from storage.models import Document

__all__ = [
    "CorpusTerms",
    "all_restricted_titles",
    "caret_lines",
    "corpus_terms",
    "findings_frame",
    "lint_report",
    "lint_snapshot",
    "lint_wording",
]


# ---------------------------------------------------------------------------------------------
# Corpus terms for the lint
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CorpusTerms:
    """What the lint must never see in a customer message, from the corpus."""

    restricted_titles: tuple[str, ...]
    restricted_doc_ids: tuple[str, ...]
    doc_ids: tuple[str, ...]

    def fingerprint(self) -> str:
        payload = json.dumps(
            [self.restricted_titles, self.restricted_doc_ids, self.doc_ids], ensure_ascii=False
        )
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def corpus_terms(engine: Engine) -> CorpusTerms:
    """Current titles and ids of restricted documents, and every document id (SQL DISTINCT)."""
    with read_session(engine) as s:
        restricted = s.execute(
            select(Document.doc_key, Document.title)
            .where(
                Document.access_scope == clearance.RESTRICTED_SCOPE, Document.is_current.is_(True)
            )
            .distinct()
        ).all()
        ids = s.scalars(select(Document.doc_key).distinct()).all()
    return CorpusTerms(
        tuple(sorted({str(t) for _, t in restricted})),
        tuple(sorted({str(k) for k, _ in restricted})),
        tuple(sorted({str(i) for i in ids})),
    )


def all_restricted_titles(ws: WordingSet, terms: CorpusTerms) -> tuple[str, ...]:
    return tuple(dict.fromkeys([*ws.restricted_titles, *terms.restricted_titles]))


def lint_wording(ws: WordingSet, terms: CorpusTerms) -> dict[str, list[Finding]]:
    """Every message template of ``ws`` linted with the corpus's restricted titles and ids."""
    return lint_set(ws, restricted_titles=terms.restricted_titles, doc_ids=terms.doc_ids)


def _finding_dict(text: str, f: Finding) -> dict[str, Any]:
    return {
        "rule": f.rule,
        "start": f.start,
        "end": f.end,
        "excerpt": excerpt(text, f),
        "explanation": f.explanation,
    }


def lint_snapshot(ws: WordingSet, parent: WordingSet | None, terms: CorpusTerms) -> dict[str, Any]:
    """What is stored with a proposal or signature: changed keys, who must sign, and the
    lint findings of every message (with spans into the message text)."""
    findings = lint_wording(ws, terms)
    return {
        "changed_keys": changed_keys(parent, ws),
        "needs_compliance": Role.compliance in _roles_for(ws, parent),
        "lint_total": sum(len(v) for v in findings.values()),
        "lint": {
            key: [_finding_dict(ws.messages[key].text, f) for f in fs]
            for key, fs in findings.items()
            if fs
        },
        "restricted_titles_checked": len(all_restricted_titles(ws, terms)),
        "corpus_terms": terms.fingerprint(),
    }


def _roles_for(ws: WordingSet, parent: WordingSet | None) -> frozenset[Role]:
    if parent is None or any(needs_compliance(k) for k in changed_keys(parent, ws)):
        return frozenset({Role.product_owner, Role.compliance})
    return frozenset({Role.product_owner})


def findings_frame(text: str, findings: Sequence[Finding]) -> pd.DataFrame:
    """Findings as a table: rule (its title), span, the flagged excerpt and the explanation."""
    return pd.DataFrame(
        [{**_finding_dict(text, f), "rule": rule_title(f.rule)} for f in findings],
        columns=["rule", "start", "end", "excerpt", "explanation"],
    )


def caret_lines(text: str, findings: Sequence[Finding], width: int = 88) -> str:
    """The text wrapped at ``width`` with a line of ``^`` under each flagged span and the rules'
    titles at the right ("Blames the user", never the id): plain text for ``st.code`` (no
    HTML, no markdown)."""
    flat = text.replace("\n", " ")
    out: list[str] = []
    pos = 0
    while pos < len(flat) or not out:
        end = min(len(flat), pos + width)
        if end < len(flat):
            cut = flat.rfind(" ", pos + 1, end + 1)
            end = cut + 1 if cut > pos else end
        out.append(flat[pos:end].rstrip())
        marks = [" "] * (end - pos)
        rules: list[str] = []
        for f in findings:
            lo, hi = max(f.start, pos), min(f.end, end)
            if lo < hi:
                for i in range(lo, hi):
                    marks[i - pos] = "^"
                if f.rule not in rules:
                    rules.append(f.rule)
        if rules:
            titles = ", ".join(rule_title(r) for r in rules)
            out.append(("".join(marks).rstrip() + "  " + titles).rstrip())
        if end >= len(flat):
            break
        pos = end
    return "\n".join(out)


def lint_report(ws: WordingSet, terms: CorpusTerms | None = None) -> list[str]:
    """One line per lint finding of a wording set (``KEY rule: "excerpt": explanation``), for
    the command line; empty when every message is clean."""
    terms = terms or CorpusTerms((), (), ())
    return [
        f'{key} {f.rule} [{f.start}:{f.end}] "{excerpt(ws.messages[key].text, f)}": {f.explanation}'
        for key, fs in lint_wording(ws, terms).items()
        for f in fs
    ]
