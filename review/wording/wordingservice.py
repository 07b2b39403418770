"""Refusal wording as a signed policy: the wording in force, proposals, sign-off, comparisons,
and the production check of what the assistant actually said.

The wording file (``policies/refusal-wording.yaml``, validated and linted by
:mod:`review.wording.wording`) is versioned through the generic sign-off service
(:mod:`review.policy.signoff`) as kind ``refusal_wording``:

* **Who signs.** A product owner signs every change. Compliance signs as well when R3 (answer
  blocked as ungrounded) or E1 (escalation) differs from the parent version in any field, and
  always when there is no parent (the first signed version). The author never signs.
* **What a signature covers.** The sha256 of the wording's meaning: the validated file without
  its ``version`` number, comments or layout, so reformatting is not a change.
* **Lint findings do not block a proposal** (the lint is a set of heuristics, and a product
  owner may need to put a deliberate exception in front of the approvers), but they are
  stored in the proposal's snapshot, shown in the approval view, and *approving* a version
  whose messages still have findings needs a note saying why they are acceptable. Findings
  are recomputed at signing time against the corpus as it is then, and the signature stores
  what the signer saw.
* **No silent overwrite.** A proposal records the version it was edited from. Proposing from
  a version that is no longer in force, or approving a proposal whose parent is no longer in
  force, is refused: it would undo the changes approved in between.

The production check lints the final texts of imported traces that did not simply answer
(decision other than ``answer``, plus answers that carry a reason code other than
``false_premise``, which is how a caveat answer is logged) with the wording in force, the
titles of the corpus's restricted documents and every document id. The scan streams traces in
id order in batches, lints each distinct text once, and keeps only compact arrays of the
offending traces (id, time, restricted flag, rule bits) in a per-process cache. Later calls
scan only traces added since; a change in the count of candidates, or in how many of them are
restricted, or in the wording or corpus terms, starts a fresh scan. Traces whose text was
rewritten in place (not something the importers do) are not re-linted until then.
Restricted traces are listed only for users with clearance; for everyone else the titles and
ids of restricted documents are masked in the texts they may see.
"""

from __future__ import annotations

import datetime as dt
import difflib
import hashlib
import json
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import pandas as pd
import yaml
from sqlalchemy import Engine, case, func, select
from sqlalchemy import text as sql_text

from review.core.errors import InputError, PermissionDenied, StaleWriteError
from review.core.identity import Actor, Permission, Role, require
from review.policy import signoff
from review.wording.wording import (
    REQUIRED_KEYS,
    RULES,
    Finding,
    WordingSet,
    excerpt,
    lint,
    lint_set,
    needs_compliance,
    parse_wording,
    placeholders_in,
    wording_path,
)
from storage.db import read_session
from storage.models import REFUSAL_TEXTS_WHERE, Document, Trace

__all__ = [
    "KIND",
    "MESSAGE_KEY_OF_DECISION",
    "CorpusTerms",
    "MessageChange",
    "MessageDraft",
    "OffendingTrace",
    "ProductionPage",
    "ProductionSummary",
    "TraceFinding",
    "VersionReview",
    "WordingInForce",
    "canonical",
    "caret_lines",
    "changed_keys",
    "clear_production_cache",
    "compare",
    "compare_frame",
    "corpus_terms",
    "draft_yaml",
    "dump_wording",
    "findings_frame",
    "in_force",
    "lint_report",
    "lint_snapshot",
    "lint_wording",
    "message_key_for",
    "pending",
    "production_counts",
    "production_findings",
    "propose_edits",
    "propose_wording",
    "required_roles",
    "review_version",
    "setting_changes",
    "sign_wording",
    "splice_wording",
    "trace_findings",
    "unchecked_count",
    "versions",
    "weekly_violations",
    "word_diff",
    "wording_of",
    "yaml_diff",
]

KIND = "refusal_wording"
_MASK = "[restricted]"

# ---------------------------------------------------------------------------------------------
# The kind: canonical form and required roles
# ---------------------------------------------------------------------------------------------


@lru_cache(maxsize=256)
def _parsed(text: str) -> WordingSet | None:
    try:
        return parse_wording(text, "wording")
    except InputError:
        return None


def canonical(text: str) -> str:
    """What a signature covers: the wording's content without ``version``, comments or layout."""
    ws = parse_wording(text, "refusal wording")
    data = ws.model_dump(mode="json")
    data.pop("version", None)
    return json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _entry(ws: WordingSet, key: str) -> tuple[object, ...] | None:
    msg = ws.messages.get(key)
    if msg is None:
        return None
    return (msg.text, tuple(msg.placeholders), ws.locale_for(key), msg.description)


def _key_order(keys: Iterable[str]) -> list[str]:
    keys = set(keys)
    return [k for k in REQUIRED_KEYS if k in keys] + sorted(keys - set(REQUIRED_KEYS))


def changed_keys(old: WordingSet | None, new: WordingSet) -> list[str]:
    """Message keys whose text, placeholders, effective locale or description differ (or that
    were added or removed). Without an ``old`` set every key of ``new`` counts as changed."""
    if old is None:
        return _key_order(new.messages)
    keys = set(old.messages) | set(new.messages)
    return _key_order(k for k in keys if _entry(old, k) != _entry(new, k))


def required_roles(text: str, parent_text: str | None) -> frozenset[Role]:
    """Product owner always; compliance too when R3 or E1 changed or there is no parent."""
    both = frozenset({Role.product_owner, Role.compliance})
    new = _parsed(text)
    old = _parsed(parent_text) if parent_text is not None else None
    if new is None or old is None:
        return both
    if any(needs_compliance(k) for k in changed_keys(old, new)):
        return both
    return frozenset({Role.product_owner})


signoff.register_kind(
    signoff.Kind(
        KIND,
        "refusal wording",
        lambda text, source: parse_wording(text, source),
        canonical,
        required_roles,
    )
)


def compliance_reason(old: WordingSet | None, new: WordingSet) -> str:
    """One sentence on whether compliance must sign, and why."""
    if old is None:
        return "Compliance signs too: this is the first signed wording (no parent version)."
    keys = [k for k in changed_keys(old, new) if needs_compliance(k)]
    if keys:
        return f"Compliance signs too: {', '.join(keys)} changed."
    return "A product owner signs; compliance is not needed (R3 and E1 are unchanged)."


# ---------------------------------------------------------------------------------------------
# The wording in force, versions
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WordingInForce:
    wording: WordingSet
    text: str
    version: signoff.VersionView | None  # None: the shipped file, never signed here

    @property
    def version_id(self) -> int | None:
        return self.version.id if self.version is not None else None

    @property
    def label(self) -> str:
        if self.version is None:
            return "the shipped file (not signed in this workbench yet)"
        return f"version {self.version.number}"


def _shipped_text() -> str:
    try:
        return wording_path().read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{wording_path()}: cannot be read: {exc.strerror}") from None


def in_force(engine: Engine) -> WordingInForce:
    """The most recently approved wording version, else the shipped file.

    An approved version whose stored text was edited after signing is refused
    (:class:`review.policy.signoff.TamperedPolicyError`, naming the version): nothing is served, and
    no older approved version takes its place (see :func:`review.policy.signoff.in_force_version`).
    """
    v = signoff.in_force_version(engine, KIND)
    if v is not None:
        return WordingInForce(
            parse_wording(v.yaml_text, f"approved wording version {v.number}"), v.yaml_text, v
        )
    text = _shipped_text()
    return WordingInForce(parse_wording(text, str(wording_path())), text, None)


def versions(engine: Engine) -> list[signoff.VersionView]:
    """Every wording version, newest first."""
    return signoff.versions(engine, KIND)


def pending(engine: Engine) -> list[signoff.VersionView]:
    """Versions waiting for signatures, oldest first."""
    return sorted((v for v in versions(engine) if v.status == "pending"), key=lambda v: v.number)


def wording_of(engine: Engine, version_id: int | None) -> tuple[WordingSet, str]:
    """A stored version's wording and text; ``None`` is the shipped file."""
    if version_id is None:
        text = _shipped_text()
        return parse_wording(text, str(wording_path())), text
    v = signoff.get_version(engine, version_id)
    if v.kind != KIND:
        raise InputError(f"policy version {version_id} is not a refusal wording")
    return parse_wording(v.yaml_text, f"wording version {v.number}"), v.yaml_text


# ---------------------------------------------------------------------------------------------
# Drafts: edited messages -> a validated wording file
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MessageDraft:
    """An edited message. ``None`` fields keep the base message's value; placeholders are
    taken from the ``{names}`` in the text."""

    text: str
    description: str | None = None
    locale: str | None = None


class _Dumper(yaml.SafeDumper):
    """Block lists indented under their key, as in the shipped file."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        return super().increase_indent(flow, False)


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style: str | None = None
    if "\n" in value:
        style = "|"
    elif len(value) > 76 and value == value.strip() and "  " not in value:
        style = ">"
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


class _Flow(list[str]):
    """A short list written on one line, like ``placeholders: [topic, missing_item]``."""


def _represent_flow(dumper: yaml.SafeDumper, value: _Flow) -> yaml.SequenceNode:
    return dumper.represent_sequence("tag:yaml.org,2002:seq", list(value), flow_style=True)


_Dumper.add_representer(str, _represent_str)
_Dumper.add_representer(_Flow, _represent_flow)


def _header(text: str) -> str:
    """The comment block at the top of a wording file (kept when a draft is written)."""
    lines: list[str] = []
    for line in text.splitlines():
        if line.startswith("#") or (not line.strip() and lines):
            lines.append(line)
            continue
        break
    while lines and not lines[-1].strip():
        lines.pop()
    return "\n".join(lines) + "\n" if lines else ""


def _message_plain(ws: WordingSet, key: str) -> dict[str, Any]:
    msg = ws.messages[key]
    entry: dict[str, Any] = {"description": msg.description, "text": msg.text}
    entry["placeholders"] = _Flow(msg.placeholders)
    if msg.locale is not None:
        entry["locale"] = msg.locale
    return entry


def _plain(ws: WordingSet) -> dict[str, Any]:
    messages = {key: _message_plain(ws, key) for key in _key_order(ws.messages)}
    data: dict[str, Any] = {
        "version": ws.version,
        "locale": ws.locale,
        "allowed_contacts": list(ws.allowed_contacts),
    }
    if ws.restricted_titles:
        data["restricted_titles"] = list(ws.restricted_titles)
    data["messages"] = messages
    return data


def dump_wording(ws: WordingSet, header: str = "") -> str:
    """The wording as YAML in the shipped file's layout (long texts folded); round-trips."""
    data = _plain(ws)
    body = _yaml(data)
    if parse_wording(body, "draft") != ws:  # a text the folded style cannot carry exactly
        body = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=10_000)
    return header + ("\n" if header else "") + body


def _yaml(data: Mapping[str, Any]) -> str:
    return yaml.dump(
        dict(data), Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=92, indent=2
    )


def _block_lines(data: Mapping[str, Any], indent: int) -> list[str]:
    pad = " " * indent
    return [pad + line + "\n" if line else "\n" for line in _yaml(data).splitlines()]


def _block_end(lines: Sequence[str], start: int, limit: int) -> int:
    """End (exclusive) of the block starting at ``start`` and running at most to ``limit``,
    leaving out the blank and comment lines that lead into the next block."""
    end = limit
    while end > start + 1 and (not lines[end - 1].strip() or lines[end - 1].lstrip()[:1] == "#"):
        end -= 1
    return end


def splice_wording(base_text: str, new: WordingSet) -> str | None:
    """``base_text`` with only the parts that differ from ``new`` rewritten: comments, order
    and layout of everything else are kept, so the stored YAML diff shows just the change.
    ``None`` when the base file's layout does not allow it (then dump the whole file)."""
    try:
        base = parse_wording(base_text, "base wording")
        root = yaml.compose(base_text)
    except (InputError, yaml.YAMLError):
        return None
    if not isinstance(root, yaml.MappingNode) or root.flow_style:
        return None
    lines = base_text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    top = [(str(k.value), k.start_mark.line, v) for k, v in root.value]
    spans: dict[str, tuple[int, int, int]] = {}
    for i, (name, line, _v) in enumerate(top):
        limit = top[i + 1][1] if i + 1 < len(top) else len(lines)
        spans[name] = (line, _block_end(lines, line, limit), limit)
    edits: list[tuple[int, int, list[str]]] = []  # (start, end, replacement)
    plain = _plain(new)
    for name in ("version", "locale", "allowed_contacts", "restricted_titles"):
        if getattr(base, name) == getattr(new, name):
            continue
        value = plain.get(name)
        if name in spans:
            start, end, _limit = spans[name]
            edits.append((start, end, _block_lines({name: value}, 0) if value else []))
        elif value and "messages" in spans:
            at = spans["messages"][0]
            edits.append((at, at, [*_block_lines({name: value}, 0), "\n"]))
        else:
            return None
    messages_node = next((v for name, _line, v in top if name == "messages"), None)
    if not isinstance(messages_node, yaml.MappingNode) or messages_node.flow_style:
        return None
    _m_start, m_end, _m_limit = spans["messages"]
    entries = [(str(k.value), k.start_mark.line) for k, _v in messages_node.value]
    for i, (key, line) in enumerate(entries):
        limit = entries[i + 1][1] if i + 1 < len(entries) else m_end
        end = _block_end(lines, line, limit)
        if key not in new.messages:
            gap = end
            while gap < limit and not lines[gap].strip():
                gap += 1
            edits.append((line, gap, []))
        elif base.messages[key] != new.messages[key]:
            indent = len(lines[line]) - len(lines[line].lstrip())
            edits.append((line, end, _block_lines({key: plain["messages"][key]}, indent)))
    indent = len(lines[entries[0][1]]) - len(lines[entries[0][1]].lstrip()) if entries else 2
    added = [k for k in plain["messages"] if k not in base.messages]
    if added:
        block: list[str] = []
        for key in added:
            block += ["\n", *_block_lines({key: plain["messages"][key]}, indent)]
        edits.append((m_end, m_end, block))
    for start, end, replacement in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        lines[start:end] = replacement
    out = "".join(lines)
    try:
        if parse_wording(out, "draft") != new:
            return None
    except InputError:
        return None
    return out


def draft_yaml(
    base_text: str,
    edits: Mapping[str, MessageDraft],
    *,
    remove: Iterable[str] = (),
    allowed_contacts: Sequence[str] | None = None,
    restricted_titles: Sequence[str] | None = None,
    version: int | None = None,
    source: str = "draft",
) -> str:
    """Apply edited messages (and optionally new contact / restricted-title lists) to a wording
    file and return the new file, validated: an error names the key and the problem."""
    base = parse_wording(base_text, "base wording")
    data = base.model_dump(mode="json")
    messages: dict[str, Any] = data["messages"]
    for key in remove:
        if key in REQUIRED_KEYS:
            raise InputError(f"messages.{key}: a required message cannot be removed")
        messages.pop(key, None)
    for key, d in edits.items():
        key = key.strip()
        old = messages.get(key)
        description = d.description if d.description is not None else (old or {}).get("description")
        if description is None:
            raise InputError(
                f"messages.{key}.description: a new message needs a description of when it is used"
            )
        messages[key] = {
            "text": d.text.strip(),
            "placeholders": placeholders_in(d.text),
            "locale": d.locale if d.locale is not None else (old or {}).get("locale"),
            "description": description.strip(),
        }
    if allowed_contacts is not None:
        data["allowed_contacts"] = [c.strip() for c in allowed_contacts if c.strip()]
    if restricted_titles is not None:
        data["restricted_titles"] = [t.strip() for t in restricted_titles if t.strip()]
    if version is not None:
        data["version"] = version
    for entry in messages.values():
        if entry.get("locale") is None:
            entry.pop("locale", None)
    raw = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=10_000)
    ws = parse_wording(raw, source)
    return splice_wording(base_text, ws) or dump_wording(ws, _header(base_text))


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
            .where(Document.access_scope == "restricted", Document.is_current.is_(True))
            .distinct()
        ).all()
        ids = s.scalars(select(Document.doc_key).distinct()).all()
    return CorpusTerms(
        tuple(sorted({str(t) for _, t in restricted})),
        tuple(sorted({str(k) for k, _ in restricted})),
        tuple(sorted({str(i) for i in ids})),
    )


def _titles(ws: WordingSet, terms: CorpusTerms) -> tuple[str, ...]:
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
        "restricted_titles_checked": len(_titles(ws, terms)),
        "corpus_terms": terms.fingerprint(),
    }


def _roles_for(ws: WordingSet, parent: WordingSet | None) -> frozenset[Role]:
    if parent is None or any(needs_compliance(k) for k in changed_keys(parent, ws)):
        return frozenset({Role.product_owner, Role.compliance})
    return frozenset({Role.product_owner})


def findings_frame(text: str, findings: Sequence[Finding]) -> pd.DataFrame:
    """Findings as a table: rule, span, the flagged excerpt and the explanation."""
    return pd.DataFrame(
        [_finding_dict(text, f) for f in findings],
        columns=["rule", "start", "end", "excerpt", "explanation"],
    )


def caret_lines(text: str, findings: Sequence[Finding], width: int = 88) -> str:
    """The text wrapped at ``width`` with a line of ``^`` under each flagged span and the rule
    ids at the right: plain text for ``st.code`` (no HTML, no markdown)."""
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
            out.append(("".join(marks).rstrip() + "  " + ", ".join(rules)).rstrip())
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


# ---------------------------------------------------------------------------------------------
# Comparing versions
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MessageChange:
    key: str
    status: Literal["added", "removed", "changed", "unchanged"]
    fields: tuple[str, ...]
    old_text: str | None
    new_text: str | None
    needs_compliance: bool

    @property
    def diff(self) -> str:
        """Word-level diff, ``[-removed-]`` and ``{+added+}`` (plain text)."""
        return word_diff(self.old_text or "", self.new_text or "")


_TOKEN = re.compile(r"\S+\s*|\s+")


def word_diff(old: str, new: str) -> str:
    """Word-level diff in git's plain word-diff style: ``[-old-]{+new+}``."""
    a, b = _TOKEN.findall(old), _TOKEN.findall(new)
    out: list[str] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            out.append("".join(a[i1:i2]))
            continue
        if i2 > i1:
            out.append("[-" + "".join(a[i1:i2]) + "-]")
        if j2 > j1:
            out.append("{+" + "".join(b[j1:j2]) + "+}")
    return "".join(out)


def compare(old: WordingSet | None, new: WordingSet) -> list[MessageChange]:
    """One row per message key of either set: added, removed, changed (which fields) or
    unchanged, with both texts. Required keys first, then custom keys by name."""
    rows: list[MessageChange] = []
    old_keys = set(old.messages) if old is not None else set()
    for key in _key_order(old_keys | set(new.messages)):
        a = old.messages.get(key) if old is not None else None
        b = new.messages.get(key)
        if a is None:
            status: Literal["added", "removed", "changed", "unchanged"] = "added"
            fields: tuple[str, ...] = ("text",)
        elif b is None:
            status, fields = "removed", ("text",)
        else:
            assert old is not None
            diffs = []
            if a.text != b.text:
                diffs.append("text")
            if list(a.placeholders) != list(b.placeholders):
                diffs.append("placeholders")
            if old.locale_for(key) != new.locale_for(key):
                diffs.append("locale")
            if a.description != b.description:
                diffs.append("description")
            fields = tuple(diffs)
            status = "changed" if diffs else "unchanged"
        rows.append(
            MessageChange(
                key,
                status,
                fields,
                a.text if a is not None else None,
                b.text if b is not None else None,
                needs_compliance(key),
            )
        )
    return rows


def setting_changes(
    old: WordingSet | None, new: WordingSet, *, reveal_restricted: bool = True
) -> list[tuple[str, str]]:
    """Changes outside the messages: (field, what changed). Without ``reveal_restricted``
    (a viewer without clearance) restricted titles are counted, not named."""
    if old is None:
        return []
    out: list[tuple[str, str]] = []
    if old.locale != new.locale:
        out.append(("locale", f"{old.locale} -> {new.locale}"))
    for name in ("allowed_contacts", "restricted_titles"):
        before, after = list(getattr(old, name)), list(getattr(new, name))
        hide = name == "restricted_titles" and not reveal_restricted
        for item in after:
            if item not in before:
                out.append((name, "added: " + (_MASK if hide else item)))
        for item in before:
            if item not in after:
                out.append((name, "removed: " + (_MASK if hide else item)))
    return out


def yaml_diff(old: str, new: str, old_name: str = "before", new_name: str = "after") -> str:
    """Unified line diff of two wording files (plain text, for ``st.code``)."""
    return "".join(
        difflib.unified_diff(
            old.splitlines(keepends=True), new.splitlines(keepends=True), old_name, new_name
        )
    )


def compare_frame(changes: Sequence[MessageChange]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "key": c.key,
                "status": c.status,
                "fields": ", ".join(c.fields),
                "compliance signs": "yes" if c.needs_compliance else "",
                "before": c.old_text or "",
                "after": c.new_text or "",
            }
            for c in changes
        ],
        columns=["key", "status", "fields", "compliance signs", "before", "after"],
    )


# ---------------------------------------------------------------------------------------------
# Proposing and signing
# ---------------------------------------------------------------------------------------------

_UNCHECKED: Literal["unchecked"] = "unchecked"


def _check_base(engine: Engine, current: WordingInForce, based_on: int | None) -> None:
    """Refuse (StaleWriteError) when the wording in force is not the one the draft started
    from: proposing it would silently drop what was approved in between."""
    if current.version_id != based_on:
        was = "the shipped file"
        if based_on is not None:
            try:
                was = f"version {signoff.get_version(engine, based_on).number}"
            except InputError:
                was = "a version that no longer exists"
        raise StaleWriteError(
            f"the wording in force changed while you were editing: you started from {was}, "
            f"but {current.label} is in force now"
            + (
                f" (approved {current.version.approved_on:%Y-%m-%d %H:%M} UTC)"
                if current.version is not None and current.version.approved_on
                else ""
            )
            + ". Nothing was proposed; review your draft against it and propose again."
        )


def propose_wording(
    engine: Engine,
    actor: Actor,
    yaml_text: str,
    rationale: str,
    *,
    based_on: int | Literal["unchecked"] | None = _UNCHECKED,
) -> int:
    """Store a complete wording file as the next version, pending sign-off.

    The file is validated (errors name the key); lint findings are stored in the snapshot but
    do not block the proposal. ``based_on`` is the id of the version the author edited
    (``None``: the shipped file); when given and no longer in force, nothing is stored.
    """
    require(actor, Permission.propose_policy)
    ws = parse_wording(yaml_text, "proposed refusal wording")
    if not rationale.strip():
        raise InputError("say why: a rationale is required for every change")
    current = in_force(engine)
    if based_on != _UNCHECKED:
        _check_base(engine, current, based_on if isinstance(based_on, int) else None)
    parent = current.wording if current.version is not None else None
    snapshot = lint_snapshot(ws, parent, corpus_terms(engine))
    return signoff.propose(engine, actor, KIND, yaml_text, rationale, snapshot=snapshot)


def _next_number(engine: Engine) -> int:
    return max((v.number for v in versions(engine)), default=0) + 1


def propose_edits(
    engine: Engine,
    actor: Actor,
    edits: Mapping[str, MessageDraft],
    rationale: str,
    *,
    based_on: int | Literal["unchecked"] | None = _UNCHECKED,
    remove: Iterable[str] = (),
    allowed_contacts: Sequence[str] | None = None,
) -> int:
    """Apply edited messages to the wording in force and propose the result."""
    require(actor, Permission.propose_policy)
    current = in_force(engine)
    if based_on != _UNCHECKED:
        _check_base(engine, current, based_on if isinstance(based_on, int) else None)
    text = draft_yaml(
        current.text,
        edits,
        remove=remove,
        allowed_contacts=allowed_contacts,
        version=_next_number(engine),
        source="your draft",
    )
    return propose_wording(engine, actor, text, rationale, based_on=based_on)


@dataclass(frozen=True)
class VersionReview:
    """Everything an approver needs for one version."""

    version: signoff.VersionView
    wording: WordingSet
    parent: WordingSet | None
    parent_label: str
    changes: list[MessageChange]
    settings: list[tuple[str, str]]
    findings: dict[str, list[Finding]]
    compliance_reason: str
    stale_parent: str | None  # why it can no longer be approved, when its parent is not in force

    @property
    def lint_total(self) -> int:
        return sum(len(v) for v in self.findings.values())


def review_version(
    engine: Engine,
    version_id: int,
    terms: CorpusTerms | None = None,
    *,
    reveal_restricted: bool = True,
) -> VersionReview:
    """A version with its changes against its parent (or the shipped file), the lint of every
    message with the corpus as it is now, who must sign and why, and whether its parent is
    still in force. ``reveal_restricted=False`` masks restricted titles in setting changes."""
    v = signoff.get_version(engine, version_id)
    if v.kind != KIND:
        raise InputError(f"policy version {version_id} is not a refusal wording")
    ws = parse_wording(v.yaml_text, f"wording version {v.number}")
    parent: WordingSet | None = None
    parent_label = "nothing (first signed version)"
    if v.parent_id is not None:
        pv = signoff.get_version(engine, v.parent_id)
        parent = parse_wording(pv.yaml_text, f"wording version {pv.number}")
        parent_label = f"version {pv.number}"
    terms = terms or corpus_terms(engine)
    stale: str | None = None
    if v.status == "pending":
        current = signoff.current_approved(engine, KIND)
        current_id = current.id if current is not None else None
        if current_id != v.parent_id:
            since = f"version {current.number}" if current is not None else "another version"
            stale = (
                f"Version {v.number} was proposed as a change to {parent_label}, but {since} "
                "has been approved since; approving it would undo that change. Reject it and "
                "propose the edit again from the wording in force."
            )
    shown_parent = parent
    if shown_parent is None:
        shipped = _parsed(_shipped_text())
        shown_parent = shipped
        parent_label = "the shipped file (no signed parent)"
    return VersionReview(
        v,
        ws,
        parent,
        parent_label,
        compare(shown_parent, ws),
        setting_changes(shown_parent, ws, reveal_restricted=reveal_restricted),
        lint_wording(ws, terms),
        compliance_reason(parent, ws),
        stale,
    )


def sign_wording(
    engine: Engine,
    actor: Actor,
    version_id: int,
    meaning: str,
    *,
    role: Role | None = None,
    note: str = "",
) -> int:
    """Approve or reject a pending wording version (see :func:`review.policy.signoff.sign` for the
    four-eyes rules). Also refused: approving a version whose parent is no longer in force,
    and approving a version with lint findings without a note. The signature stores the lint
    the signer saw and the fingerprint of the corpus terms it was computed with."""
    require(actor, Permission.approve_policy)
    terms = corpus_terms(engine)
    r = review_version(engine, version_id, terms)
    if meaning == "approve":
        if r.stale_parent:
            raise InputError(r.stale_parent)
        if r.lint_total and not note.strip():
            raise InputError(
                f"version {r.version.number} has {r.lint_total} lint finding(s); approving it "
                "needs a note saying why they are acceptable"
            )
    snapshot = lint_snapshot(r.wording, r.parent, terms)
    return signoff.sign(
        engine,
        actor,
        version_id,
        meaning,
        role=role,
        note=note,
        data_fingerprint=terms.fingerprint(),
        metrics_snapshot=snapshot,
    )


# ---------------------------------------------------------------------------------------------
# Production check
# ---------------------------------------------------------------------------------------------

MESSAGE_KEY_OF_DECISION: Mapping[str, str | None] = {
    "clarify": "F1",
    "escalate": "E1",
    "answer": "C1",  # an answer that is linted is a caveat answer
    "abstain": None,
    "partial": None,
}
RULE_BITS: Mapping[str, int] = {rule: 1 << i for i, rule in enumerate(RULES)}
_BATCH = 5000
_MEMO_LIMIT = 50_000


def message_key_for(decision: str | None) -> str | None:
    """The message key whose key-only rules apply to a trace's final text."""
    return MESSAGE_KEY_OF_DECISION.get(decision or "")


def _candidates() -> Any:
    """Traces whose final text is a refusal, follow-up, escalation, partial or caveat.

    The same condition, with the same inline constants, defines the partial index
    ``ix_traces_refusal_texts`` (storage.models), so the database counts candidates from that
    small index instead of reading every trace; a bound parameter would hide it."""
    return sql_text(REFUSAL_TEXTS_WHERE)


@dataclass(frozen=True)
class _LintContext:
    titles: tuple[str, ...]
    contacts: tuple[str, ...]
    doc_ids: tuple[str, ...]
    restricted_doc_ids: tuple[str, ...]
    version: int | None

    def key(self) -> str:
        payload = json.dumps(
            [self.titles, self.contacts, self.doc_ids, self.restricted_doc_ids],
            ensure_ascii=False,
        )
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def _lint_context(engine: Engine) -> _LintContext:
    current = in_force(engine)
    terms = corpus_terms(engine)
    return _LintContext(
        _titles(current.wording, terms),
        tuple(current.wording.allowed_contacts),
        terms.doc_ids,
        terms.restricted_doc_ids,
        current.version.number if current.version is not None else None,
    )


def _lint_trace(ctx: _LintContext, text: str, key: str | None) -> list[Finding]:
    return lint(
        text,
        key=key,
        restricted_titles=ctx.titles,
        allowed_contacts=ctx.contacts,
        doc_ids=ctx.doc_ids,
    )


@dataclass
class _Scan:
    upto: int = 0
    checked: int = 0
    checked_restricted: int = 0
    ids: npt.NDArray[np.int64] = field(default_factory=lambda: np.empty(0, np.int64))
    at: npt.NDArray[np.float64] = field(default_factory=lambda: np.empty(0, np.float64))
    restricted: npt.NDArray[np.bool_] = field(default_factory=lambda: np.empty(0, np.bool_))
    masks: npt.NDArray[np.int64] = field(default_factory=lambda: np.empty(0, np.int64))


_SCANS: dict[tuple[str, str], _Scan] = {}
_SCAN_LOCK = threading.Lock()


def clear_production_cache() -> None:
    """Forget every cached production scan (tests; after bulk edits of trace texts)."""
    with _SCAN_LOCK:
        _SCANS.clear()


def _population(engine: Engine) -> tuple[int, int, int]:
    """(candidates, restricted candidates, highest trace id) in one SQL aggregate."""
    with read_session(engine) as s:
        row = s.execute(
            select(
                func.count(Trace.id),
                func.coalesce(func.sum(case((Trace.restricted.is_(True), 1), else_=0)), 0),
                func.coalesce(func.max(Trace.id), 0),
            ).where(_candidates())
        ).one()
    return int(row[0]), int(row[1]), int(row[2])


def _extend(engine: Engine, scan: _Scan, ctx: _LintContext, upto: int) -> None:
    """Lint candidates with scan.upto < id <= upto, in id order, batch by batch."""
    memo: dict[tuple[str, str | None], int] = {}
    last = scan.upto
    ids: list[int] = []
    ats: list[float] = []
    flags: list[bool] = []
    masks: list[int] = []
    while True:
        with read_session(engine) as s:
            rows = s.execute(
                select(Trace.id, Trace.at, Trace.decision, Trace.answer_text, Trace.restricted)
                .where(_candidates(), Trace.id > last, Trace.id <= upto)
                .order_by(Trace.id)
                .limit(_BATCH)
            ).all()
        if not rows:
            break
        for pk, at, decision, text, restricted in rows:
            key = message_key_for(decision)
            memo_key = (str(text), key)
            mask = memo.get(memo_key)
            if mask is None:
                mask = 0
                for f in _lint_trace(ctx, str(text), key):
                    mask |= RULE_BITS[f.rule]
                if len(memo) >= _MEMO_LIMIT:
                    memo.clear()
                memo[memo_key] = mask
            scan.checked += 1
            scan.checked_restricted += int(bool(restricted))
            if mask:
                ids.append(int(pk))
                ats.append(at.timestamp())
                flags.append(bool(restricted))
                masks.append(mask)
        last = int(rows[-1][0])
    scan.upto = max(scan.upto, upto)
    if ids:
        scan.ids = np.concatenate([scan.ids, np.asarray(ids, np.int64)])
        scan.at = np.concatenate([scan.at, np.asarray(ats, np.float64)])
        scan.restricted = np.concatenate([scan.restricted, np.asarray(flags, np.bool_)])
        scan.masks = np.concatenate([scan.masks, np.asarray(masks, np.int64)])


def _scan(engine: Engine) -> tuple[_Scan, _LintContext]:
    ctx = _lint_context(engine)
    cache_key = (engine.url.render_as_string(hide_password=False), ctx.key())
    with _SCAN_LOCK:
        count, restricted, max_id = _population(engine)
        scan = _SCANS.get(cache_key)
        if scan is None or max_id < scan.upto:
            scan = _Scan()
        if max_id > scan.upto:
            _extend(engine, scan, ctx, max_id)
        if scan.checked != count or scan.checked_restricted != restricted:
            scan = _Scan()  # traces were deleted or re-flagged: start again
            _extend(engine, scan, ctx, max_id)
        stale = [k for k in _SCANS if k[0] == cache_key[0] and k != cache_key]
        for k in stale:
            del _SCANS[k]
        _SCANS[cache_key] = scan
        return scan, ctx


def unchecked_count(engine: Engine) -> int:
    """How many refusal texts the next production check still has to lint (0 when the cached
    scan is up to date). Cheap: one SQL aggregate, no lint. Pages use it to ask before a long
    first scan (about 5,000 distinct texts a second)."""
    ctx = _lint_context(engine)
    cache_key = (engine.url.render_as_string(hide_password=False), ctx.key())
    count, restricted, max_id = _population(engine)
    with _SCAN_LOCK:
        scan = _SCANS.get(cache_key)
    if scan is None or max_id < scan.upto or count < scan.checked:
        return count
    if restricted != scan.checked_restricted and max_id == scan.upto:
        return count
    return count - scan.checked


@dataclass(frozen=True)
class ProductionSummary:
    checked: int  # refusal texts the actor may see that were linted
    offending: int  # of those, texts with at least one finding
    hidden_restricted: int  # offending restricted traces hidden from an actor without clearance
    per_rule: dict[str, int]  # offending traces per rule (a trace counts once per rule)
    wording_version: int | None  # the wording version whose contacts were used (None: shipped)


@dataclass(frozen=True)
class TraceFinding:
    rule: str
    start: int
    end: int
    excerpt: str
    explanation: str


@dataclass(frozen=True)
class OffendingTrace:
    id: int
    trace_id: str
    at: dt.datetime
    decision: str | None
    reason_code: str | None
    key: str | None
    restricted: bool
    text: str  # restricted titles and ids masked for actors without clearance
    findings: tuple[TraceFinding, ...]
    masked: bool

    @property
    def rules(self) -> list[str]:
        return list(dict.fromkeys(f.rule for f in self.findings))


@dataclass(frozen=True)
class ProductionPage:
    summary: ProductionSummary
    total: int  # offending traces matching the filter
    page: int
    page_size: int
    rows: list[OffendingTrace]

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame(
            [
                {
                    "trace": r.trace_id,
                    "time": r.at,
                    "decision": r.decision or "",
                    "message key": r.key or "",
                    "restricted": r.restricted,
                    "rules": ", ".join(r.rules),
                    "first finding": r.findings[0].excerpt if r.findings else "",
                }
                for r in self.rows
            ],
            columns=[
                "trace",
                "time",
                "decision",
                "message key",
                "restricted",
                "rules",
                "first finding",
            ],
        )


def _visible(scan: _Scan, actor: Actor) -> npt.NDArray[np.bool_]:
    if actor.clearance:
        return np.ones(len(scan.ids), np.bool_)
    return ~scan.restricted


def _summary(scan: _Scan, ctx: _LintContext, actor: Actor) -> ProductionSummary:
    vis = _visible(scan, actor)
    masks = scan.masks[vis]
    per_rule = {rule: int(np.count_nonzero(masks & bit)) for rule, bit in RULE_BITS.items()}
    checked = scan.checked if actor.clearance else scan.checked - scan.checked_restricted
    return ProductionSummary(
        checked,
        int(vis.sum()),
        0 if actor.clearance else int(scan.restricted.sum()),
        per_rule,
        ctx.version,
    )


def production_counts(engine: Engine, actor: Actor) -> ProductionSummary:
    """How many refusal texts were checked and how many trip each rule (what the actor may
    see; restricted traces count only for users with clearance)."""
    scan, ctx = _scan(engine)
    return _summary(scan, ctx, actor)


def weekly_violations(
    engine: Engine, actor: Actor, start: dt.date, end: dt.date
) -> pd.DataFrame | None:
    """Refusal texts that break a wording rule, per week (Monday, UTC) from ``start`` up to
    ``end`` (exclusive), with a column per rule: from the production check's scan, and only
    when that scan is up to date (None otherwise: it is run from the Wording page, since a
    first scan of a large trace table takes a while). Restricted traces count only for users
    with clearance."""
    if unchecked_count(engine) > 0:
        return None
    scan, _ctx = _scan(engine)
    vis = _visible(scan, actor)
    at = scan.at[vis]
    masks = scan.masks[vis]
    day = (at // 86_400).astype(np.int64)  # days since 1970-01-01, a Thursday
    monday = day - (day + 3) % 7
    lo = (dt.date(start.year, start.month, start.day) - dt.date(1970, 1, 1)).days
    hi = (dt.date(end.year, end.month, end.day) - dt.date(1970, 1, 1)).days
    keep = (monday >= lo) & (monday < hi)
    weeks = [start + dt.timedelta(weeks=i) for i in range(max(0, (hi - lo + 6) // 7))]
    frame = pd.DataFrame({"week": weeks})
    index = (monday[keep] - lo) // 7
    frame["offending"] = np.bincount(index, minlength=len(weeks))[: len(weeks)]
    for rule, bit in RULE_BITS.items():
        hits = index[(masks[keep] & bit) != 0]
        frame[rule] = np.bincount(hits, minlength=len(weeks))[: len(weeks)]
    return frame


def _sensitive_spans(ctx: _LintContext, text: str) -> list[tuple[int, int]]:
    """Spans naming a restricted document (title or id), found with the lint's own matching."""
    with_terms = lint(
        text,
        restricted_titles=ctx.titles,
        doc_ids=ctx.restricted_doc_ids,
        rules=["leaked_internal"],
    )
    plain = {(f.start, f.end) for f in lint(text, rules=["leaked_internal"])}
    spans = sorted((f.start, f.end) for f in with_terms if (f.start, f.end) not in plain)
    merged: list[tuple[int, int]] = []
    for s, e in spans:
        if merged and s <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(e, merged[-1][1]))
        else:
            merged.append((s, e))
    return merged


def _mask(text: str, spans: Sequence[tuple[int, int]]) -> str:
    out, pos = [], 0
    for s, e in spans:
        out.append(text[pos:s])
        out.append(_MASK)
        pos = e
    out.append(text[pos:])
    return "".join(out)


def _offending(ctx: _LintContext, actor: Actor, row: Any) -> OffendingTrace:
    text = str(row.answer_text)
    key = message_key_for(row.decision)
    found = _lint_trace(ctx, text, key)
    spans = [] if actor.clearance else _sensitive_spans(ctx, text)
    findings = []
    for f in found:
        hidden = any(f.start < e and s < f.end for s, e in spans)
        findings.append(
            TraceFinding(
                f.rule,
                f.start,
                f.end,
                _MASK if hidden else excerpt(text, f),
                "Names a restricted document (hidden: seeing which one needs clearance)."
                if hidden
                else f.explanation,
            )
        )
    return OffendingTrace(
        int(row.id),
        str(row.trace_id),
        row.at,
        row.decision,
        row.reason_code,
        key,
        bool(row.restricted),
        _mask(text, spans) if spans else text,
        tuple(findings),
        bool(spans),
    )


def production_findings(
    engine: Engine,
    actor: Actor,
    page: int = 1,
    page_size: int = 25,
    *,
    rule: str | None = None,
) -> ProductionPage:
    """Offending traces, newest first, one page at a time, with their findings.

    ``rule`` keeps traces that trip that rule. Restricted traces are listed only for users
    with clearance; for others, titles and ids of restricted documents are masked.
    """
    if rule is not None and rule not in RULE_BITS:
        raise InputError(f"unknown wording rule {rule!r} (known: {', '.join(RULES)})")
    if page < 1 or page_size < 1:
        raise InputError("page and page size start at 1")
    scan, ctx = _scan(engine)
    summary = _summary(scan, ctx, actor)
    keep = _visible(scan, actor)
    if rule is not None:
        keep &= (scan.masks & RULE_BITS[rule]) != 0
    ids, at = scan.ids[keep], scan.at[keep]
    order = np.lexsort((-ids, -at))  # newest first, then highest id
    chosen = [int(i) for i in ids[order][(page - 1) * page_size : page * page_size]]
    rows: list[OffendingTrace] = []
    if chosen:
        stmt = select(Trace).where(Trace.id.in_(chosen))
        if not actor.clearance:
            stmt = stmt.where(Trace.restricted.is_(False))
        with read_session(engine) as s:
            by_id = {t.id: t for t in s.scalars(stmt)}
            for pk in chosen:
                t = by_id.get(pk)
                if t is not None:
                    rows.append(_offending(ctx, actor, t))
    return ProductionPage(summary, len(ids), page, page_size, rows)


def trace_findings(engine: Engine, actor: Actor, trace_pk: int) -> OffendingTrace:
    """One trace's final text linted with the wording in force (for the audit's
    wording-violation verdict). Restricted traces need clearance."""
    with read_session(engine) as s:
        t = s.get(Trace, trace_pk)
        if t is None:
            raise InputError(f"trace {trace_pk} does not exist")
        if t.restricted and not actor.clearance:
            raise PermissionDenied("this trace is restricted: viewing it needs clearance")
        return _offending(_lint_context(engine), actor, t)
