"""The wording lint, pure (no database, no Streamlit).

``lint`` checks any text (a template, a rendered message, or the final text of a production
trace) against the wording rules and returns findings with character spans and a sentence a
product owner can act on. The rules are regular expressions over small vocabularies, tuned on
``tests/data/wording_corpus.yaml`` to give no false alarms on realistic good messages."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import pandas as pd

from review.core import readable
from review.core.errors import InputError
from review.wording.findings import KEY_ONLY_RULES, RULES, Finding, excerpt
from review.wording.messages import WordingSet, render
from review.wording.rules import RULE_CHECKS, rule_context

__all__ = ["LINT_COLUMNS", "lint", "lint_frame", "lint_message", "lint_set"]


def lint(
    text: str,
    *,
    key: str | None = None,
    restricted_titles: Iterable[str] = (),
    allowed_contacts: Iterable[str] = (),
    doc_ids: Iterable[str] = (),
    rules: Iterable[str] | None = None,
    company_names: Iterable[str] = (),
) -> list[Finding]:
    """Check one customer-facing text against the wording rules.

    ``key`` is the message key the text is used for: the follow-up rule runs only for F1 and
    the person rule only for E1. ``restricted_titles`` and ``doc_ids`` must never appear;
    ``allowed_contacts`` are the only emails, URLs, phone numbers and names a message may give.
    ``rules`` restricts the check to some rule ids. ``company_names`` are the deployment's own
    names (the wording file's ``company_names``): "<name> does not offer ..." is a universal
    negative like "we do not offer ...", and a name with them is a team or product, not a
    person. Findings are sorted by position.
    """
    selected = list(RULES) if rules is None else list(rules)
    unknown = [r for r in selected if r not in RULES]
    if unknown:
        raise InputError(
            f"unknown wording {readable.plural(len(unknown), 'rule')}: {', '.join(unknown)} "
            f"(known: {', '.join(RULES)})"
        )
    ctx = rule_context(text, restricted_titles, allowed_contacts, doc_ids, company_names)
    findings: list[Finding] = []
    for rule in selected:
        only_for = KEY_ONLY_RULES.get(rule)
        if only_for is not None and key != only_for:
            continue
        findings.extend(RULE_CHECKS[rule](ctx))
    return sorted(set(findings), key=lambda f: (f.start, f.end, f.rule))


def lint_message(
    wording: WordingSet,
    key: str,
    *,
    values: Mapping[str, object] | None = None,
    restricted_titles: Iterable[str] = (),
    doc_ids: Iterable[str] = (),
) -> list[Finding]:
    """Lint one message of a wording set with its own contact list and restricted titles.

    Without ``values`` the template itself is checked (spans point into ``message.text``);
    with ``values`` the rendered text is checked (spans point into ``render(...)``).
    """
    message = wording.message(key)
    text = message.text if values is None else render(message, values)
    return lint(
        text,
        key=key,
        restricted_titles=[*wording.restricted_titles, *restricted_titles],
        allowed_contacts=wording.allowed_contacts,
        doc_ids=doc_ids,
        company_names=wording.company_names,
    )


def lint_set(
    wording: WordingSet, *, restricted_titles: Iterable[str] = (), doc_ids: Iterable[str] = ()
) -> dict[str, list[Finding]]:
    """Lint every message template of a wording set: key -> findings (empty when clean)."""
    titles = tuple(restricted_titles)
    ids = tuple(doc_ids)
    return {
        key: lint_message(wording, key, restricted_titles=titles, doc_ids=ids)
        for key in wording.messages
    }


LINT_COLUMNS = ["row", "rule", "start", "end", "excerpt", "explanation"]


def lint_frame(
    texts: Sequence[str] | pd.Series,
    *,
    keys: Sequence[str | None] | pd.Series | None = None,
    restricted_titles: Iterable[str] = (),
    allowed_contacts: Iterable[str] = (),
    doc_ids: Iterable[str] = (),
    company_names: Iterable[str] = (),
) -> pd.DataFrame:
    """Lint many texts (e.g. final texts of sampled traces): one row per finding.

    ``row`` is the position (or the Series index label) of the text; texts without findings
    produce no rows. Patterns are compiled once for the whole batch.
    """
    series = texts if isinstance(texts, pd.Series) else pd.Series(list(texts), dtype=object)
    key_list: list[str | None]
    if keys is None:
        key_list = [None] * len(series)
    else:
        key_list = [None if pd.isna(k) else str(k) for k in list(keys)]
        if len(key_list) != len(series):
            raise InputError(f"{len(key_list)} keys given for {len(series)} texts")
    titles, contacts, ids = tuple(restricted_titles), tuple(allowed_contacts), tuple(doc_ids)
    names = tuple(company_names)
    rows: list[tuple[object, str, int, int, str, str]] = []
    for label, text, key in zip(series.index, series.tolist(), key_list, strict=True):
        if not isinstance(text, str) or not text:
            continue
        for f in lint(
            text,
            key=key,
            restricted_titles=titles,
            allowed_contacts=contacts,
            doc_ids=ids,
            company_names=names,
        ):
            rows.append((label, f.rule, f.start, f.end, excerpt(text, f), f.explanation))
    return pd.DataFrame(rows, columns=LINT_COLUMNS)
