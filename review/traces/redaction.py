"""Redaction of personal data in production traces (policy: policies/redaction.yaml).

Traces hold what users typed and what retrieval returned, so they can carry e-mail addresses,
phone numbers, payment card numbers and bank account numbers. Before a trace is shown to
someone without clearance (or exported), :func:`redact_trace` replaces them with fixed tokens
such as ``[email]`` and reports how many of each it replaced.

Built-in detectors (each switched on or off in the policy):

* ``email``: ``local@domain.tld``;
* ``phone``: international numbers starting with ``+``, numbers with an area code in
  parentheses, ``415-555-0132``/``415.555.0132``, and national numbers with a trunk ``0``
  (``020 7946 0958``), 8 to 15 digits in all. Plain digit runs, dates, years, version numbers,
  percentages and IP addresses are left alone: without a ``+``, parentheses or a telephone
  grouping, a number is more likely an order or invoice number than a phone;
* ``card``: 13 to 19 digits passing the Luhn check, starting like a card network's numbers
  (2221-2720, 3, 4, 5, 6), written without separators or grouped as cards are (4-4-4-4,
  4-4-4-4-3, 4-6-5, 4-6-4; spaces or hyphens, not both);
* ``iban``: a country code, two check digits and up to 30 letters or digits, passing the
  ISO 13616 mod-97 check.

Custom patterns add organisation-specific identifiers (customer account numbers, ticket ids)
as regular expressions. They run first, in file order, then IBAN, card, e-mail and phone.
Replacement text is inserted literally (``\\1`` is not a group reference).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from review.core.taxonomy import policies_dir
from review.core.yamlstrict import load_model, load_yaml_text, validate
from review.traces.model import Trace

__all__ = [
    "BUILTIN_DETECTORS",
    "CustomPattern",
    "DetectorSetting",
    "Detectors",
    "RedactionPolicy",
    "iban_valid",
    "load_redaction_policy",
    "luhn_valid",
    "parse_redaction_policy",
    "redact",
    "redact_trace",
]

BUILTIN_DETECTORS = ("email", "phone", "card", "iban")
NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,59}$")
MAX_REGEX = 500


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class DetectorSetting(_Strict):
    enabled: bool
    replacement: str = Field(min_length=1, max_length=60)


class Detectors(_Strict):
    email: DetectorSetting
    phone: DetectorSetting
    card: DetectorSetting
    iban: DetectorSetting = DetectorSetting(enabled=False, replacement="[iban]")


class CustomPattern(_Strict):
    name: str = Field(description="lowercase key; the counts are reported under it")
    regex: str = Field(min_length=1, max_length=MAX_REGEX)
    replacement: str = Field(min_length=1, max_length=60)
    ignore_case: bool = False


@dataclass(frozen=True, slots=True)
class _Rule:
    name: str
    pattern: re.Pattern[str]
    replacement: str
    check: Callable[[str], bool] | None = None


class RedactionPolicy(_Strict):
    version: int = Field(ge=1)
    detectors: Detectors
    custom_patterns: list[CustomPattern] = Field(default_factory=list)

    _rules: tuple[_Rule, ...] = PrivateAttr(default=())

    @model_validator(mode="after")
    def _check_patterns(self) -> RedactionPolicy:
        problems: list[str] = []
        seen: dict[str, int] = {}
        for i, p in enumerate(self.custom_patterns):
            where = f"custom_patterns.{i}"
            if not NAME_RE.match(p.name):
                problems.append(
                    f"{where}.name: {p.name!r}: use lowercase letters, digits and _, starting "
                    "with a letter"
                )
            elif p.name in BUILTIN_DETECTORS:
                problems.append(f"{where}.name: {p.name!r} is a built-in detector's name")
            elif p.name in seen:
                problems.append(
                    f"{where}.name: {p.name!r} is already used by custom_patterns.{seen[p.name]}"
                )
            else:
                seen[p.name] = i
            try:
                compiled = re.compile(p.regex, re.IGNORECASE if p.ignore_case else 0)
            except re.error as exc:
                at = f" at position {exc.pos}" if exc.pos is not None else ""
                problems.append(f"{where}.regex: not a valid regular expression: {exc.msg}{at}")
                continue
            if compiled.fullmatch("") is not None:
                problems.append(
                    f"{where}.regex: matches empty text, so the replacement would be inserted "
                    "between every character"
                )
        if problems:
            raise ValueError("\n".join(problems))
        return self

    def rules(self) -> tuple[_Rule, ...]:
        # compiled on first use: pydantic runs model_post_init before the checks above
        if not self._rules:
            self._rules = _build_rules(self)
        return self._rules

    def enabled_names(self) -> tuple[str, ...]:
        """Names of the detectors this policy applies, in the order they run."""
        return tuple(r.name for r in self.rules())


# ---------------------------------------------------------------------------------------
# Checks


def luhn_valid(digits: str) -> bool:
    """The Luhn checksum used by payment card numbers (``digits``: only 0-9)."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def iban_valid(text: str) -> bool:
    """ISO 13616: move the first four characters to the end, letters to numbers, mod 97 == 1."""
    s = text.replace(" ", "").upper()
    if not 15 <= len(s) <= 34 or not s.isalnum() or not s.isascii():
        return False
    if not (s[:2].isalpha() and s[2:4].isdigit()):
        return False
    moved = s[4:] + s[:4]
    return int("".join(str(int(ch, 36)) for ch in moved)) % 97 == 1


_NON_DIGIT = re.compile(r"\D")


_CARD_GROUPS = re.compile(r"[ -]")


def _card_ok(match: str) -> bool:
    """Luhn-valid, a card network's first digits, and written as card numbers are."""
    digits = _NON_DIGIT.sub("", match)
    if not 13 <= len(digits) <= 19 or not luhn_valid(digits):
        return False
    # issuer prefixes: 2221-2720 (Mastercard), 3 (Amex, Diners, JCB), 4 (Visa),
    # 5 (Mastercard, Maestro), 6 (Discover, UnionPay, Maestro)
    if not (digits[0] in "3456" or 2221 <= int(digits[:4]) <= 2720):
        return False
    if (" " in match) and ("-" in match):
        return False
    lengths = [len(g) for g in _CARD_GROUPS.split(match)]
    return (
        len(lengths) == 1
        or (all(n == 4 for n in lengths[:-1]) and 1 <= lengths[-1] <= 4)
        or lengths in ([4, 6, 5], [4, 6, 4])
    )


def _phone_ok(match: str) -> bool:
    return 8 <= len(_NON_DIGIT.sub("", match)) <= 15


# ---------------------------------------------------------------------------------------
# Patterns

_EMAIL = re.compile(
    r"(?<![\w.%+-])[A-Za-z0-9][A-Za-z0-9._%+-]*@"
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,63}(?![\w-])"
)
_IBAN = re.compile(r"(?<![\w])[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?(?![\w])")
_CARD = re.compile(r"(?<![\w.,+-])(?:\d[ -]?){12,18}\d(?![\w]|[.,-]\d)")
_PHONE = re.compile(
    r"""
    (?<![\w+.\-/])
    (?:
        \+\d{1,3}[ .-]?(?:\(\d{1,4}\)[ .-]?)?\d{1,4}(?:[ .-]?\d{2,4}){1,4}  # +44 20 7946 0958
      | \(\d{2,5}\)[ .-]?\d{3,4}[ .-]?\d{3,4}                              # (415) 555-0132
      | \d{3}[.-]\d{3}[.-]\d{4}                                            # 415-555-0132
      | 0\d{2,4}[ /-]\d{3,4}(?:[ -]?\d{2,5})?                              # 020 7946 0958
    )
    (?![\w]|[.\-/]\d)
    """,
    re.VERBOSE,
)

_BUILTIN: dict[str, tuple[re.Pattern[str], Callable[[str], bool] | None]] = {
    "iban": (_IBAN, iban_valid),
    "card": (_CARD, _card_ok),
    "email": (_EMAIL, None),
    "phone": (_PHONE, _phone_ok),
}


def _build_rules(policy: RedactionPolicy) -> tuple[_Rule, ...]:
    rules = [
        _Rule(p.name, re.compile(p.regex, re.IGNORECASE if p.ignore_case else 0), p.replacement)
        for p in policy.custom_patterns
    ]
    for name in ("iban", "card", "email", "phone"):
        setting: DetectorSetting = getattr(policy.detectors, name)
        if setting.enabled:
            pattern, check = _BUILTIN[name]
            rules.append(_Rule(name, pattern, setting.replacement, check))
    return tuple(rules)


# ---------------------------------------------------------------------------------------
# Loading


def load_redaction_policy(path: Path | None = None) -> RedactionPolicy:
    """Read and validate a redaction policy (default: the project's policies/redaction.yaml)."""
    return load_model(RedactionPolicy, path or policies_dir() / "redaction.yaml")


def parse_redaction_policy(text: str, source: str = "redaction.yaml") -> RedactionPolicy:
    """Validate policy YAML text (e.g. edited in the app) before it is saved."""
    return validate(RedactionPolicy, load_yaml_text(text, source), source)


# ---------------------------------------------------------------------------------------
# Redacting


_SEPARATORS = frozenset(" -./")


def _shorter(rule: _Rule, text: str, start: int, end: int) -> int | None:
    """The longest shorter candidate at ``start``, cut before a separator, that passes."""
    assert rule.check is not None
    for cut in range(end - 1, start, -1):
        if text[cut] in _SEPARATORS and text[cut - 1].isdigit():
            m = rule.pattern.fullmatch(text, start, cut)
            if m is not None and rule.check(m.group(0)):
                return cut
    return None


def _apply(rule: _Rule, text: str) -> tuple[str, int]:
    if rule.check is None:
        return rule.pattern.subn(lambda _m: rule.replacement, text)
    # A candidate that fails its check (Luhn, digit count) must not hide a real value inside
    # or right after it ("+44 20 7946 0958 4111 1111 1111 1111"): try it shorter, and on
    # failure search again from the next character instead of skipping the whole span.
    out: list[str] = []
    pos = last = n = 0
    while (m := rule.pattern.search(text, pos)) is not None:
        start, end = m.span()
        stop: int | None = end if rule.check(m.group(0)) else _shorter(rule, text, start, end)
        if stop is None:
            pos = start + 1
            continue
        out.append(text[last:start])
        out.append(rule.replacement)
        last = pos = stop
        n += 1
    if not n:
        return text, 0
    out.append(text[last:])
    return "".join(out), n


def redact(text: str, policy: RedactionPolicy) -> tuple[str, dict[str, int]]:
    """Replace what the policy's detectors find; counts per detector (0 when none found)."""
    counts = dict.fromkeys(policy.enabled_names(), 0)
    if not text:
        return text, counts
    for rule in policy.rules():
        text, n = _apply(rule, text)
        counts[rule.name] += n
    return text, counts


def _add(total: dict[str, int], more: Mapping[str, int]) -> None:
    for k, v in more.items():
        total[k] = total.get(k, 0) + v


def redact_trace(trace: Trace, policy: RedactionPolicy) -> tuple[Trace, dict[str, int]]:
    """Redact the free text of a trace: query, rewritten query, chunk texts, context sent,
    answer and citation claims. Ids, versions and attributes are left as they are."""
    total = dict.fromkeys(policy.enabled_names(), 0)

    def r(text: str) -> str:
        out, counts = redact(text, policy)
        _add(total, counts)
        return out

    redacted = dataclasses.replace(
        trace,
        query=r(trace.query),
        rewritten_query=None if trace.rewritten_query is None else r(trace.rewritten_query),
        chunks=tuple(dataclasses.replace(c, text=r(c.text)) for c in trace.chunks),
        context_sent=r(trace.context_sent),
        answer_text=r(trace.answer_text),
        citations=tuple(dataclasses.replace(c, claim=r(c.claim)) for c in trace.citations),
    )
    return redacted, total
