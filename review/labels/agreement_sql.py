"""The agreement report from SQL aggregates, for any number of labels.

``agreement_report`` needs every current label in memory. ``agreement_report_sql`` gets the
same numbers from the database in one aggregate statement (and a few small look-ups) whose
result has a handful of rows however many labels there are. The current labels in scope are
found once in it (``cur``: case, annotator and decision as positions, reason codes as packed
flags) and read by both of its parts:

* the overall rows need, per field, how many items carry m labels, the pairs of equal labels
  on them, and how often each value occurs on pairable items. Per case (GROUP BY case) the
  label count and the count of each decision and each reason code, then per m the sums of
  those counts and of their squares (equal pairs on an item: sum of c(c-1)/2 over values);
  the same per (group, m) for the slice or category table;
* the pair rows need, per annotator pair, the confusion counts over the items both
  labelled: one self-join of the current labels on the case, grouped by the two annotators
  and the two decisions, with each reason code's "both have it", "a has it" and "b has it"
  counts summed alongside (packed several codes to an integer);
* the decision heatmap is the pair counts summed over the annotator pairs.

Every view but a family's (unfiltered, or any combination of one slice, one category, one
source and one import: :func:`stored_scope`) reads the overall rows and the pair rows from the
stored rollup of its scope instead (review.labels.agreement_rollup, the rule in
review.cases.agreement_counts: the same sums, kept in step by the labeling and the case
services), and the per-group rows and annotators from the figures stored per slice and
category (review.cases.agreement_groups). The rollup is read only while its stamp says it
stands for exactly the label rows there are (a label written past the service, as a bulk load
writes them, makes the report count everything from the labels again); the per-group figures,
and a view filtered by slice or category, only while, besides, their stamp says they stand for
the cases' slices and categories as they are (else those rows are counted from the labels).

A reason code is present when the label's JSON list holds the code's JSON string (codes are
identifiers, stored by json.dumps). Codes outside the list are looked for in the distinct
code lists and refused as ``agreement_report`` refuses them; a decision outside the list has
no position (NULL) and is refused alike. Sums over items are exact integers; the statistics
are then computed as ``agreement_table`` computes them, so they agree with it to the last
bit or two (the reference adds floats item by item)."""

# Long module: one report from one read snapshot: its aggregate statements, the packing of
# their counts and the steps that turn their rows into the report's tables share the rows'
# shapes, so they stay together.

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
from sqlalchemy import (
    BigInteger,
    Engine,
    Integer,
    Text,
    and_,
    case,
    cast,
    distinct,
    func,
    literal,
    null,
    select,
    union_all,
)
from sqlalchemy.orm import aliased

from review.cases import agreement_groups
from review.cases.agreed import current_label_filter
from review.cases.agreement_counts import scope_key
from review.core import readable
from review.core.errors import InputError
from review.labels.agreement import (
    GROUP_COLUMNS,
    TABLE_COLUMNS,
    AgreementReport,
    Scope,
    assemble_table,
    joined_note,
)
from review.labels.agreement_rollup import stamp_columns
from review.labels.fleiss import FleissSums, fleiss_from_sums, fleiss_table
from storage.db import distinct_values, read_session
from storage.models import (
    AgreementGroupAnnotator,
    AgreementGroupValue,
    AgreementItemValue,
    AgreementPair,
    AgreementPairCode,
    Case,
    CaseFamily,
    CaseSlice,
    Label,
    LabelImport,
)

__all__ = [
    "agreement_report_sql",
    "family_keys",
    "import_choices",
    "in_scope",
    "source_choices",
    "stored_scope",
]


#: (annotator a, annotator b, decision a, decision b, cases) per annotator pair and decisions
PairRows = list[tuple[str, str, str, str, int]]
#: per annotator pair, each reason code's (both, a's, b's) counts, in the list's order
CodeRows = dict[tuple[str, str], list[tuple[int, int, int]]]


@dataclass
class _Overall:
    """One field's totals for its ``scope == "all"`` row."""

    items: dict[int, int]  # label count m -> items with m labels
    same: dict[int, int]  # m -> pairs of equal labels summed over those items
    counts: dict[Any, int]  # value -> labels with that value on pairable items (sorted values)
    annotators: int


@dataclass
class _PairCounts:
    """Confusion counts of one annotator pair over the items both labelled."""

    n: int = 0
    agree: int = 0
    rows: dict[Any, int] = field(default_factory=dict)  # annotator a's values
    cols: dict[Any, int] = field(default_factory=dict)  # annotator b's values


def _argmax(counts: dict[Any, int]) -> Any:
    """The value with the largest count, the first in value order on a tie (as np.argmax)."""
    best, most = None, -1
    for value, n in counts.items():
        if n > most:
            best, most = value, n
    return best


def _overall_values(o: _Overall) -> tuple[int, float | None, float | None, str]:
    """Pairable items, raw agreement, alpha and note, as ``_unit_stats``/``_alpha``/``_raw``
    and ``agreement_table`` give them (sums over items done exactly, then rounded)."""
    pairable = {m: k for m, k in o.items.items() if m >= 2 and k}
    n_pairable = sum(pairable.values())
    if n_pairable == 0:
        return 0, None, None, "no item has labels from two annotators yet"
    raw_sum = sum(
        (Fraction(o.same.get(m, 0), m * (m - 1) // 2) for m in pairable), start=Fraction(0)
    )
    raw = float(raw_sum / n_pairable)
    n = sum(o.counts.values())
    agree = float(sum((Fraction(2 * o.same.get(m, 0), m - 1) for m in pairable), Fraction(0)))
    expected_denominator = n * n - sum(c * c for c in o.counts.values())
    alpha = None
    if n and expected_denominator:
        alpha = 1.0 - (n - 1) * (n - agree) / expected_denominator
    note = ""
    if alpha is None:
        note = f"alpha undefined: every label is {_argmax(o.counts)!r} (no variation)"
    return n_pairable, raw, alpha, note


def _table_frame(
    field_name: str, pairs: dict[tuple[str, str], _PairCounts], overall: _Overall
) -> pd.DataFrame:
    """The frame ``agreement_table`` returns, from the counts (pairs in annotator order)."""
    keys = sorted(pairs)
    ns, raws, kappas, notes = [], [], [], []
    for key in keys:
        p = pairs[key]
        chance = sum(p.rows.get(v, 0) * p.cols.get(v, 0) for v in p.rows)
        denominator = p.n * p.n - chance
        ns.append(p.n)
        raws.append(p.agree / p.n)
        if denominator:
            kappas.append((p.n * p.agree - chance) / denominator)
            notes.append("")
        else:
            kappas.append(np.nan)
            only = _argmax(p.rows)
            notes.append(f"kappa undefined: both gave only {only!r} (no variation)")
    n_pairable, raw, alpha, note = _overall_values(overall)
    return assemble_table(
        field_name,
        {
            "annotator_a": [a for a, _ in keys],
            "annotator_b": [b for _, b in keys],
            "n_items": np.array(ns, dtype=np.int64),
            "raw_agreement": np.array(raws, dtype=float),
            "cohen_kappa": np.array(kappas, dtype=float),
            "note": pd.Series(notes, dtype=object),
        },
        {
            "n_items": n_pairable,
            "n_annotators": overall.annotators,
            "raw_agreement": np.nan if raw is None else raw,
            "krippendorff_alpha": np.nan if alpha is None else alpha,
            "note": note,
        },
    )


def _one(condition: Any) -> Any:
    """SQL: 1 where ``condition`` holds, else 0 (to count with SUM)."""
    return case((condition, 1), else_=0)


def _holds(dialect: str, text: Any, needle: str) -> Any:
    """SQL: ``text`` contains ``needle`` (case-sensitive on both databases)."""
    if dialect == "sqlite":
        return func.instr(text, needle) > 0
    if dialect == "postgresql":
        return func.strpos(text, needle) > 0
    return text.contains(needle, autoescape=True)


def family_keys(engine: Engine, limit: int | None = None) -> list[str]:
    """The keys of the case families with a labelled case (the page's family filter), sorted;
    the first ``limit`` + 1 only, when given (the picker shows ``limit``)."""
    stmt = (
        select(CaseFamily.key)
        .where(
            select(Case.id)
            .where(Case.family_id == CaseFamily.id)
            .where(Case.id.in_(select(Label.case_id)))
            .exists()
        )
        .order_by(CaseFamily.key)
    )
    with read_session(engine) as s:
        return [str(k) for k in s.scalars(stmt if limit is None else stmt.limit(limit + 1))]


def source_choices(engine: Engine) -> list[str]:
    """Where the labels were made ("workbench", a labeling tool): the source filter's values."""
    with read_session(engine) as s:
        return sorted(str(x) for x in distinct_values(s, Label.source))


def import_choices(engine: Engine, limit: int = 200) -> list[tuple[int, str, str, str]]:
    """The newest label imports that brought labels (id, tool, file name, when), for the
    import filter."""
    with read_session(engine) as s:
        rows = s.execute(
            select(LabelImport.id, LabelImport.tool, LabelImport.file_name, LabelImport.imported_at)
            .where(select(Label.id).where(Label.import_id == LabelImport.id).exists())
            .order_by(LabelImport.id.desc())
            .limit(limit)
        ).all()
    return [
        (int(i), str(tool), str(name), at.strftime("%Y-%m-%d %H:%M UTC"))
        for i, tool, name, at in rows
    ]


def in_scope(stmt: Any, scope: Scope) -> Any:
    """Restrict a statement over ``labels`` to the labels in ``scope``: on the cases of a
    slice, category and/or family, made in one place and/or brought by one import."""
    if scope.slice_:
        sl = aliased(CaseSlice)
        stmt = stmt.where(Label.case_id.in_(select(sl.case_id).where(sl.slice == scope.slice_)))
    if scope.category:
        cs = aliased(Case)
        stmt = stmt.where(Label.case_id.in_(select(cs.id).where(cs.category == scope.category)))
    if scope.family:
        cf, fam = aliased(Case), aliased(CaseFamily)
        stmt = stmt.where(
            Label.case_id.in_(
                select(cf.id).join(fam, fam.id == cf.family_id).where(fam.key == scope.family)
            )
        )
    if scope.source:
        stmt = stmt.where(Label.source == scope.source)
    if scope.import_id is not None:
        stmt = stmt.where(Label.import_id == scope.import_id)
    return stmt


def _position(dialect: str, column: Any, ordered: Sequence[str], *, exact: bool = False) -> Any:
    """SQL: the index of ``column``'s value in ``ordered`` (sorted in Python's order; the value
    must be one of them, or with ``exact`` the index is NULL for any other value), by
    bisection: a CASE tree of depth log2(len). Strings compare by code point in Python;
    SQLite's default collation and PostgreSQL's "C" do the same."""
    if not ordered:
        return null() if exact else literal(0)
    compared = column.collate("C") if dialect == "postgresql" else column

    def node(lo: int, hi: int) -> Any:
        if hi - lo == 1:
            if exact:
                return case((compared == ordered[lo], literal(lo)), else_=null())
            return literal(lo)
        mid = (lo + hi) // 2
        return case((compared < ordered[mid], node(lo, mid)), else_=node(mid, hi))

    return node(0, len(ordered))


@dataclass(frozen=True)
class _Packing:
    """Several 0/1 flags summed in one integer: flag j of a chunk adds ``2**(width*j)``, so
    each sum holds every flag's count in its own ``width`` bits (counts stay below
    ``2**width``: width fits the number of items). Fewer aggregates over the self-join, and
    ``a & b`` of two packed labels is "both have the flag", flag by flag."""

    width: int
    chunks: list[list[int]]  # flag indexes packed together

    @staticmethod
    def for_counts(n_flags: int, most: int) -> _Packing:
        width = max(1, most.bit_length())
        per = max(1, 62 // width)  # stays below 2**62: no overflow in SQLite's SUM
        return _Packing(
            width, [list(range(i, min(i + per, n_flags))) for i in range(0, n_flags, per)]
        )

    def columns(self, flags: Sequence[Any]) -> list[Any]:
        return [
            sum(
                (
                    case((flags[j], literal(1 << (self.width * t), BigInteger)), else_=0)
                    for t, j in enumerate(chunk)
                ),
                start=literal(0, BigInteger),
            )
            for chunk in self.chunks
        ]

    def unpack(self, totals: Sequence[Any]) -> list[int]:
        """Per flag, its count from the chunks' sums."""
        out: list[int] = []
        mask = (1 << self.width) - 1
        for chunk, total in zip(self.chunks, totals, strict=True):
            value = int(total or 0)
            out.extend((value >> (self.width * t)) & mask for t in range(len(chunk)))
        return out


def _decision_overall(
    rows: Sequence[Any], cats: list[str], values: list[str], annotators: int
) -> _Overall:
    """Decision totals from rows ``(m, items, sum of each decision's count per item, sum of
    the squares of those counts, ...)``, one row per label count m."""
    items: dict[int, int] = {}
    same: dict[int, int] = {}
    counts = dict.fromkeys(values, 0)
    for r in rows:
        m, k = int(r[0]), int(r[1])
        items[m] = k
        same[m] = (int(r[2 + len(cats)] or 0) - m * k) // 2
        if m >= 2:
            for j, d in enumerate(cats):
                counts[d] += int(r[2 + j] or 0)
    return _Overall(items, same, counts, annotators)


def _unknown_codes(conn: Any, rc: Any, codes: list[str], scope: Scope) -> list[str]:
    """Reason codes outside ``codes`` in current labels (sorted), read from the distinct
    code lists (a few dozen texts, not a row per label)."""
    known = set(codes)

    def odd(texts: Iterable[str | None]) -> dict[str, set[str]]:
        found = {}
        for text in texts:
            extra = {str(x) for x in (json.loads(text) if text else [])} - known
            if extra:
                found[str(text)] = extra
        return found

    # every label first (cheap, no "current" test); only suspects are checked again
    suspects = odd(conn.scalars(in_scope(select(rc).distinct(), scope)))
    if not suspects:
        return []
    current = odd(
        conn.scalars(
            in_scope(select(rc).distinct(), scope).where(
                current_label_filter(), rc.in_(sorted(suspects))
            )
        )
    )
    return sorted(set().union(*current.values()), key=str) if current else []


def _counted_pair_rows(
    pair_rows: Sequence[Any],
    annotators: list[str],
    decision_order: list[str],
    packing: _Packing,
) -> tuple[PairRows, CodeRows]:
    """The pair part's rows (annotator and decision positions, cases, packed code sums) as
    (annotator a, annotator b, decision a, decision b, cases) rows and, per annotator pair,
    each reason code's (both, a's, b's) counts."""
    n_chunks = len(packing.chunks)
    decision_rows = []
    # the packed reason-code sums of an annotator pair stay packed until its rows are added
    # up (its counts never exceed the bound the width was chosen for)
    packed: dict[tuple[int, int], list[int]] = {}
    for r in pair_rows:
        who = (int(r[0]), int(r[1]))
        decision_rows.append(
            (
                annotators[who[0]],
                annotators[who[1]],
                decision_order[int(r[2])],
                decision_order[int(r[3])],
                int(r[4]),
            )
        )
        sums = packed.setdefault(who, [0] * (3 * n_chunks))
        for t, value in enumerate(r[5 : 5 + 3 * n_chunks]):
            sums[t] += int(value or 0)
    code_rows = {}
    for (who_a, who_b), sums in packed.items():
        both = packing.unpack(sums[:n_chunks])
        in_a = packing.unpack(sums[n_chunks : 2 * n_chunks])
        in_b = packing.unpack(sums[2 * n_chunks :])
        code_rows[(annotators[who_a], annotators[who_b])] = list(zip(both, in_a, in_b, strict=True))
    return decision_rows, code_rows


def _counted_group_rows(
    conn: Any, cats: list[str], key: Any, group_join: tuple[Any, Any], scope: Scope
) -> list[Any]:
    """The per-group unit rows (part 1) counted from the current labels in scope."""
    n_cats = len(cats)
    # per case: label count m and the count of each decision (no reason code: the groups
    # show decisions only), in one pass over the labels in case order
    item = (
        in_scope(
            select(
                Label.case_id.label("case_id"),
                func.count().label("m"),
                *[func.sum(_one(Label.decision == d)).label(f"d{j}") for j, d in enumerate(cats)],
            ).where(current_label_filter()),
            scope,
        )
        .group_by(Label.case_id)
        .cte("item")
    )
    c = item.c
    table, on = group_join
    return list(
        conn.execute(
            select(
                literal(1),
                key,
                c.m,
                func.count(),
                *[func.sum(c[f"d{j}"]) for j in range(n_cats)],
                func.sum(sum((c[f"d{j}"] * c[f"d{j}"] for j in range(n_cats)), literal(0))),
            )
            .select_from(item.join(table, on == c.case_id))
            .group_by(key, c.m)
        )
    )


def _stored_group_rows(conn: Any, cats: list[str], kind: str, stored: str) -> list[Any]:
    """The per-group unit rows (part 1, as ``_counted_rows`` shapes them) from the stored
    figures per slice or category (review.cases.agreement_groups) of the scope ``stored``."""
    v = AgreementGroupValue
    per: dict[tuple[str, int], dict[str, tuple[int, int]]] = {}
    for grp, m, decision, labels, squares in conn.execute(
        select(v.grp, v.m, v.decision, v.labels, v.squares).where(v.scope == stored, v.kind == kind)
    ):
        per.setdefault((str(grp), int(m)), {})[str(decision)] = (int(labels), int(squares))
    rows: list[Any] = []
    for (grp, m), values in sorted(per.items()):
        known = [values.get(d, (0, 0)) for d in cats]
        rows.append(
            (
                1,
                grp,
                m,
                sum(n for n, _ in values.values()) // m,  # every item with m labels: m decisions
                *[n for n, _ in known],
                sum(sq for _, sq in known),
            )
        )
    return rows


def _stored_rows(
    conn: Any,
    cats: list[str],
    codes: list[str],
    key: Any,
    group_join: tuple[Any, Any],
    stored_groups: str | None,
    stored: str,
    scope: Scope,
) -> tuple[list[Any], PairRows, CodeRows, list[str]]:
    """The unit rows and the annotator pairs of the report from the stored rollup
    (review.labels.agreement_rollup) of the scope ``stored`` (review.cases.agreement_counts:
    the view of ``scope``), and the per-group unit rows from the current labels in scope (a
    group's cases change as cases are edited; one more statement). The unit rows are shaped as
    ``_counted_rows`` shapes them (part 0 from ``agreement_item_values``: per m, its items,
    per decision the labels and the sum of the squared per-item counts, per reason code the
    same; part 1 per group and m). Last, the reason codes outside ``codes`` that current
    labels have (sorted), as ``_unknown_codes`` finds them. With ``stored_groups`` (the kind
    of group: "slice" or "category") the per-group rows are read from the stored figures
    too (review.cases.agreement_groups)."""
    group_rows = (
        _stored_group_rows(conn, cats, stored_groups, stored)
        if stored_groups
        else _counted_group_rows(conn, cats, key, group_join, scope)
    )
    p, k, v = AgreementPair, AgreementPairCode, AgreementItemValue
    rows = conn.execute(
        union_all(
            select(
                literal(0),
                p.annotator_a,
                p.annotator_b,
                p.decision_a,
                p.decision_b,
                p.cases,
                null(),
                null(),
            ).where(p.scope == stored),
            select(
                literal(1), k.annotator_a, k.annotator_b, k.code, null(), k.both, k.in_a, k.in_b
            ).where(k.scope == stored, k.code.in_(codes)),
            select(literal(2), v.field, v.value, null(), null(), v.m, v.labels, v.squares).where(
                v.scope == stored
            ),
        )
    ).all()
    position = {code: i for i, code in enumerate(codes)}
    decision_rows: PairRows = []
    code_rows: CodeRows = {}
    # per m: per decision and per code in the lists, (labels, squares); and all labels
    per_m: dict[int, dict[tuple[str, str], tuple[int, int]]] = {}
    labels_at: dict[int, int] = {}
    unknown: set[str] = set()
    for part, x1, x2, x3, x4, n1, n2, n3 in rows:
        if int(part) == 0:
            decision_rows.append((str(x1), str(x2), str(x3), str(x4), int(n1)))
        elif int(part) == 1:
            counts = code_rows.setdefault((str(x1), str(x2)), [(0, 0, 0)] * len(codes))
            counts[position[str(x3)]] = (int(n1), int(n2), int(n3))
        else:
            m = int(n1)
            per_m.setdefault(m, {})[(str(x1), str(x2))] = (int(n2), int(n3))
            if str(x1) == "decision":  # every label has one decision
                labels_at[m] = labels_at.get(m, 0) + int(n2)
            elif str(x2) not in position:
                unknown.add(str(x2))
    unit_rows: list[Any] = []
    for m in sorted(per_m):
        dec = [per_m[m].get(("decision", d), (0, 0)) for d in cats]
        cod = [per_m[m].get(("code", code), (0, 0)) for code in codes]
        unit_rows.append(
            (
                0,
                None,
                m,
                labels_at[m] // m,  # items: every item with m labels has m decisions
                *[n for n, _ in dec],
                sum(sq for _, sq in dec),
                *[n for n, _ in cod],
                *[sq for _, sq in cod],
            )
        )
    return unit_rows + list(group_rows), decision_rows, code_rows, sorted(unknown, key=str)


def _counted_rows(
    conn: Any,
    dialect: str,
    cats: list[str],
    codes: list[str],
    annotators: list[str],
    packing: _Packing,
    scope: Scope,
    grouping: tuple[Any, Any, Any],
) -> tuple[list[Any], list[Any]]:
    """The report's counts from the current labels in scope, in one statement: the unit rows
    (part 0: per label count m, its items, per decision the labels and the sum of the squared
    per-item counts, per reason code the same; part 1: per group and m, the decision figures)
    and the annotator-pair rows (annotator and decision positions, cases, packed reason-code
    sums of both/a/b)."""
    key, table, on = grouping
    n_cats, n_codes = len(cats), len(codes)
    decision_order = sorted(cats)
    rc = cast(Label.reason_codes, Text)  # NULL: no code (instr and strpos give NULL)
    present = [_holds(dialect, rc, json.dumps(code)) for code in codes]
    n_chunks = len(packing.chunks)

    # One statement over the current labels in scope, found once (``cur``): each label's
    # case, annotator, decision (NULL when not among the categories) and packed reason
    # codes.
    cur = in_scope(
        select(
            Label.case_id.label("case_id"),
            _position(dialect, Label.annotator, annotators).label("who"),
            _position(dialect, Label.decision, decision_order, exact=True).label("value"),
            *[col.label(f"k{i}") for i, col in enumerate(packing.columns(present))],
        ).where(current_label_filter()),
        scope,
    ).cte("cur")
    # 1. per case (``item``): label count m, the count of each decision, and each reason
    #    code's count (the packed flags summed, then unpacked); then summed per m,
    #    overall (part 0) and per group, slice or category (part 1)
    item = (
        select(
            cur.c.case_id,
            func.count().label("m"),
            *[
                func.sum(_one(cur.c.value == decision_order.index(d))).label(f"d{j}")
                for j, d in enumerate(cats)
            ],
            *[cast(func.sum(cur.c[f"k{i}"]), BigInteger).label(f"s{i}") for i in range(n_chunks)],
        )
        .group_by(cur.c.case_id)
        .cte("item")
    )
    c = item.c
    mask = (1 << packing.width) - 1
    code_counts = [
        c[f"s{i}"]
        .bitwise_rshift(cast(literal(packing.width * t), Integer))
        .bitwise_and(literal(mask, BigInteger))
        for i, chunk in enumerate(packing.chunks)
        for t in range(len(chunk))
    ]
    decision_sums = [
        *[func.sum(c[f"d{j}"]) for j in range(n_cats)],
        func.sum(sum((c[f"d{j}"] * c[f"d{j}"] for j in range(n_cats)), literal(0))),
    ]
    unit_width = 2 + n_cats + 1 + 2 * n_codes
    pair_width = 5 + 3 * n_chunks
    width = max(unit_width, pair_width)
    overall_part = select(
        literal(0).label("part"),
        null().label("g"),
        c.m,
        func.count(),
        *decision_sums,
        *[func.sum(p) for p in code_counts],
        *[func.sum(p * p) for p in code_counts],
        *[null() for _ in range(width - unit_width)],
    ).group_by(c.m)
    group_part = (
        select(
            literal(1),
            key,
            c.m,
            func.count(),
            *decision_sums,
            *[null() for _ in range(width - unit_width + 2 * n_codes)],
        )
        .select_from(item.join(table, on == c.case_id))
        .group_by(key, c.m)
    )
    # 2. annotator pairs on the same case (self-join of ``cur``; part 2): per pair of
    #    annotators and pair of decisions, the number of cases and each reason code's
    #    both/a/b counts (packed)
    a, b = cur.alias("a"), cur.alias("b")
    pair_part = (
        select(
            literal(2),
            null(),
            a.c.who,
            b.c.who,
            a.c.value,
            b.c.value,
            func.count(),
            *[func.sum(a.c[f"k{i}"].bitwise_and(b.c[f"k{i}"])) for i in range(n_chunks)],
            *[func.sum(a.c[f"k{i}"]) for i in range(n_chunks)],
            *[func.sum(b.c[f"k{i}"]) for i in range(n_chunks)],
            *[null() for _ in range(width - pair_width)],
        )
        .select_from(a.join(b, and_(a.c.case_id == b.c.case_id, a.c.who < b.c.who)))
        .group_by(a.c.who, b.c.who, a.c.value, b.c.value)
    )
    all_rows = conn.execute(union_all(overall_part, group_part, pair_part)).all()
    unit_rows = [r[: 2 + unit_width] for r in all_rows if int(r[0]) < 2]
    pair_rows = [r[2 : 2 + pair_width] for r in all_rows if int(r[0]) == 2]
    return unit_rows, pair_rows


def _group_annotators(
    conn: Any, dialect: str, key: Any, group_join: tuple[Any, Any], scope: Scope
) -> dict[str, int]:
    """Per group, the annotators with a label on its cases in scope (every (case, annotator)
    with a label has exactly one current label, so no "current" test). PostgreSQL counts the
    distinct (group, annotator) pairs (a hash aggregate, half the time of COUNT(DISTINCT)'s
    sort at 200,000 labels); SQLite's COUNT(DISTINCT) reads the index in order."""
    table, on = group_join
    joined = (
        select(key.label("g"), Label.annotator).select_from(Label).join(table, on == Label.case_id)
    )
    if _label_filter(scope):
        joined = joined.where(current_label_filter())
    if dialect == "postgresql":
        pairs = in_scope(joined.distinct(), scope).subquery()
        stmt = select(pairs.c.g, func.count()).group_by(pairs.c.g)
    else:
        stmt = in_scope(
            select(key, func.count(distinct(Label.annotator)))
            .select_from(Label)
            .join(table, on == Label.case_id)
            .group_by(key),
            scope,
        )
        if _label_filter(scope):
            stmt = stmt.where(current_label_filter())
    return {str(name): int(n) for name, n in conn.execute(stmt).all()}


def _stored_group_annotators(conn: Any, kind: str, stored: str) -> dict[str, int]:
    """Per group, the annotators with a label on its cases, from the stored figures of the
    scope ``stored``."""
    a = AgreementGroupAnnotator
    stmt = (
        select(a.grp, func.count())
        .where(a.scope == stored, a.kind == kind, a.cases > 0)
        .group_by(a.grp)
    )
    return {str(name): int(n) for name, n in conn.execute(stmt).all()}


def _stored_annotators(conn: Any, stored: str) -> int:
    """The annotators with a label in the scope ``stored``, from its stored figures per
    category (every case has one category: each such annotator has a row there)."""
    a = AgreementGroupAnnotator
    who = select(func.count(distinct(a.annotator))).where(
        a.scope == stored, a.kind == "category", a.cases > 0
    )
    return int(conn.scalar(who) or 0)


def _label_filter(scope: Scope) -> bool:
    """Whether ``scope`` filters the labels themselves (their source or import): then a label
    in it may have been replaced since by one outside it, so "has a label in scope" needs the
    current-label test (a filter on the cases does not: a case's current label is on it)."""
    return bool(scope.source) or scope.import_id is not None


def stored_scope(scope: Scope) -> tuple[str, bool] | None:
    """The scope of the stored rows that hold the view of ``scope``
    (review.cases.agreement_counts) and whether it filters the cases (then the rows stand
    for the cases' groups only while their stamp is right). None for a family's views (a
    handful of cases: counted from the labels)."""
    if scope.family:
        return None
    given = [
        (kind, value)
        for kind, value in (
            ("slice", scope.slice_),
            ("category", scope.category),
            ("source", scope.source),
            ("import", scope.import_id),
        )
        if value not in ("", None)
    ]
    return scope_key(*given), bool(scope.slice_ or scope.category)


def agreement_report_sql(
    engine: Engine,
    decisions: Sequence[str],
    reason_codes: Sequence[str],
    *,
    slice_: str = "",
    category: str = "",
    family: str = "",
    source: str = "",
    import_id: int | None = None,
    group_by: str = "slice",
) -> AgreementReport | None:
    """``agreement_report`` over the current labels in the database, from SQL aggregates only
    (no query returns a row per label): the same tables, values, row order and notes; None
    when no label is left. Decisions or reason codes outside the lists are refused with the
    same error. One aggregate statement over the labels (a lighter one and a read of the
    stored rollup for the unfiltered views) and a few small look-ups, in one read transaction
    (one snapshot)."""
    scope = Scope(slice_, category, family, source, import_id)
    cats = list(dict.fromkeys(decisions))
    codes = list(dict.fromkeys(reason_codes))
    n_cats, n_codes = len(cats), len(codes)
    dialect = engine.dialect.name
    rc = cast(Label.reason_codes, Text)  # NULL: no code (instr and strpos give NULL)
    if group_by == "category":
        key: Any = Case.category
        group_join: Any = (Case, Case.id)
    else:
        key = CaseSlice.slice
        group_join = (CaseSlice, CaseSlice.case_id)

    with read_session(engine) as s:
        # one snapshot for every statement (SQLite's read transaction already is one)
        options = {"isolation_level": "REPEATABLE READ"} if dialect == "postgresql" else {}
        conn = s.connection(execution_options=options)

        # Annotators and decisions enter as their positions in Python's order (small sort
        # keys, and "a < b" as agreement_table orders them). Label ids are distinct positive
        # integers, so the newest id bounds every count below (labels, cases, pairs): the
        # width of the packed reason-code counts.
        annotators = sorted(str(x) for x in distinct_values(s, Label.annotator))
        decision_order = sorted(cats)
        # The unfiltered views read the stored rollup (agreement_rollup) while it stands for
        # exactly the label rows there are (a label written past the labeling service leaves
        # it behind: then everything is counted here)
        stored_groups: str | None = None
        found = stored_scope(scope)
        view, on_cases = found if found is not None else (None, False)
        if view is None:
            stored, newest = False, conn.scalar(select(func.max(Label.id)))
        else:
            n_rows, newest, stamp_rows, stamp_newest, groups_stamp, groups_now = conn.execute(
                select(
                    func.count(Label.id),
                    func.coalesce(func.max(Label.id), 0),
                    *stamp_columns(),
                    *agreement_groups.stamp_columns(),
                )
            ).one()
            stored = (stamp_rows, stamp_newest) == (n_rows, newest)
            # the figures per group, and the views of a slice or category, also stand for the
            # cases' slices and categories as they are
            groups_right = stored and groups_stamp == groups_now
            if groups_right:
                stored_groups = "category" if group_by == "category" else "slice"
            if on_cases:
                stored = groups_right
        packing = _Packing.for_counts(n_codes, int(newest or 0))
        if stored and view is not None:
            unit_rows, decision_rows, code_rows, unknown = _stored_rows(
                conn, cats, codes, key, group_join, stored_groups, view, scope
            )
        else:
            unit_rows, pair_rows = _counted_rows(
                conn,
                dialect,
                cats,
                codes,
                annotators,
                packing,
                scope,
                (key, *group_join),
            )
        units = [r[2:] for r in unit_rows if int(r[0]) == 0]
        n_cases = sum(int(r[1]) for r in units)
        n_labels = sum(int(r[0]) * int(r[1]) for r in units)
        if n_labels == 0:
            return None
        if sum(int(r[2 + j] or 0) for r in units for j in range(n_cats)) != n_labels:
            used = list(
                conn.scalars(
                    in_scope(select(Label.decision).distinct(), scope).where(
                        current_label_filter(), Label.decision.not_in(cats)
                    )
                )
            )
            raise InputError(
                f"labels: {readable.plural(len(used), 'value')} "
                f"{', '.join(map(repr, sorted(str(d) for d in used)))} "
                f"{readable.plural(len(used), 'is', 'are')} "
                f"not among the categories {', '.join(map(repr, cats))}"
            )
        if not stored:
            unknown = _unknown_codes(conn, rc, codes, scope)
        if unknown:
            raise InputError(
                "reason codes: not in the list of reason codes: "
                + ", ".join(repr(u) for u in unknown)
            )

        # 3. annotators, overall and per group: every (case, annotator) with a label has
        #    exactly one current label, so these counts need no "current" test, but for a
        #    filter on the labels themselves (the current label may be outside it)
        if not scope:
            n_annotators = len(annotators)
        elif stored_groups and view is not None:
            n_annotators = _stored_annotators(conn, view)
        else:
            who = in_scope(select(func.count(distinct(Label.annotator))), scope)
            if _label_filter(scope):
                who = who.where(current_label_filter())
            n_annotators = int(conn.scalar(who) or 0)
        group_annotators = (
            _stored_group_annotators(conn, stored_groups, view)
            if stored_groups and view is not None
            else _group_annotators(conn, dialect, key, group_join, scope)
        )

        if not stored:
            decision_rows, code_rows = _counted_pair_rows(
                pair_rows, annotators, decision_order, packing
            )

    values = sorted(cats)  # value order (only a tie, which the notes never meet, uses it)
    dec_pairs, code_pairs, grid = _pair_counts(decision_rows, code_rows, cats, n_codes)
    decision = _table_frame(
        "decision", dec_pairs, _decision_overall(units, cats, values, n_annotators)
    )
    decision_pairs = _decision_pairs_frame(grid, cats)
    reasons = _reason_tables(units, codes, n_cats, code_pairs, n_annotators)
    rows = _group_rows(unit_rows, cats, values, group_annotators)
    return AgreementReport(
        cases=n_cases,
        annotators=n_annotators,
        labels=n_labels,
        decision=decision,
        decision_pairs=decision_pairs,
        reasons=reasons,
        groups=pd.DataFrame(rows, columns=GROUP_COLUMNS),
        fleiss=_fleiss_tables(units, cats, codes),
    )


def _pair_counts(
    decision_rows: PairRows,
    code_rows: CodeRows,
    cats: list[str],
    n_codes: int,
) -> tuple[
    dict[tuple[str, str], _PairCounts],
    list[dict[tuple[str, str], _PairCounts]],
    npt.NDArray[np.int64],
]:
    """Per pair of annotators, the counts of their decisions and of each reason code; and the
    grid of decision pairs (upper triangle, category order)."""
    dec_pairs: dict[tuple[str, str], _PairCounts] = {}
    code_pairs: list[dict[tuple[str, str], _PairCounts]] = [{} for _ in range(n_codes)]
    position = {d: i for i, d in enumerate(cats)}
    grid = np.zeros((len(cats), len(cats)), dtype=np.int64)
    for ann_a, ann_b, val_a, val_b, n in decision_rows:
        p = dec_pairs.setdefault((ann_a, ann_b), _PairCounts())
        p.n += n
        p.agree += n if val_a == val_b else 0
        p.rows[val_a] = p.rows.get(val_a, 0) + n
        p.cols[val_b] = p.cols.get(val_b, 0) + n
        i, j = sorted((position[val_a], position[val_b]))
        grid[i, j] += n
    for pair, p in dec_pairs.items():
        n = p.n
        for k, (both, in_a, in_b) in enumerate(code_rows.get(pair, [(0, 0, 0)] * n_codes)):
            code_pairs[k][pair] = _PairCounts(
                n,
                both + (n - in_a - in_b + both),
                {False: n - in_a, True: in_a},
                {False: n - in_b, True: in_b},
            )
    for pair_counts in (dec_pairs, *code_pairs):
        for p in pair_counts.values():
            p.rows = {v: p.rows[v] for v in sorted(p.rows)}  # value order, for _argmax
    return dec_pairs, code_pairs, grid


def _decision_pairs_frame(grid: npt.NDArray[np.int64], cats: list[str]) -> pd.DataFrame:
    """confusion_pairs(..., mirror=True): the full grid in category order."""
    n_cats = len(cats)
    if n_cats == 0:
        return pd.DataFrame({"value_a": [], "value_b": [], "pairs": np.array([], np.int64)})
    grid = grid + np.triu(grid, 1).T
    ia = np.repeat(np.arange(n_cats), n_cats)
    ib = np.tile(np.arange(n_cats), n_cats)
    return pd.DataFrame(
        {
            "value_a": [cats[i] for i in ia],
            "value_b": [cats[i] for i in ib],
            "pairs": grid[ia, ib],
        }
    )


def _reason_tables(
    units: Sequence[Any],
    codes: Sequence[str],
    n_cats: int,
    code_pairs: Sequence[dict[tuple[str, str], _PairCounts]],
    n_annotators: int,
) -> pd.DataFrame:
    """The agreement table of each reason code (present or not), one after the other."""
    n_codes = len(codes)
    reason_frames = []
    first = 2 + n_cats + 1  # the reason codes' sums follow the decisions' in each row
    for k, code in enumerate(codes):
        items: dict[int, int] = {}
        same: dict[int, int] = {}
        counts = {False: 0, True: 0}
        for u in units:
            m, n_items = int(u[0]), int(u[1])
            got = int(u[first + k] or 0)  # labels with the code
            squares = int(u[first + n_codes + k] or 0)  # sum over cases of (count with it)^2
            items[m] = n_items
            # pairs that agree: both with the code, or both without it
            same[m] = squares - m * got + n_items * m * (m - 1) // 2
            if m >= 2:
                counts[True] += got
                counts[False] += m * n_items - got
        overall = _Overall(items, same, counts, n_annotators)
        reason_frames.append(_table_frame(str(code), code_pairs[k], overall))
    return (
        pd.concat(reason_frames, ignore_index=True)
        if reason_frames
        else pd.DataFrame(columns=TABLE_COLUMNS)
    )


def _group_rows(
    unit_rows: Sequence[Any],
    cats: list[str],
    values: list[str],
    group_annotators: Mapping[str, int],
) -> list[dict[str, Any]]:
    """The decision agreement of each group (slice or category), in name order."""
    by_group: dict[str, list[Any]] = {}
    for r in unit_rows:
        if int(r[0]) == 1:
            by_group.setdefault(str(r[1]), []).append(r[2:])
    rows = []
    for name in sorted(by_group):
        o = _decision_overall(by_group[name], cats, values, group_annotators[name])
        n_pairable, raw, alpha, note = _overall_values(o)
        fl = fleiss_from_sums(_decision_sums(by_group[name], cats))
        rows.append(
            {
                "group": name,
                "items": n_pairable,
                "annotators": o.annotators,
                "raw agreement": np.nan if raw is None else raw,
                "alpha": np.nan if alpha is None else alpha,
                "fleiss kappa": np.nan if fl.kappa is None else fl.kappa,
                "note": joined_note(note, fl.note),
            }
        )
    return rows


def _decision_sums(units: Sequence[Any], cats: list[str]) -> list[FleissSums]:
    """Fleiss' sums of the decision from unit rows ``(m, items, each decision's labels, sum
    of the squared per-item counts, ...)``."""
    return [
        (
            int(u[0]),
            int(u[1]),
            {d: int(u[2 + j] or 0) for j, d in enumerate(cats)},
            int(u[2 + len(cats)] or 0),
        )
        for u in units
    ]


def _fleiss_tables(units: Sequence[Any], cats: list[str], codes: Sequence[str]) -> pd.DataFrame:
    """Fleiss' kappa of the decision and of each reason code (present or absent) from the
    unit rows, as ``agreement_report`` gives them. A code's "absent" sums follow from its
    "present" ones: m * items - labels, and sum (m - c)^2 = m^2 items - 2 m labels + sum c^2."""
    frames = [fleiss_table("decision", _decision_sums(units, cats))]
    first = 2 + len(cats) + 1  # the reason codes' sums follow the decisions' in each row
    for k, code in enumerate(codes):
        sums: list[FleissSums] = []
        for u in units:
            m, n = int(u[0]), int(u[1])
            got = int(u[first + k] or 0)
            squares = int(u[first + len(codes) + k] or 0)
            sums.append(
                (m, n, {False: m * n - got, True: got}, 2 * squares + m * m * n - 2 * m * got)
            )
        frames.append(fleiss_table(str(code), sums))
    return pd.concat(frames, ignore_index=True)
