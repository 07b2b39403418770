"""Does an answer contradict a required claim? A conservative check on stated figures.

An answer whose text contradicts a required claim is not an
acceptable answer, whatever it cites. Deciding entailment in general needs a model; the
failure seen most often does not: a near-neighbour passage leaks *its* figure
("30 days" from the annual policy where the monthly policy says "14 days"). So this module
compares figures, and only figures.

Reading figures (:func:`figures`). A figure is a number with a unit, read the way people
write it:

* digits with thousands separators in either convention ("1,000", "1.000", "1 000"), decimal
  points and decimal commas ("99.95", "30,00", "1.234,56"); a lone separator followed by
  exactly three digits ("1.500", "1,500") is ambiguous and keeps both readings;
* number words ("five", "forty-five", "a hundred", "two hundred and fifty", "a dozen"), and
  "a"/"an" before a unit after a word like "within" or "for" ("within a week");
* ranges ("3-5 days", "5 to 10 business days", "between 10 and 20 days") and lists sharing a
  unit ("14 or 30 days");
* units in their plural, abbreviated and compound forms ("days", "14-day", "48h", "per
  cent"); weeks are read as days (and "a fortnight" as 14 days), years as months, since those
  conversions are exact; hours, business days, months and days stay apart;
* amounts with the currency before or after ("USD 12", "US$12", "€30", "30,00 €", "12 USD",
  "45 pounds") in EUR, USD and GBP; each currency is its own unit.

Each figure also gets a role from the words around it: a countdown ("you still have 3 days",
"3 days left", "within the next five days"), an elapsed time ("23 days ago", "it has been 10
days"), an increment ("3 more days") or a negation ("not 30 days", "not limited to 14 days")
is not a statement of the rule, so it never contradicts one. A bound is a statement: "not
more than 30 days" states 30 days.

Comparing (:func:`contradictions`). A required claim's figure is contradicted only when the
answer, about the same unit, states a figure that is clearly another value for it:

* an answer that states the claim's value (or a range containing it, or a figure of the same
  value in a convertible unit: "two weeks" for "14 days", or the bare number in a sentence
  that gives the unit elsewhere: "30 days for export, 30 for deletion and 35 for backups")
  never contradicts that claim;
* a figure another required claim of the case states (or that lies in a range a claim
  states) is not foreign;
* figures that add up to the claim's value are its parts, not rivals: a pro-rata split "3
  months used, 9 months refunded" for a 12-month term;
* countdowns, elapsed times, increments and negated figures are left alone.

"Within 14 days; the refund reaches the card in 5 business days" does not contradict "14
days"; "within 30 days" does. Claims that state no figure are never contradicted by this
check, so it finds a subset of the contradictions a person would find, never more: a figure
built on it says so. What it leaves alone by design: contradictions across units that do not
convert exactly ("3 days" against "48 hours"), multipliers in words ("three times the
fees"), and values inside a range a claim states ("15 USD" against "from 14 to 16 USD").
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from itertools import combinations
from typing import Final, Literal, NamedTuple

__all__ = [
    "MAX_CHARS",
    "MAX_FIGURES",
    "Contradiction",
    "Figure",
    "contradictions",
    "contradicts",
    "figures",
    "quantities",
]

#: the check reads at most this much of a text (answers and claims are short)
MAX_CHARS: Final = 20_000
#: and keeps at most this many figures of it
MAX_FIGURES: Final = 500
#: sums are looked for among at most this many figures of one unit (2**12 subsets)
_MAX_PARTS: Final = 12

Role = Literal["stated", "countdown", "elapsed", "increment", "negated"]

_ONES: Final[dict[str, int]] = {
    w: i
    for i, w in enumerate(
        [
            *("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"),
            *("ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen"),
            *("seventeen", "eighteen", "nineteen"),
        ]
    )
}
_TENS: Final[dict[str, int]] = {
    w: 10 * i
    for i, w in enumerate(
        ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"], 2
    )
}


def _alt(words: Iterable[str]) -> str:
    return "|".join(sorted(words, key=len, reverse=True))


_BELOW_100: Final = (
    rf"(?:(?:{_alt(_TENS)})(?:[-\s](?:{_alt(k for k in _ONES if k != 'zero')}))?|(?:{_alt(_ONES)}))"
)
_HUNDREDS: Final = (
    rf"(?:(?:(?:a|an|one|two|three|four|five|six|seven|eight|nine)\s+)?hundred"
    rf"(?:\s+(?:and\s+)?{_BELOW_100})?|{_BELOW_100})"
)
_WORD_NUMBER: Final = (
    rf"(?:(?:(?:a|an)\s+|{_HUNDREDS}\s+)?thousand(?:\s+(?:and\s+)?{_HUNDREDS})?"
    rf"|a\s+dozen|{_HUNDREDS})"
)
# digits with separators; a separator is a point, a comma or a (narrow) space before 3 digits
_DIGITS: Final = r"\d{1,15}(?:(?:[.,]\d{1,15})|(?:[\s\u00a0\u202f]\d{3}(?!\d)))*"
_NUMBER: Final = rf"(?:{_DIGITS}|{_WORD_NUMBER})"

#: unit spelling (regex, lower case) -> (unit key, factor to that key)
_UNITS: Final[tuple[tuple[str, str, int], ...]] = (
    (r"business[\s-]+days?|working[\s-]+days?", "business day", 1),
    (r"calendar[\s-]+days?|days?", "day", 1),
    (r"fortnights?", "day", 14),
    (r"weeks?|wks?", "day", 7),
    (r"hours?|hrs?|h", "hour", 1),
    (r"calendar[\s-]+months?|months?", "month", 1),
    (r"years?|yrs?", "month", 12),
    (r"minutes?|mins?", "minute", 1),
    (r"seats?", "seat", 1),
    (r"users?", "user", 1),
    (r"gb|gigabytes?", "GB", 1),
    (r"%|percent|per[\s-]cent|pct", "percent", 1),
    (r"eur|euros?|€", "EUR", 1),
    (r"usd|us\s?\$|us\s+dollars?|dollars?|\$", "USD", 1),
    (r"gbp|pounds?(?:\s+sterling)?|£", "GBP", 1),
)
_UNIT: Final = "|".join(f"(?:{p})" for p, _, _ in _UNITS)
_MONEY: Final = frozenset({"EUR", "USD", "GBP"})
_CURRENCY_BEFORE: Final = re.compile(
    r"(?:(?<![a-z])(?:eur|usd|gbp)|us\s?\$|[€$£])[\s\u00a0]?$", re.IGNORECASE
)
_CURRENCY_RE: Final = re.compile(r"(?:(?<![a-z])(?:eur|usd|gbp)|us\s?\$|[€$£])", re.IGNORECASE)

# a number not glued to a word, a decimal or another number before it
_NUMBER_AT: Final = re.compile(rf"(?<![\w.,]){_NUMBER}(?![\w])|(?<![\w.,]){_DIGITS}", re.I)
# "a week", "an hour": one of a unit, only after a word that introduces a duration
_ONE_UNIT: Final = re.compile(
    r"\ban?\s+(fortnight|week|day|month|year|hour|minute)\b", re.IGNORECASE
)
_ONE_UNIT_AFTER: Final = re.compile(
    r"\b(?:within|in|for|after|than|under|over|least|most|about|around|only|just)\s+$",
    re.IGNORECASE,
)
_RATE_BEFORE: Final = re.compile(r"\b(?:once|twice|times|per|each|every)\s*$", re.IGNORECASE)
_JOIN: Final = re.compile(
    r"[\s\u00a0]*(?:(?P<range>-|–|—|to|until|through|and)|(?P<list>or|/))[\s\u00a0]*"
    rf"(?:(?P<cur>{_CURRENCY_RE.pattern})[\s\u00a0]?)?",
    re.IGNORECASE,
)
# a year ("1 April 2025 and 30 days later") never joins a chain of figures
_YEAR: Final = re.compile(r"(?:19|20)\d\d")
_UNIT_AFTER: Final = re.compile(
    rf"[\s\u00a0]*(?:-[\s\u00a0]*)?(?:(?P<more>more|additional|extra|further)\s+)?"
    rf"(?:(?:full|whole|consecutive)\s+)?(?P<unit>{_UNIT})(?![a-z])",
    re.IGNORECASE,
)

_COUNTDOWN_BEFORE: Final = re.compile(
    r"(?:\bstill\s+(?:have|has|got|get)|\banother|\bnext|\bcoming|\bremaining|\bonly\s+(?:have|has)"
    r"|\b(?:have|has)\s+only|\bleft\s+with|\bleaves\s+(?:you|them|the\s+customer)"
    r"|\b(?:closes|ends|expires|lapses|runs\s+out)\s+in)"
    r"\s+(?:(?:about|around|roughly|just|only|over|under|the|a|some|another|exactly)\s+)?$",
    re.IGNORECASE,
)
_ELAPSED_BEFORE: Final = re.compile(
    r"(?:\bbeen|\balready|\bwaited|\bwaiting|\bpassed|\bsince)"
    r"\s+(?:(?:about|around|roughly|just|only|over|nearly|almost|more\s+than|less\s+than)\s+)?$",
    re.IGNORECASE,
)
_NEGATED_BEFORE: Final = re.compile(
    r"(?:(?:\bnot|n't|\bnever)(?:\s+(?:limited|restricted|capped|fixed|set)\s+(?:to|at))?"
    r"|\bno\s+longer|\binstead\s+of|\brather\s+than|\bunlike)"
    r"\s+(?:(?:the|a|an|just|only|quite)\s+)?$",
    re.IGNORECASE,
)
_AFTER_FIGURE: Final = re.compile(
    r"^[\s\u00a0']*(?:(?P<countdown>left|remaining|remains?|to\s+go|from\s+now|from\s+today|in\s+hand)"
    r"|(?P<elapsed>ago|since|(?:have|has|had)\s+(?:already\s+)?(?:passed|elapsed|gone\s+by)"
    r"|elapsed|already|so\s+far))\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Figure:
    """A figure a text states: the unit, each reading of the value as a closed interval
    (a single value is ``(v, v)``; an ambiguous "1.500" has two readings), its role and
    where it stands in the text."""

    unit: str
    readings: tuple[tuple[Decimal, Decimal], ...]
    role: Role
    start: int
    end: int

    @property
    def value(self) -> Decimal | None:
        """The value, when the figure is a single number read one way."""
        if len(self.readings) == 1 and self.readings[0][0] == self.readings[0][1]:
            return self.readings[0][0]
        return None

    def overlaps(self, lo: Decimal, hi: Decimal) -> bool:
        return any(a <= hi and lo <= b for a, b in self.readings)


def _word_value(text: str) -> Decimal | None:
    words = re.split(r"[\s-]+", text.lower())
    if words == ["a", "dozen"]:
        return Decimal(12)
    total = 0
    current = 0
    for w in words:
        if w in ("a", "an"):
            current = 1
        elif w == "and":
            continue
        elif w == "hundred":
            current = max(current, 1) * 100
        elif w == "thousand":
            total, current = max(current, 1) * 1000, 0
        elif w in _ONES:
            current += _ONES[w]
        elif w in _TENS:
            current += _TENS[w]
        else:
            return None
    return Decimal(total + current)


def _digit_readings(text: str) -> tuple[Decimal, ...]:
    """The values a run of digits and separators can mean, most likely first; () when it is
    no number people write (a section "2.1.3", a misplaced separator)."""
    s = re.sub(r"[\s\u00a0\u202f]", " ", text)
    groups = re.split(r"([., ])", s)
    digits = groups[0::2]
    seps = groups[1::2]
    if not seps:
        return (Decimal(s),)

    def grouped(parts: list[str]) -> bool:
        return 1 <= len(parts[0]) <= 3 and all(len(p) == 3 for p in parts[1:])

    try:
        kinds = set(seps)
        if len(kinds) == 1:
            sep = seps[0]
            if sep == " ":
                return (Decimal("".join(digits)),) if grouped(digits) else ()
            if len(seps) > 1:
                return (Decimal("".join(digits)),) if grouped(digits) else ()
            whole, frac = digits
            decimal = Decimal(f"{whole}.{frac}").normalize()
            if len(frac) == 3 and grouped(digits) and whole != "0":
                return (Decimal(whole + frac), decimal)
            return (decimal,)
        # two kinds: the last separator is the decimal mark, the others group thousands
        mark = seps[-1]
        if mark == " " or seps.count(mark) != 1:
            return ()
        head = digits[:-1]
        if not grouped(head):
            return ()
        return (Decimal(f"{''.join(head)}.{digits[-1]}").normalize(),)
    except InvalidOperation:  # pragma: no cover - the groups are digits only
        return ()


def _readings(text: str) -> tuple[Decimal, ...]:
    if text[:1].isdigit():
        return tuple(v.normalize() for v in _digit_readings(text))
    v = _word_value(text)
    return () if v is None else (v,)


@lru_cache(maxsize=256)
def _unit_of(spelling: str) -> tuple[str, int]:
    low = re.sub(r"\s+", " ", spelling.lower())
    for pattern, key, factor in _UNITS:
        if re.fullmatch(pattern, low):
            return key, factor
    raise ValueError(spelling)  # pragma: no cover - the regex only matches listed units


def _role(text: str, start: int, end: int, more: bool) -> Role:
    before = text[max(0, start - 60) : start]
    before = re.split(r"[.;!?\n]", before)[-1]
    if _NEGATED_BEFORE.search(before):
        return "negated"
    if more:
        return "increment"
    if _COUNTDOWN_BEFORE.search(before):
        return "countdown"
    if _ELAPSED_BEFORE.search(before):
        return "elapsed"
    after = _AFTER_FIGURE.match(text[end : end + 40])
    if after:
        return "countdown" if after.group("countdown") else "elapsed"
    return "stated"


def _scaled(values: tuple[Decimal, ...], factor: int) -> tuple[Decimal, ...]:
    return tuple((v * factor).normalize() for v in values)


_NUMBER_WORDS: Final = frozenset({*_ONES, *_TENS, "a", "an", "hundred", "thousand"})
# where a number can start: a digit, or a number word, not glued to a word or a decimal
_NUMBER_START: Final = re.compile(rf"(?<![\w.,])(?:\d|(?:{_alt(_NUMBER_WORDS)})\b)", re.I)


def _numbers(text: str, start: int = 0, stop: int | None = None) -> Iterator[re.Match[str]]:
    """The numbers in ``text[start:stop]``, digits or words. The full pattern is tried only
    where a number can start (at every position it is several times slower)."""
    end = len(text) if stop is None else stop
    for at in _NUMBER_START.finditer(text, start, end):
        m = _NUMBER_AT.match(text, at.start(), end)
        if m is not None:
            yield m


class _Num(NamedTuple):
    text: str
    start: int
    end: int


def _chain(text: str, first: re.Match[str], currency: str | None) -> tuple[list[_Num], list[bool]]:
    """The numbers sharing the unit after the last of them: "3-5", "14 or 30", "between 10
    and 20", "€10-€20"; and for each join, whether it makes a range (else a list)."""
    numbers = [_Num(first.group(0), first.start(), first.end())]
    ranges: list[bool] = []
    while len(numbers) < 6 and not _YEAR.fullmatch(numbers[-1].text):
        j = _JOIN.match(text, numbers[-1].end)
        if j is None:
            break
        if j.group("cur") and _unit_of(j.group("cur"))[0] != currency:
            break  # "€50 or $50": another currency starts another figure
        n = _NUMBER_AT.match(text, j.end())
        if n is None or _YEAR.fullmatch(n.group(0)):
            break
        joiner = (j.group("range") or "").lower()
        between = re.search(
            r"\bbetween\s+$", text[max(0, first.start() - 12) : first.start()], re.I
        )
        ranges.append(bool(joiner) and (joiner != "and" or between is not None))
        numbers.append(_Num(n.group(0), n.start(), n.end()))
    return numbers, ranges


def _chain_figures(
    numbers: list[_Num], ranges: list[bool], unit: str, factor: int, role: Role, end: int
) -> list[Figure]:
    """The figures of a chain of numbers sharing a unit: ranges join neighbours, list
    members stand alone; a number with no reading states nothing."""
    groups: list[list[tuple[tuple[Decimal, ...], int]]] = []
    for i, n in enumerate(numbers):
        member = (_scaled(_readings(n.text), factor), n.start)
        if i and ranges[i - 1]:
            groups[-1].append(member)
        else:
            groups.append([member])
    out: list[Figure] = []
    for group in groups:
        if any(not values for values, _ in group):
            continue
        if len(group) == 1:
            readings = tuple((v, v) for v in group[0][0])
        else:
            lo, hi = sorted((group[0][0][0], group[-1][0][0]))
            readings = ((lo, hi),)
        out.append(Figure(unit, readings, role, group[0][1], end))
    return out


def figures(text: str) -> list[Figure]:
    """The figures a text states, in order (see the module text). Reads at most
    :data:`MAX_CHARS` characters and returns at most :data:`MAX_FIGURES` figures."""
    text = text[:MAX_CHARS]
    out: list[Figure] = []
    pos = 0
    for m in _numbers(text):
        if len(out) >= MAX_FIGURES:
            break
        start = m.start()
        if start < pos:
            continue
        code = _CURRENCY_BEFORE.search(text[max(0, start - 5) : start])
        currency = None if code is None else _unit_of(code.group(0).strip())
        numbers, ranges = _chain(text, m, None if currency is None else currency[0])
        u = _UNIT_AFTER.match(text, numbers[-1].end)
        end = numbers[-1].end
        more = False
        if currency is not None:
            unit, factor = currency
            if u is not None and _unit_of(u.group("unit"))[0] == unit:
                end = u.end()
        elif u is not None:
            unit, factor = _unit_of(u.group("unit"))
            end = u.end()
            more = u.group("more") is not None
        else:
            # no unit after the chain: a lone number; its last member may still start a figure
            pos = numbers[0].end if len(numbers) == 1 else numbers[-1].start
            continue
        role = _role(text, start, end, more)
        out += _chain_figures(numbers, ranges, unit, factor, role, end)
        pos = end
    taken = {f.start for f in out}
    for m in _ONE_UNIT.finditer(text):
        if len(out) >= MAX_FIGURES:
            break
        before = text[max(0, m.start() - 20) : m.start()]
        lead = _ONE_UNIT_AFTER.search(before)
        if m.start(1) in taken or (lead is None and m.group(1).lower() != "fortnight"):
            continue  # "allow a day", "the end of a month": no duration is stated
        if _RATE_BEFORE.search(before if lead is None else before[: lead.start()]):
            continue  # "once in a month", "once a fortnight": a rate, not a duration
        taken.add(m.start(1))
        unit, factor = _unit_of(m.group(1))
        v = Decimal(factor)
        role = _role(text, m.start(1), m.end(), False)
        out.append(Figure(unit, ((v, v),), role, m.start(1), m.end()))
    return _merge_ranges(text, sorted(out, key=lambda f: f.start))


_BETWEEN_FIGURES: Final = re.compile(r"[\s\u00a0]*(?:-|–|—|to|and)[\s\u00a0]*", re.IGNORECASE)


def _merge_ranges(text: str, found: list[Figure]) -> list[Figure]:
    """Join "99.9% to 99.99%" and "between 10 days and 20 days" into one range."""
    out: list[Figure] = []
    for f in found:
        prev = out[-1] if out else None
        if (
            prev is not None
            and prev.unit == f.unit
            and prev.role == f.role
            and prev.value is not None
            and f.value is not None
        ):
            gap = _BETWEEN_FIGURES.fullmatch(text, prev.end, f.start)
            if gap is not None and (
                gap.group(0).strip().lower() != "and"
                or re.search(r"\bbetween\s+$", text[max(0, prev.start - 12) : prev.start], re.I)
            ):
                lo, hi = sorted((prev.value, f.value))
                out[-1] = Figure(f.unit, ((lo, hi),), f.role, prev.start, f.end)
                continue
        out.append(f)
    return out


_SENTENCE_END: Final = re.compile(r"(?<=[.!?;:])\s+|\n")


def _elided(text: str, found: Sequence[Figure]) -> dict[str, set[Decimal]]:
    """Numbers written without their unit beside a figure that has one ("30 days for export,
    30 for deletion and 35 for backups"): by unit, the values of the bare numbers in each
    sentence that states a figure of that unit."""
    text = text[:MAX_CHARS]
    out: dict[str, set[Decimal]] = {}
    start = 0
    bounds = [m.start() for m in _SENTENCE_END.finditer(text)] + [len(text)]
    for stop in bounds:
        inside = [f for f in found if start <= f.start < stop]
        if inside:
            units = {f.unit for f in inside}
            for m in _numbers(text, start, stop):
                if any(f.start <= m.start() < f.end for f in inside):
                    continue
                for v in _readings(m.group(0)):
                    for unit in units:
                        out.setdefault(unit, set()).add(v)
        start = stop
    return out


def quantities(text: str) -> set[tuple[Decimal, str]]:
    """The values a text states, as (value, unit) pairs: each figure's most likely reading,
    both ends of a range."""
    out: set[tuple[Decimal, str]] = set()
    for f in figures(text):
        lo, hi = f.readings[0]
        out.add((lo, f.unit))
        out.add((hi, f.unit))
    return out


@dataclass(frozen=True)
class Contradiction:
    claim: str
    unit: str
    claimed: Decimal
    stated: tuple[Decimal, ...]
    #: the upper end when the claim states a range ("5 to 10 business days")
    claimed_to: Decimal | None = None
    #: the answer's figures as (low, high): a range keeps its two ends together
    said: tuple[tuple[Decimal, Decimal], ...] = ()

    def describe(self) -> str:
        said = ", ".join(
            _span(lo, hi, self.unit) for lo, hi in self.said or [(v, v) for v in self.stated]
        )
        claimed = _span(self.claimed, self.claimed_to or self.claimed, self.unit)
        return f"the claim says {claimed}, the answer says {said}"


def _span(lo: Decimal, hi: Decimal, unit: str) -> str:
    return _fmt(lo, unit) if lo == hi else f"{format(lo, 'f')}-{_fmt(hi, unit)}"


def _fmt(v: Decimal, unit: str) -> str:
    number = format(v, "f")
    if unit == "percent":
        return f"{number}%"
    if unit in _MONEY or unit == "GB":
        return f"{number} {unit}"
    return f"{number} {unit}{'' if v == 1 else 's'}"


def _sums(said: Sequence[Figure], bare: Iterable[Decimal] = ()) -> dict[Decimal, set[int]]:
    """Each total that two or more different values add up to, with the indexes of the
    figures taking part: the parts of a sum or a pro-rata split. Bare numbers beside the
    figures may join (after the figures' own values, at most :data:`_MAX_PARTS` values in
    all). A value said twice is one value ("after 7 days ... within 7 days" is no split of
    14)."""
    by_value: dict[Decimal, list[int]] = {}
    for i, f in enumerate(said):
        if f.value is not None and f.value > 0:
            by_value.setdefault(f.value, []).append(i)
    for v in sorted(bare):
        if v > 0:
            by_value.setdefault(v, [])
    values = list(by_value)[:_MAX_PARTS]
    totals: dict[Decimal, set[int]] = {}
    for size in range(2, len(values) + 1):
        for combo in combinations(values, size):
            totals.setdefault(sum(combo, Decimal(0)), set()).update(
                i for v in combo for i in by_value[v]
            )
    return totals


@lru_cache(maxsize=1024)
def _claim_figures(claim: str) -> tuple[Figure, ...]:
    """A case's claims are read once for all the outputs of a run."""
    return tuple(figures(claim))


def contradictions(answer: str, claims: Iterable[str]) -> list[Contradiction]:
    """The required claims whose figures the answer contradicts (see the module text). A
    figure another claim of the case states is never foreign, and an answer stating the
    claim's own value never contradicts it: an answer that gives one of two claimed figures
    ("14 days" of "14 days" and "30 days") omits, it does not contradict."""
    # every figure a claim names is known to the case, a negated one too ("48 hours, not 72
    # hours"); only the figures a claim asserts can be contradicted
    claimed: list[tuple[str, list[Figure]]] = []
    known: dict[str, list[tuple[Decimal, Decimal]]] = {}
    for claim in claims:
        named = _claim_figures(claim)
        for f in named:
            known.setdefault(f.unit, []).extend(f.readings)
        claimed.append((claim, [f for f in named if f.role != "negated"]))
    said: dict[str, list[Figure]] = {}
    found = figures(answer)
    for f in found:
        if f.role != "negated":
            said.setdefault(f.unit, []).append(f)
    elided = _elided(answer, found)
    sums: dict[str, dict[Decimal, set[int]]] = {}
    out: list[Contradiction] = []
    seen: set[tuple[str, str, Decimal, Decimal]] = set()
    for claim, fs in claimed:
        for f in sorted(fs, key=lambda f: (f.unit, f.readings)):
            lo, hi = f.readings[0]
            if (claim, f.unit, lo, hi) in seen:
                continue
            seen.add((claim, f.unit, lo, hi))
            answer_figs = said.get(f.unit, [])
            if any(a.overlaps(*r) for r in f.readings for a in answer_figs):
                continue  # the answer states the claim's value (or a range holding it)
            bare = elided.get(f.unit, set())
            if any(lo <= v <= hi for v in bare):
                continue  # ... or writes it without the unit beside a figure that has it
            if f.unit not in sums:
                sums[f.unit] = _sums(answer_figs, bare)
            parts = sums[f.unit].get(lo, set()) if lo == hi else set()
            foreign = [
                a
                for i, a in enumerate(answer_figs)
                if a.role == "stated"
                and i not in parts
                and not any(a.overlaps(k_lo, k_hi) for k_lo, k_hi in known.get(f.unit, []))
            ]
            if foreign:
                stated = tuple(sorted({v for a in foreign for v in a.readings[0]}))
                spans = tuple(sorted({a.readings[0] for a in foreign}))
                out.append(
                    Contradiction(claim, f.unit, lo, stated, None if lo == hi else hi, spans)
                )
    return out


def contradicts(answer: str, claims: Sequence[str]) -> bool:
    return bool(contradictions(answer, claims))
