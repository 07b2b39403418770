"""How values read on every page, chart and report: the one place that turns a stored key, a
rate, an interval, a number or a timestamp into the words people read.

- a taxonomy key reads as its term's label (``near_miss`` -> "Near miss"); a key the taxonomy
  does not know reads humanised rather than raw;
- a rate reads as a percentage, with its interval ("14% (3–51%)") and the count behind it
  where there is one; a rate that has no denominator reads "undefined" with the reason, never
  0 or 1, and a missing or NaN value never reads "nan";
- numbers read with thousands separators and at most a few decimals (never
  0.3409090909090909);
- a count meets its noun in the right number ("1 case", "3 cases", "1,204 cases"), never
  "case(s)";
- timestamps read as dates and minutes in UTC;
- a person reads as their name, never as an e-mail address (which Markdown would turn into a
  mailto link);
- pass/fail reads as a coloured badge (Streamlit Markdown; plain text elsewhere).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, date, datetime
from typing import Protocol

__all__ = [
    "UNDEFINED",
    "badge",
    "count",
    "count_rate",
    "humanize",
    "is_missing",
    "number",
    "percent",
    "percent_interval",
    "person",
    "plural",
    "term",
    "version_label",
    "when",
]

#: What a figure with no value reads as (a dash: nothing to show, not zero).
UNDEFINED = "—"


class _Labels(Protocol):
    def label(self, section: str, key: str | None, missing: str = ...) -> str: ...


def is_missing(value: object) -> bool:
    """None, NaN, pandas' NA/NaT: there is no value."""
    if value is None:
        return True
    if isinstance(value, float):
        return math.isnan(value)
    try:
        return bool(value != value)  # NaN-like (NaT, pd.NA raises and lands below)
    except (TypeError, ValueError):
        return True


def humanize(key: str | None, missing: str = UNDEFINED) -> str:
    """A stored key as words: ``near_miss`` -> "Near miss", ``top_k`` -> "Top k"."""
    if not key:
        return missing
    words = str(key).replace("_", " ").replace("-", " ").strip()
    return words[:1].upper() + words[1:] if words else missing


def term(tax: _Labels, section: str, key: str | None, missing: str = UNDEFINED) -> str:
    """A key of a taxonomy section as people read it: its term's label, else the key
    humanised (a key the taxonomy does not know still reads as words)."""
    if not key:
        return missing
    label = tax.label(section, key, missing)
    return humanize(key, missing) if label == key and "_" in key else label


def _pct_digits(share: float) -> int:
    """Decimals of a percentage: none from 10% (and for 0 and 100), one below 10%, two
    below 0.1% (a small risk must not read 0%)."""
    p = abs(share) * 100
    if p == 0 or p >= 10 or float(p).is_integer():
        return 0
    return 1 if p >= 0.1 else 2


def percent(share: float | None, digits: int | None = None, missing: str = UNDEFINED) -> str:
    """A share (0..1) as a percentage: "14%", "3.5%", "0.04%"; ``missing`` for None/NaN."""
    if is_missing(share):
        return missing
    value = float(share)  # type: ignore[arg-type]
    if math.isinf(value):
        return missing
    d = _pct_digits(value) if digits is None else digits
    return f"{100 * value:.{d}f}%"


def percent_interval(
    share: float | None,
    low: float | None,
    high: float | None,
    missing: str = UNDEFINED,
) -> str:
    """A rate with its interval: "14% (3–51%)"; the interval is left out when unknown."""
    if is_missing(share):
        return missing
    head = percent(share)
    if is_missing(low) or is_missing(high):
        return head
    lo, hi = percent(low), percent(high)
    return f"{head} ({lo.removesuffix('%')}–{hi})"


def plural(n: int, noun: str, plural: str | None = None) -> str:
    """``noun`` in the number ``n`` calls for, without the number: "case" for 1, else its
    plural (``plural`` when given, for irregular ones: "stratum" -> "strata"; else the
    regular English plural of its last word: "cases", "entries", "matches")."""
    if n == 1 or n == -1:
        return noun
    if plural is not None:
        return plural
    if noun.endswith(("s", "x", "z", "ch", "sh")):
        return noun + "es"
    if len(noun) > 1 and noun.endswith("y") and noun[-2] not in "aeiou":
        return noun[:-1] + "ies"
    return noun + "s"


def count(n: int, noun: str, plural_form: str | None = None) -> str:
    """A count with its noun as people read it: "1 case", "3 cases", "1,204 cases",
    "0 cases"; ``plural_form`` for an irregular plural (``count(2, "stratum", "strata")``).
    Every message where a count meets a noun uses it, never "case(s)"."""
    return f"{n:,} {plural(n, noun, plural_form)}"


def count_rate(
    numerator: int, denominator: int, undefined: str = "undefined (none counted)"
) -> str:
    """A rate with the count behind it: "14% (3 of 21)"; with no denominator the rate is
    undefined and says why (never 0% or 100%)."""
    if denominator <= 0:
        return undefined
    return f"{percent(numerator / denominator)} ({numerator:,} of {denominator:,})"


def number(value: object, decimals: int = 3, missing: str = UNDEFINED) -> str:
    """A number as people read it: whole numbers with thousands separators ("12,345"),
    fractions with at most ``decimals`` decimals and no trailing zeros ("0.341", "2.5")."""
    if is_missing(value):
        return missing
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    try:
        f = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return str(value)
    if math.isinf(f):
        return "∞" if f > 0 else "-∞"
    if f.is_integer() and abs(f) < 1e15:
        return f"{int(f):,}"
    text = f"{f:,.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def when(value: object, *, with_time: bool = True, missing: str = UNDEFINED) -> str:
    """A stored timestamp (ISO text or datetime) as "2026-11-03 14:05 UTC", or the date alone;
    text that is not a timestamp is shown as it is."""
    if is_missing(value) or value == "":
        return missing
    if isinstance(value, datetime):
        stamp = value
    elif isinstance(value, date):
        return value.isoformat()
    else:
        raw = str(value).strip()
        try:
            stamp = datetime.fromisoformat(raw.replace("Z", "+00:00"))
        except ValueError:
            return raw
        if len(raw) <= 10:
            return stamp.date().isoformat()
    if stamp.tzinfo is not None:
        stamp = stamp.astimezone(UTC)
    if not with_time:
        return stamp.date().isoformat()
    return f"{stamp:%Y-%m-%d %H:%M} UTC"


def badge(ok: bool | None, yes: str = "pass", no: str = "fail", unknown: str = "undefined") -> str:
    """Pass/fail as a coloured Streamlit badge (green, red; grey when it cannot be told)."""
    if ok is None:
        return f":gray-badge[{unknown}]"
    return f":green-badge[{yes}]" if ok else f":red-badge[{no}]"


def person(email: str | None, names: Mapping[str, str], missing: str = UNDEFINED) -> str:
    """Who someone is, as people read it: the name ``names`` (e-mail -> name, any case) gives,
    else the part of the address before the @ (never the whole address, which Markdown would
    turn into a mailto link)."""
    if is_missing(email) or not str(email).strip():
        return missing
    address = str(email).strip()
    found = names.get(address) or names.get(address.lower())
    if found:
        return found
    return address.split("@", 1)[0] if "@" in address else address


def version_label(number: int | None, file_version: int | None = None) -> str:
    """A signed version as people read it, the sign-off number and the ``version:`` field
    inside the file labelled apart so one is not taken for the other: "sign-off v2 · file
    version 3"; "the shipped file" when nothing is signed."""
    head = "the shipped file" if number is None else f"sign-off v{number}"
    return head if file_version is None else f"{head} · file version {file_version}"
