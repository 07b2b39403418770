"""Edit operators that change a value in place: the product tier, a quantity's unit or number,
a year, a jurisdiction."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from typing import ClassVar

from review.builder.operator import (
    EditResult,
    Operator,
    Params,
    Span,
    Suggestion,
    spans_from,
    splice,
)
from review.core.errors import InputError

__all__ = [
    "CANON",
    "FAMILY_OF",
    "JURISDICTIONS",
    "QUANTITY_RE",
    "TIERS",
    "UNIT_FAMILIES",
    "ChangeNumberParams",
    "ChangeUnitParams",
    "MoveJurisdictionParams",
    "ReplaceTierParams",
    "SwapYearParams",
    "propose_number",
]


# ------------------------------------------------------------------------------------------
# replace_tier

TIERS = ("Starter", "Team", "Business", "Enterprise")


_TIER_RE = re.compile(r"(?<![\w-])(" + "|".join(TIERS) + r")(?![\w-])")


@dataclass(frozen=True)
class ReplaceTierParams(Params):
    operator: ClassVar[str] = "replace_tier"
    to_tier: str = field(metadata={"help": "The tier to write instead", "choices": TIERS})
    from_tier: str | None = field(
        default=None,
        metadata={"help": "Only replace this tier (default: the first tier in the span)"},
    )

    def check(self) -> None:
        for fld in ("to_tier", "from_tier"):
            v = getattr(self, fld)
            if v is not None and v not in TIERS:
                raise self.fail(fld, f"{v!r} is not a tier; use one of: {', '.join(TIERS)}")


class ReplaceTier(Operator[ReplaceTierParams]):
    name = "replace_tier"
    finds = "product tier (Starter, Team, Business, Enterprise)"
    description = "Replace a product tier (Starter, Team, Business, Enterprise) by another."
    suggestion = Suggestion(
        "abstain",
        ("no_answer_bearing_evidence",),
        ("entity_collision",),
        "near_miss",
        "removed",
        "The document now speaks about another tier; it no longer answers for the asked one.",
    )
    params_type = ReplaceTierParams

    def candidates(self, text: str) -> list[Span]:
        return spans_from(text, ((m.start(), m.end()) for m in _TIER_RE.finditer(text)), "tier")

    def example_params(self, text: str, span: Span) -> ReplaceTierParams:
        m = _TIER_RE.search(span.text)
        current = m.group(1) if m else TIERS[0]
        return ReplaceTierParams(to_tier=TIERS[(TIERS.index(current) + 1) % len(TIERS)])

    def _apply(self, text: str, span: Span, params: ReplaceTierParams) -> EditResult:
        found = [m for m in _TIER_RE.finditer(text, span.start, span.end)]
        if params.from_tier:
            found = [m for m in found if m.group(1) == params.from_tier]
        if not found:
            tier = f"mention of the tier {params.from_tier}" if params.from_tier else "product tier"
            raise self._missing(f"{tier} ({', '.join(TIERS)})", span)
        target = found[0].group(1)
        if target == params.to_tier:
            raise InputError(
                f"{self.label}: the span already names {target}; replacing it by "
                f"{params.to_tier} would change nothing"
            )
        ops = [(m.start(), m.end(), params.to_tier) for m in found if m.group(1) == target]
        return self._result(text, span, splice(text, span.start, span.end, ops))


# ------------------------------------------------------------------------------------------
# change_unit and change_number

UNIT_FAMILIES: dict[str, tuple[str, ...]] = {
    "time": ("minutes", "hours", "days", "business days", "weeks", "months", "years"),
    "data size": ("KB", "MB", "GB", "TB"),
    "share": ("%", "percentage points"),
    "currency": ("EUR", "USD", "GBP"),
}


_SINGULAR = {
    "minutes": "minute",
    "hours": "hour",
    "days": "day",
    "business days": "business day",
    "weeks": "week",
    "months": "month",
    "years": "year",
    "percentage points": "percentage point",
}


CANON = {
    **{s: p for p, s in _SINGULAR.items()},
    **{u: u for us in UNIT_FAMILIES.values() for u in us},
}


FAMILY_OF = {u: fam for fam, us in UNIT_FAMILIES.items() for u in us}


_UNIT_ALT = "|".join(re.escape(u) for u in sorted(CANON, key=len, reverse=True))


QUANTITY_RE = re.compile(
    r"(?<![\w.,])(?P<num>\d+(?:[.,]\d+)*)(?P<sep>[ \u00a0-]?)(?P<unit>"
    + _UNIT_ALT
    + r")(?![A-Za-z])"
)


_NUMBER_RE = re.compile(r"\d+(?:[.,]\d+)*")


def _render_unit(num: str, sep: str, unit: str) -> str:
    if unit == "%":
        return f"{num}%"
    if sep == "":
        sep = " "
    word = _SINGULAR.get(unit, unit) if sep == "-" or num == "1" else unit
    if sep == "-":  # "a 14-business-day window"
        word = word.replace(" ", "-")
    return f"{num}{sep}{word}"


_GROUPED_RE = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?")


def propose_number(num: str, unit: str) -> str:
    """Another value for the quantity ``num`` ``unit``, written the way ``num`` is (its
    decimals, thousands separators or decimal comma) and sensible for the unit: a percentage
    stays within 0-100% (99.95% -> 99.90%, 60% -> 20%, 15% -> 30%); anything else doubles
    (0 becomes 1)."""
    dotted = num.count(".") > 1 and "," not in num  # "1.500.000": thousands with dots
    if dotted:
        num = num.replace(".", ",")
    grouped = bool(_GROUPED_RE.fullmatch(num))
    decimal_comma = not grouped and "," in num and "." not in num  # "2,5"
    plain = num.replace(",", "") if grouped else num.replace(",", ".")
    decimals = len(plain.split(".")[1]) if "." in plain else 0
    value = float(plain)
    percent = CANON.get(unit, unit) == "%"
    new = value * 2
    if percent and new > 100:
        new = max(0.0, 100 - (100 - value) * 2)
    if round(new, decimals) == round(value, decimals):  # 0, or 100% (or a rounding tie)
        step = 10.0**-decimals
        new = value - step if percent and value + step > 100 else value + step
    text = f"{new:,.{decimals}f}" if grouped else f"{new:.{decimals}f}"
    if dotted:
        return text.replace(",", ".")
    return text.replace(".", ",") if decimal_comma else text


@dataclass(frozen=True)
class ChangeUnitParams(Params):
    operator: ClassVar[str] = "change_unit"
    to_unit: str = field(
        metadata={"help": "The unit to write instead (same family)", "choices": tuple(FAMILY_OF)}
    )

    def check(self) -> None:
        if self.to_unit not in FAMILY_OF:
            raise self.fail(
                "to_unit",
                f"{self.to_unit!r} is not a known unit; use one of: {', '.join(FAMILY_OF)}",
            )


class ChangeUnit(Operator[ChangeUnitParams]):
    name = "change_unit"
    finds = "number with a recognised unit (days, GB, %, EUR, ...)"
    description = "Keep a number but change its unit (days to weeks, GB to TB, EUR to USD, ...)."
    suggestion = Suggestion(
        "abstain",
        ("required_claim_not_covered",),
        (),
        "near_miss",
        "removed",
        "The figure is still there but measures something else; the claim is not supported.",
    )
    params_type = ChangeUnitParams

    def candidates(self, text: str) -> list[Span]:
        return spans_from(
            text, ((m.start(), m.end()) for m in QUANTITY_RE.finditer(text)), "quantity"
        )

    def example_params(self, text: str, span: Span) -> ChangeUnitParams:
        m = QUANTITY_RE.search(span.text)
        unit = CANON[m.group("unit")] if m else "days"
        family = UNIT_FAMILIES[FAMILY_OF[unit]]
        return ChangeUnitParams(to_unit=family[(family.index(unit) + 1) % len(family)])

    def _apply(self, text: str, span: Span, params: ChangeUnitParams) -> EditResult:
        found = list(QUANTITY_RE.finditer(text, span.start, span.end))
        if not found:
            raise self._missing("number with a recognised unit", span)
        unit = CANON[found[0].group("unit")]
        if FAMILY_OF[unit] != FAMILY_OF[params.to_unit]:
            raise InputError(
                f"{self.label}: cannot change {unit!r} ({FAMILY_OF[unit]}) into "
                f"{params.to_unit!r} ({FAMILY_OF[params.to_unit]}); choose one of: "
                f"{', '.join(u for u in UNIT_FAMILIES[FAMILY_OF[unit]] if u != unit)}"
            )
        if unit == params.to_unit:
            raise InputError(
                f"{self.label}: the quantity is already in {unit!r}; that would change nothing"
            )
        ops = [
            (m.start(), m.end(), _render_unit(m.group("num"), m.group("sep"), params.to_unit))
            for m in found
            if CANON[m.group("unit")] == unit
        ]
        return self._result(text, span, splice(text, span.start, span.end, ops))


@dataclass(frozen=True)
class ChangeNumberParams(Params):
    operator: ClassVar[str] = "change_number"
    to_number: str = field(metadata={"help": "The number to write instead, e.g. 30 or 99.9"})

    def check(self) -> None:
        if not _NUMBER_RE.fullmatch(self.to_number):
            raise self.fail("to_number", f"{self.to_number!r} is not a number like 30 or 99.9")


class ChangeNumber(Operator[ChangeNumberParams]):
    name = "change_number"
    finds = "number with a recognised unit (days, GB, %, EUR, ...)"
    description = "Keep the unit but change the number (a conflicting value for a second version)."
    suggestion = Suggestion(
        None,
        (),
        (),
        None,
        None,
        "The document now states another value: the right answer follows the edited value, so "
        "update the required claim, or pair it with the original as a conflicting version.",
    )
    params_type = ChangeNumberParams

    def candidates(self, text: str) -> list[Span]:
        return spans_from(
            text, ((m.start(), m.end()) for m in QUANTITY_RE.finditer(text)), "quantity"
        )

    def example_params(self, text: str, span: Span) -> ChangeNumberParams:
        m = QUANTITY_RE.search(span.text)
        if m is None:
            raise self._missing("number with a recognised unit", span)
        return ChangeNumberParams(to_number=propose_number(m.group("num"), m.group("unit")))

    def _apply(self, text: str, span: Span, params: ChangeNumberParams) -> EditResult:
        found = list(QUANTITY_RE.finditer(text, span.start, span.end))
        if not found:
            raise self._missing("number with a recognised unit", span)
        m = found[0]
        if m.group("num") == params.to_number:
            raise InputError(
                f"{self.label}: the number is already {params.to_number}; that would change nothing"
            )
        sep, unit = m.group("sep"), m.group("unit")
        if sep == "":  # "10GB", "99.95%": keep the symbol as written
            new = params.to_number + unit
        else:
            new = _render_unit(params.to_number, sep, CANON[unit])
        ops = [(m.start(), m.end(), new)]
        return self._result(text, span, splice(text, span.start, span.end, ops))


# ------------------------------------------------------------------------------------------
# swap_year

_YEAR_RE = re.compile(r"(?<![\w.,-])((?:19|20)\d{2})(?!\w)")


@dataclass(frozen=True)
class SwapYearParams(Params):
    operator: ClassVar[str] = "swap_year"
    to_year: int = field(metadata={"help": "The year to write instead (1900-2100)"})
    from_year: int | None = field(
        default=None, metadata={"help": "Only change this year (default: the first in the span)"}
    )
    shift_effective_date: str | None = field(
        default=None,
        metadata={
            "help": "The document's effective date (YYYY-MM-DD); when given, the result also "
            "moves the effective date by the same number of years"
        },
    )

    def check(self) -> None:
        for fld in ("to_year", "from_year"):
            v = getattr(self, fld)
            if v is not None and not 1900 <= v <= 2100:
                raise self.fail(fld, f"{v} is not a year between 1900 and 2100")
        if self.shift_effective_date is not None:
            try:
                dt.date.fromisoformat(self.shift_effective_date)
            except ValueError:
                raise self.fail(
                    "shift_effective_date",
                    f"{self.shift_effective_date!r} is not a date like 2025-03-01",
                ) from None


def _shift_years(day: dt.date, years: int) -> dt.date:
    try:
        return day.replace(year=day.year + years)
    except ValueError:  # 29 February into a non-leap year
        return day.replace(year=day.year + years, day=28)


class SwapYear(Operator[SwapYearParams]):
    name = "swap_year"
    finds = "year (1900-2099) standing as a word of its own"
    description = "Change a year in the text; optionally move the effective date with it."
    suggestion = Suggestion(
        "abstain",
        ("evidence_stale",),
        ("temporal_mismatch",),
        "time_sensitive",
        None,
        "The only supporting text is now dated for another period than the one asked about.",
    )
    params_type = SwapYearParams

    def candidates(self, text: str) -> list[Span]:
        return spans_from(text, ((m.start(), m.end()) for m in _YEAR_RE.finditer(text)), "year")

    def example_params(self, text: str, span: Span) -> SwapYearParams:
        m = _YEAR_RE.search(span.text)
        year = int(m.group(1)) if m else 2025
        return SwapYearParams(to_year=year - 1 if year > 1900 else year + 1)

    def _apply(self, text: str, span: Span, params: SwapYearParams) -> EditResult:
        found = list(_YEAR_RE.finditer(text, span.start, span.end))
        if params.from_year is not None:
            found = [m for m in found if int(m.group(1)) == params.from_year]
        if not found:
            what = f"year {params.from_year}" if params.from_year is not None else "year"
            raise self._missing(what, span)
        year = int(found[0].group(1))
        if year == params.to_year:
            raise InputError(
                f"{self.label}: the span already says {year}; that would change nothing"
            )
        ops = [(m.start(), m.end(), str(params.to_year)) for m in found if int(m.group(1)) == year]
        meta: dict[str, str] = {}
        if params.shift_effective_date is not None:
            old = dt.date.fromisoformat(params.shift_effective_date)
            meta["effective_date"] = _shift_years(old, params.to_year - year).isoformat()
        return self._result(text, span, splice(text, span.start, span.end, ops), meta)


# ------------------------------------------------------------------------------------------
# move_jurisdiction

# key (the taxonomy's jurisdiction) -> (short name, long name) as written in documents
JURISDICTIONS: dict[str, tuple[str, str]] = {
    "EU": ("EU", "European Union"),
    "UK": ("UK", "United Kingdom"),
    "US": ("US", "United States"),
    "APAC": ("APAC", "Asia-Pacific"),
    "DE": ("Germany", "Germany"),
    "FR": ("France", "France"),
}


_JUR_OF: dict[str, tuple[str, int]] = {}
for _key, _names in JURISDICTIONS.items():
    for _i, _n in enumerate(_names):
        _JUR_OF.setdefault(_n, (_key, _i))


_JUR_RE = re.compile(
    r"(?<!\w)("
    + "|".join(re.escape(n) for n in sorted(_JUR_OF, key=len, reverse=True))
    + r")(?!\w)"
)


@dataclass(frozen=True)
class MoveJurisdictionParams(Params):
    operator: ClassVar[str] = "move_jurisdiction"
    to_jurisdiction: str = field(
        metadata={"help": "The jurisdiction to write instead", "choices": tuple(JURISDICTIONS)}
    )
    from_jurisdiction: str | None = field(
        default=None, metadata={"help": "Only move this one (default: the first in the span)"}
    )
    set_metadata: bool = field(
        default=False, metadata={"help": "Also set the document's jurisdiction field"}
    )

    def check(self) -> None:
        for fld in ("to_jurisdiction", "from_jurisdiction"):
            v = getattr(self, fld)
            if v is not None and v not in JURISDICTIONS:
                raise self.fail(
                    fld, f"{v!r} is not a jurisdiction; use one of: {', '.join(JURISDICTIONS)}"
                )


class MoveJurisdiction(Operator[MoveJurisdictionParams]):
    name = "move_jurisdiction"
    finds = "jurisdiction (EU, UK, US, APAC, Germany, France)"
    description = "Move the entity to another jurisdiction (EU, UK, US, APAC, Germany, France)."
    suggestion = Suggestion(
        "abstain",
        ("no_answer_bearing_evidence",),
        ("entity_collision",),
        "near_miss",
        "removed",
        "The rule now applies somewhere else; nothing states it for the asked jurisdiction.",
    )
    params_type = MoveJurisdictionParams

    def candidates(self, text: str) -> list[Span]:
        return spans_from(
            text, ((m.start(), m.end()) for m in _JUR_RE.finditer(text)), "jurisdiction"
        )

    def example_params(self, text: str, span: Span) -> MoveJurisdictionParams:
        m = _JUR_RE.search(span.text)
        key = _JUR_OF[m.group(1)][0] if m else "EU"
        keys = list(JURISDICTIONS)
        return MoveJurisdictionParams(to_jurisdiction=keys[(keys.index(key) + 1) % len(keys)])

    def _apply(self, text: str, span: Span, params: MoveJurisdictionParams) -> EditResult:
        found = list(_JUR_RE.finditer(text, span.start, span.end))
        if params.from_jurisdiction:
            found = [m for m in found if _JUR_OF[m.group(1)][0] == params.from_jurisdiction]
        if not found:
            what = params.from_jurisdiction or "jurisdiction"
            raise self._missing(f"{what} ({', '.join(_JUR_OF)})", span)
        key = _JUR_OF[found[0].group(1)][0]
        if key == params.to_jurisdiction:
            raise InputError(
                f"{self.label}: the span already names {key}; that would change nothing"
            )
        ops = [
            (m.start(), m.end(), JURISDICTIONS[params.to_jurisdiction][_JUR_OF[m.group(1)][1]])
            for m in found
            if _JUR_OF[m.group(1)][0] == key
        ]
        meta = {"jurisdiction": params.to_jurisdiction} if params.set_metadata else {}
        return self._result(text, span, splice(text, span.start, span.end, ops), meta)
