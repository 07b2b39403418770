"""Does an answer contradict a required claim? A conservative check on stated quantities.

Note 000 (issue 15, item 3): an answer whose text contradicts a required claim is not an
acceptable answer, whatever it cites. Deciding entailment in general needs a model; the
failure the notes name most often does not: a near-neighbour passage leaks *its* figure
("30 days" from the annual policy where the monthly policy says "14 days"). So this module
compares quantities, and only quantities:

* a quantity is a number with a unit: days, business days, hours, weeks, months, years,
  minutes, seats, users, percent, and amounts in EUR, USD or GBP (symbols and codes);
  numbers may be digits ("14", "1,000", "99.95") or the number words one to twenty, thirty,
  forty, fifty, sixty and ninety;
* a required claim's quantity ``(value, unit)`` is contradicted when the answer states the
  same unit with a value that no required claim of the case states, and never states the
  claim's value with that unit.

"Within 14 days; the refund reaches the card in 5 business days" does not contradict "14
days" (business days are their own unit, and 14 days is stated); "within 30 days" does.
Claims that state no quantity are never contradicted by this check, so it finds a subset of
the contradictions a person would find, never more: a figure built on it says so.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Final

__all__ = ["MAX_CHARS", "Contradiction", "contradictions", "contradicts", "quantities"]

_WORDS: Final[dict[str, int]] = {
    w: i
    for i, w in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
            "thirteen",
            "fourteen",
            "fifteen",
            "sixteen",
            "seventeen",
            "eighteen",
            "nineteen",
            "twenty",
        ]
    )
} | {"thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "ninety": 90}

#: unit spelling (lower case, regex) -> unit key; longer spellings are tried first
_UNITS: Final[tuple[tuple[str, str], ...]] = (
    (r"business\s+days?|working\s+days?", "business day"),
    (r"calendar\s+days?|days?", "day"),
    (r"hours?|hrs?", "hour"),
    (r"weeks?", "week"),
    (r"calendar\s+months?|months?", "month"),
    (r"years?", "year"),
    (r"minutes?|mins?", "minute"),
    (r"seats?", "seat"),
    (r"users?", "user"),
    (r"%|percent|per\s+cent", "percent"),
    (r"eur|euros?|€", "EUR"),
    (r"usd|us\s+dollars?|dollars?", "USD"),
    (r"gbp|pounds?(?:\s+sterling)?", "GBP"),
)
_UNIT_RE: Final = "|".join(f"(?:{p})" for p, _ in _UNITS)
_NUMBER_RE: Final = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|" + "|".join(
    sorted(_WORDS, key=len, reverse=True)
)
# "14 days", "14-day", "99.95%", "50 EUR", "€50", "$50", "£45"
_AFTER: Final = re.compile(
    rf"(?<![\w.])({_NUMBER_RE})(?:\s*-\s*|\s*)({_UNIT_RE})(?![a-z])", re.IGNORECASE
)
_BEFORE: Final = re.compile(r"([€$£])\s?(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)(?![\d])")
_SYMBOLS: Final = {"€": "EUR", "$": "USD", "£": "GBP"}
#: the check reads at most this much of a text (answers and claims are short)
MAX_CHARS: Final = 20_000


def _unit(spelling: str) -> str:
    low = re.sub(r"\s+", " ", spelling.lower())
    for pattern, key in _UNITS:
        if re.fullmatch(pattern, low):
            return key
    raise ValueError(spelling)  # pragma: no cover - the regex only matches listed units


def _number(text: str) -> Decimal | None:
    low = text.lower()
    if low in _WORDS:
        return Decimal(_WORDS[low])
    try:
        return Decimal(low.replace(",", "")).normalize()
    except InvalidOperation:  # pragma: no cover - the regex only matches numbers
        return None


def quantities(text: str) -> set[tuple[Decimal, str]]:
    """The quantities a text states, as (value, unit) pairs."""
    text = text[:MAX_CHARS]
    out: set[tuple[Decimal, str]] = set()
    for m in _AFTER.finditer(text):
        value = _number(m.group(1))
        if value is not None:
            out.add((value, _unit(m.group(2))))
    for m in _BEFORE.finditer(text):
        value = _number(m.group(2))
        if value is not None:
            out.add((value, _SYMBOLS[m.group(1)]))
    return out


@dataclass(frozen=True)
class Contradiction:
    claim: str
    unit: str
    claimed: Decimal
    stated: tuple[Decimal, ...]

    def describe(self) -> str:
        said = ", ".join(_fmt(v, self.unit) for v in self.stated)
        return f"the claim says {_fmt(self.claimed, self.unit)}, the answer says {said}"


def _fmt(v: Decimal, unit: str) -> str:
    number = format(v, "f")
    if unit == "percent":
        return f"{number}%"
    if unit in _SYMBOLS.values():
        return f"{number} {unit}"
    return f"{number} {unit}{'' if v == 1 else 's'}"


def contradictions(answer: str, claims: Iterable[str]) -> list[Contradiction]:
    """The required claims whose quantities the answer contradicts (see the module text).
    Only a figure no claim of the case states counts against a claim, and an answer stating
    the claim's own value with that unit never contradicts it: an answer that gives one of
    two claimed figures ("14 days" of "14 days" and "30 days") omits, it does not contradict."""
    claimed = [(claim, quantities(claim)) for claim in claims]
    known: dict[str, set[Decimal]] = {}
    for _, qs in claimed:
        for value, unit in qs:
            known.setdefault(unit, set()).add(value)
    said: dict[str, set[Decimal]] = {}
    for value, unit in quantities(answer):
        said.setdefault(unit, set()).add(value)
    out: list[Contradiction] = []
    for claim, qs in claimed:
        for value, unit in sorted(qs, key=lambda q: (q[1], q[0])):
            stated = said.get(unit, set())
            foreign = stated - known.get(unit, set())
            if foreign and value not in stated:
                out.append(Contradiction(claim, unit, value, tuple(sorted(foreign))))
    return out


def contradicts(answer: str, claims: Sequence[str]) -> bool:
    return bool(contradictions(answer, claims))
