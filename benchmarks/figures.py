"""Figures of the scale benchmark: wall and CPU time beside a reference of the same run, their
targets, the comparison with recorded figures, and the Markdown tables (one engine, or two
engines side by side from two recorded files).

A *figure* is one timed step (a page's first view, an audit draw, the import, ...). Each names
the *reference* of its area, measured in the same run (one full read of the traces table for
the database areas, the raw-insert floor for the import, scikit-learn for the risk-coverage
sweep), and its ratio to that reference is what is compared between runs: a machine busy with
other work slows a figure and its reference alike, so the ratio still says whether the code
got slower. Pure functions over plain data (JSON-ready dicts); nothing here touches a database.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "REGRESSION_FACTOR",
    "Change",
    "Figure",
    "Reference",
    "Target",
    "compare",
    "cpu_ratio",
    "engine_label",
    "load_record",
    "make_record",
    "met",
    "ratio",
    "references_of",
    "render_comparison",
    "render_engines",
    "render_figures",
    "run_labels",
    "save_record",
    "side_by_side_rows",
    "target_s",
    "work_cpu",
]

REGRESSION_FACTOR = 1.25  # a ratio to the reference this much above the recorded one
MIN_DELTA_S = 0.05  # ... and at least this many seconds slower than the recorded ratio implies


@dataclasses.dataclass(frozen=True)
class Target:
    """``max_s``: wall time at most ``value`` seconds; ``max_ratio``: wall time at most
    ``value`` times the reference's (the import against its floor: 2.0 = half its rate).
    ``cpu_value``, where set: the CPU time of the work (the app server's and the database
    server's together, as the browser benchmark measures them) at most that many seconds too."""

    kind: str
    value: float
    text: str
    cpu_value: float | None = None


@dataclasses.dataclass(frozen=True)
class Reference:
    key: str
    what: str
    wall_s: float | None
    cpu_s: float | None
    error: str = ""
    db_cpu_s: float | None = None  # the database server's CPU (browser benchmark, PostgreSQL)
    browser_cpu_s: float | None = None  # the browser's CPU (browser benchmark)


@dataclasses.dataclass(frozen=True)
class Figure:
    key: str  # stable across runs: the comparison matches figures by key
    area: str
    what: str
    wall_s: float | None  # None: the step failed (see error) or did not run
    cpu_s: float | None
    ref: str | None  # key of the Reference it is scaled by
    target: Target | None = None
    other: str = ""
    mem: str = ""
    py_peak: str = ""
    notes: str = ""
    error: str = ""
    db_cpu_s: float | None = None  # the database server's CPU (browser benchmark, PostgreSQL)
    browser_cpu_s: float | None = None  # the browser's CPU (browser benchmark)


def work_cpu(fig: Figure) -> float | None:
    """CPU time of the work: the measuring process's, plus the database server's where it was
    measured (None when neither was)."""
    if fig.cpu_s is None and fig.db_cpu_s is None:
        return None
    return (fig.cpu_s or 0.0) + (fig.db_cpu_s or 0.0)


def target_s(seconds: float) -> Target:
    return Target("max_s", seconds, f"≤ {seconds:g} s")


def cpu_ratio(fig: Figure, refs: dict[str, Reference]) -> float | None:
    """CPU time over the reference's CPU time, or None when either is missing or zero."""
    ref = refs.get(fig.ref or "")
    if fig.cpu_s is None or ref is None or not ref.cpu_s or not math.isfinite(fig.cpu_s):
        return None
    return fig.cpu_s / ref.cpu_s


def ratio(fig: Figure, refs: dict[str, Reference]) -> float | None:
    """Wall time over the reference's wall time, or None when either is missing or zero."""
    ref = refs.get(fig.ref or "")
    if fig.wall_s is None or ref is None or not ref.wall_s or not math.isfinite(fig.wall_s):
        return None
    return fig.wall_s / ref.wall_s


def met(fig: Figure, refs: dict[str, Reference]) -> bool | None:
    """Whether the figure is within its target; None when it has none or cannot be read."""
    if fig.target is None or fig.wall_s is None:
        return None
    if fig.target.cpu_value is not None:
        cpu = work_cpu(fig)
        if cpu is None:
            return None
        if cpu > fig.target.cpu_value:
            return False
    if fig.target.kind == "max_s":
        return fig.wall_s <= fig.target.value
    if fig.target.kind == "max_ratio":
        r = ratio(fig, refs)
        return None if r is None else r <= fig.target.value
    raise ValueError(f"unknown target kind {fig.target.kind!r} of figure {fig.key}")


# ---------------------------------------------------------------------------------------
# Records: what --record writes and every run compares with


def make_record(
    *,
    engine: str,
    machine: dict[str, str],
    requested: dict[str, Any],
    sizes: dict[str, int],
    references: Iterable[Reference],
    figures: Iterable[Figure],
    recorded_at: str,
) -> dict[str, Any]:
    return {
        "engine": engine,
        "machine": machine,
        "requested": requested,
        "sizes": sizes,
        "recorded_at": recorded_at,
        "references": [dataclasses.asdict(r) for r in references],
        "figures": [dataclasses.asdict(f) for f in figures],
    }


def save_record(path: Path, record: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def load_record(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    for key in ("engine", "references", "figures"):
        if key not in data:
            raise ValueError(f"{path} is not a scale benchmark record: no {key!r}")
    return data


def references_of(record: dict[str, Any]) -> dict[str, Reference]:
    """A record's references by key."""
    return _refs(record)


def _refs(record: dict[str, Any]) -> dict[str, Reference]:
    return {r["key"]: Reference(**r) for r in record["references"]}


def _figs(record: dict[str, Any]) -> list[Figure]:
    out = []
    for f in record["figures"]:
        t = f.get("target")
        out.append(Figure(**{**f, "target": Target(**t) if t else None}))
    return out


def engine_label(record: dict[str, Any]) -> str:
    return {"sqlite": "SQLite", "postgresql": "PostgreSQL"}.get(
        record["engine"], str(record["engine"])
    )


def _millions(n: int) -> str:
    return f"{n / 1e6:.1f}M" if n >= 100_000 else f"{n:,}"


def run_labels(records: Sequence[dict[str, Any]]) -> list[str]:
    """The column label of each run: its engine, and where two runs share an engine, its
    number of traces too (``PostgreSQL, 1.6M traces``), so every label is distinct."""
    engines = [engine_label(r) for r in records]
    labels = [
        f"{e}, {_millions(int(r.get('sizes', {}).get('traces', 0)))} traces"
        if engines.count(e) > 1
        else e
        for e, r in zip(engines, records, strict=True)
    ]
    if len(set(labels)) < len(labels):
        labels = [f"{lab} ({i + 1})" for i, lab in enumerate(labels)]
    return labels


# ---------------------------------------------------------------------------------------
# Comparison with the recorded figures


@dataclasses.dataclass(frozen=True)
class Change:
    key: str
    area: str
    what: str
    ratio_now: float | None  # None: the figure failed now
    ratio_then: float
    factor: float  # ratio_now / ratio_then (inf when it failed now)
    wall_s: float | None
    expected_s: float | None  # the wall time the recorded ratio implies under today's reference
    ref: str
    cpu_factor: float | None = None  # the same for CPU ratios, where both runs have them


def compare(
    current: dict[str, Any],
    recorded: dict[str, Any],
    factor: float = REGRESSION_FACTOR,
    min_delta_s: float = MIN_DELTA_S,
    confirm_cpu: bool | None = None,
) -> tuple[list[Change], list[Change]]:
    """(regressions, improvements) of ``current`` against ``recorded``, by ratio to each
    figure's reference in its own run: a regression is a ratio more than ``factor`` times the
    recorded one and at least ``min_delta_s`` slower than that recorded ratio implies today
    (so a millisecond figure's jitter is not news), or a figure that ran then and fails now;
    an improvement the reverse. With ``confirm_cpu`` (the default on SQLite, where the
    measuring process's CPU holds all the work, the SQL included) the ratio of CPU times must
    have moved past ``factor`` the same way too, where both runs have one: on a machine busy
    with other work, wall time is stretched unevenly and CPU time much less. Regressions come
    worst first, improvements best first. Figures of one run only, or without a reference in
    either run, are left out."""
    if confirm_cpu is None:
        confirm_cpu = current.get("engine") == "sqlite"
    if factor <= 1.0:
        raise ValueError(f"factor must be above 1, got {factor}")
    refs_now, refs_then = _refs(current), _refs(recorded)
    then = {f.key: f for f in _figs(recorded)}
    worse: list[Change] = []
    better: list[Change] = []
    for fig in _figs(current):
        old = then.get(fig.key)
        if old is None:
            continue
        r_then = ratio(old, refs_then)
        if r_then is None or r_then <= 0:
            continue
        ref_now = refs_now.get(fig.ref or "")
        if fig.wall_s is None:
            if fig.error:
                worse.append(
                    Change(
                        fig.key, fig.area, fig.what, None, r_then, math.inf, None, None,
                        fig.ref or "",
                    )
                )  # fmt: skip
            continue
        r_now = ratio(fig, refs_now)
        if r_now is None or ref_now is None or ref_now.wall_s is None:
            continue
        expected = r_then * ref_now.wall_s
        c_now, c_then = cpu_ratio(fig, refs_now), cpu_ratio(old, refs_then)
        c_factor = c_now / c_then if c_now is not None and c_then else None
        change = Change(
            fig.key, fig.area, fig.what, r_now, r_then, r_now / r_then, fig.wall_s, expected,
            fig.ref or "", c_factor,
        )  # fmt: skip
        cpu_worse = not confirm_cpu or c_factor is None or c_factor > factor
        cpu_better = not confirm_cpu or c_factor is None or c_factor < 1.0 / factor
        if change.factor > factor and fig.wall_s - expected >= min_delta_s and cpu_worse:
            worse.append(change)
        elif change.factor < 1.0 / factor and expected - fig.wall_s >= min_delta_s and cpu_better:
            better.append(change)
    worse.sort(key=lambda c: -c.factor)
    better.sort(key=lambda c: c.factor)
    return worse, better


def _same_sizes(current: dict[str, Any], recorded: dict[str, Any]) -> bool:
    return bool(current.get("requested") == recorded.get("requested"))


def render_comparison(current: dict[str, Any], recorded: dict[str, Any], source: str) -> str:
    """The regressions, then the improvements, against a recorded run (Markdown)."""
    code = recorded.get("machine", {}).get("code", "unknown")
    when = recorded.get("recorded_at", "unknown")
    head = f"against {source} (code {code}, recorded {when})"
    if recorded.get("engine") != current.get("engine"):
        return (
            f"## Regressions\n\nNot compared {head}: it was recorded on "
            f"{engine_label(recorded)}, this run is on {engine_label(current)}.\n"
        )
    if not _same_sizes(current, recorded):
        return (
            f"## Regressions\n\nNot compared {head}: recorded at other sizes "
            f"({json.dumps(recorded.get('requested'), sort_keys=True)}; now "
            f"{json.dumps(current.get('requested'), sort_keys=True)}).\n"
        )
    worse, better = compare(current, recorded)

    def line(c: Change) -> str:
        if c.ratio_now is None:
            return f"- {c.area}: {c.what}: failed now ({c.ratio_then:.3g}× {c.ref} then)"
        verb = "slower" if c.factor > 1 else "faster"
        shown = c.factor if c.factor > 1 else 1 / c.factor
        cpu = "" if c.cpu_factor is None else f"; CPU ratio {c.cpu_factor:.2f}x the recorded one"
        return (
            f"- {c.area}: {c.what}: {c.ratio_now:.3g}× {c.ref} now, {c.ratio_then:.3g}× then "
            f"({shown:.2f}x {verb}); {c.wall_s:.2f} s, where the recorded ratio gives "
            f"{c.expected_s:.2f} s{cpu}"
        )

    rule = (
        f"ratio to the reference of the same run more than {REGRESSION_FACTOR}x the recorded "
        f"one and at least {MIN_DELTA_S} s off"
        + (", the ratio of CPU times too" if current.get("engine") == "sqlite" else "")
    )
    out = [f"## Regressions {head}", "", f"({rule})", ""]
    out += [line(c) for c in worse] or ["None."]
    out += ["", "## Improvements", ""]
    out += [line(c) for c in better] or ["None."]
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------
# Tables


def _cell(v: object) -> str:
    return str(v).replace("|", "/").replace("\n", " ")


def _s(v: float | None) -> str:
    return "n/a" if v is None else f"{v:,.2f} s"


def _x(fig: Figure, refs: dict[str, Reference]) -> str:
    r = ratio(fig, refs)
    return "" if r is None else f"{r:.3g}× {fig.ref}"


def _met(fig: Figure, refs: dict[str, Reference]) -> str:
    if fig.error:
        return "failed"
    m = met(fig, refs)
    return "" if m is None else "yes" if m else "**no**"


def _ref_lines(refs: dict[str, Reference]) -> list[str]:
    out = []
    for r in refs.values():
        took = r.error or f"{_s(r.wall_s)} wall, {_s(r.cpu_s)} CPU"
        out.append(f"- *{r.key}*: {r.what}: {took}")
    return out


def render_figures(figures: Sequence[Figure], refs: dict[str, Reference]) -> list[str]:
    """One engine's figures as Markdown lines: references first, then the table."""
    lines = [
        "References, measured in this run (each figure's *× ref* is its wall time over its "
        "reference's):",
        "",
        *_ref_lines(refs),
        "",
        "| Area | What | Wall | CPU | × ref | Target | Met | Other | Peak RSS MiB (growth) "
        "| Py peak MiB | Notes |",
        "|---|---|---:|---:|---:|---|---|---:|---:|---:|---|",
    ]
    for f in figures:
        cells = [
            f.area,
            f.what,
            "failed" if f.error else _s(f.wall_s),
            "" if f.error else _s(f.cpu_s),
            _x(f, refs),
            f.target.text if f.target else "",
            _met(f, refs),
            f.other,
            f.mem,
            f.py_peak,
            f.error or f.notes,
        ]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return lines


def _engine_cell(fig: Figure | None, refs: dict[str, Reference]) -> str:
    if fig is None:
        return "not run"
    if fig.error:
        return f"failed: {fig.error[:120]}"
    if fig.wall_s is None:
        return "n/a"
    x = _x(fig, refs)
    return f"{_s(fig.wall_s)} (CPU {_s(fig.cpu_s)}{'; ' + x if x else ''})"


def render_engines(records: Sequence[dict[str, Any]], sources: Sequence[str]) -> str:
    """One Markdown table of several recorded runs (typically SQLite and PostgreSQL at the
    same sizes) side by side: each figure's wall time, CPU time and ratio to its reference in
    each run, its target and whether each run meets it; above it the machine, commit and sizes
    of each run and its references."""
    if not records:
        raise ValueError("no records to render")
    labels = run_labels(records)
    lines = ["# Scale benchmark: " + " and ".join(labels), ""]
    for label, rec, src in zip(labels, records, sources, strict=True):
        m = rec.get("machine", {})
        sz = rec.get("sizes", {})
        lines.append(
            f"- **{label}** ({src}, recorded {rec.get('recorded_at', 'unknown')}): "
            f"{m.get('cpus', '?')} CPUs ({m.get('cpu', '?')}), {m.get('memory', '?')} RAM, "
            f"{m.get('os', '?')}; Python {m.get('python', '?')}, "
            f"{m.get('database', m.get('sqlite', '?'))}; code {m.get('code', 'unknown')}. "
            f"{sz.get('traces', 0):,} traces, {sz.get('trace_chunks', 0):,} chunks, "
            f"{sz.get('cases', 0):,} cases, {sz.get('labels', 0):,} labels."
        )
        refs = _refs(rec)
        lines += ["  " + x for x in _ref_lines(refs)]
    requested = [json.dumps(r.get("requested"), sort_keys=True) for r in records]
    if len(set(requested)) > 1:
        lines += ["", "The runs were made at different sizes: " + "; ".join(requested) + "."]
    lines += [
        "",
        "Each cell: wall time (CPU time of the measuring process; on PostgreSQL the server's "
        "CPU is not in it; ratio to the run's reference of the area).",
        "",
        "| Area | What | Target | " + " | ".join(f"{label} | Met" for label in labels) + " |",
        "|---|---|---|" + "---:|---|" * len(labels),
    ]
    lines += side_by_side_rows(
        records, _engine_cell, lambda fig, refs: _met(fig, refs) if fig else ""
    )
    return "\n".join(lines) + "\n"


Cell = Callable[[Figure | None, dict[str, Reference]], str]


def side_by_side_rows(records: Sequence[dict[str, Any]], cell: Cell, met_cell: Cell) -> list[str]:
    """The body rows of a table of several runs side by side: each figure once, in the order
    the runs first measured it, with its area, what, target, and per run ``cell`` and
    ``met_cell`` of the run's figure (None where that run lacks it) and its references."""
    figs = [{f.key: f for f in _figs(r)} for r in records]
    refs_all = [_refs(r) for r in records]
    order: list[str] = []
    for per in figs:
        order += [k for k in per if k not in order]
    lines = []
    for key in order:
        first = next(per[key] for per in figs if key in per)
        target = next((per[key].target for per in figs if key in per and per[key].target), None)
        cells: list[str] = [first.area, first.what, target.text if target else ""]
        for per, refs in zip(figs, refs_all, strict=True):
            fig = per.get(key)
            cells += [cell(fig, refs), met_cell(fig, refs)]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return lines
