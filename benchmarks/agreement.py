"""The Agreement report and the Adjudicate queue on a database (printed, never asserted):

    .venv/bin/python benchmarks/agreement.py --url sqlite:////tmp/copy-of-scale.db [--repeat 3]

Times ``agreement_report_sql`` for the Agreement page's default view (every label, grouped by
slice), for each slice alone (the "agreement by slice" interaction), grouped by category, for
each category and each source alone, for a slice with a source, a slice with a category and
one family (the filters' interactions), and ``labeling.disagreements`` (the Adjudicate page's
queue, 200 cases). Printed per figure: the
median wall time and the median CPU time of the process over ``--repeat`` runs, after one
untimed run. Run it on a copy of the database ``benchmarks/scale.py --keep`` built (it only
reads). Issue 18 asks for every interaction within 1 s at 200,000 labels, issue 33 at
2,000,000. The views but a family's read the stored sums (review.labels.agreement_rollup, per
scope: review.cases.agreement_counts) only while they are in step with the labels (the first
line says whether they are): migrate the copy first.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import Engine, select

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from review.core.taxonomy import load_taxonomy  # noqa: E402
from review.labels import agreement_rollup, labeling  # noqa: E402
from review.labels.agreement_sql import (  # noqa: E402
    agreement_report_sql,
    family_keys,
    source_choices,
)
from storage.db import make_engine, read_session  # noqa: E402


def _time(name: str, work: Callable[[], object], repeat: int) -> None:
    work()  # warm-up: imports, connection, the database's page cache
    walls, cpus = [], []
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        work()
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    print(
        f"{name:48s} wall {statistics.median(walls):6.3f} s   cpu {statistics.median(cpus):6.3f} s"
    )


def _view(
    engine: Engine,
    decisions: list[str],
    codes: list[str],
    *,
    slice_: str = "",
    category: str = "",
    source: str = "",
    family: str = "",
) -> Callable[[], object]:
    return lambda: agreement_report_sql(
        engine,
        decisions,
        codes,
        slice_=slice_,
        category=category,
        source=source,
        family=family,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="database URL (a copy: it is only read)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    engine = make_engine(args.url)
    tax = load_taxonomy()
    decisions, codes = list(tax.decisions), list(tax.reason_codes)
    n, newest = labeling.labels_stamp(engine)
    with read_session(engine) as s:
        stamp = tuple(s.execute(select(*agreement_rollup.stamp_columns())).one())
    stored = "in step" if stamp == (n, newest) else "behind the labels: counted from them"
    print(f"{n:,d} label rows; stored agreement sums {stored}; median of {args.repeat} runs")
    _time(
        "agreement, default view (group by slice)",
        lambda: agreement_report_sql(engine, decisions, codes),
        args.repeat,
    )
    _time(
        "agreement, group by category",
        lambda: agreement_report_sql(engine, decisions, codes, group_by="category"),
        args.repeat,
    )
    for sl in tax.slices:
        _time(f"agreement, slice {sl}", _view(engine, decisions, codes, slice_=sl), args.repeat)
    for cat in tax.categories:
        _time(
            f"agreement, category {cat}", _view(engine, decisions, codes, category=cat), args.repeat
        )
    sources = source_choices(engine)
    for src in sources:
        _time(f"agreement, source {src}", _view(engine, decisions, codes, source=src), args.repeat)
    first_slice, first_category = sorted(tax.slices)[0], sorted(tax.categories)[0]
    _time(
        f"agreement, slice {first_slice} and source {sources[0]}",
        _view(engine, decisions, codes, slice_=first_slice, source=sources[0]),
        args.repeat,
    )
    _time(
        f"agreement, slice {first_slice} and category {first_category}",
        _view(engine, decisions, codes, slice_=first_slice, category=first_category),
        args.repeat,
    )
    families = family_keys(engine, 1)
    if families:
        _time(
            f"agreement, family {families[0]}",
            _view(engine, decisions, codes, family=families[0]),
            args.repeat,
        )
    _time(
        "disagreements (Adjudicate queue, 200)", lambda: labeling.disagreements(engine), args.repeat
    )
    engine.dispose()


if __name__ == "__main__":
    main()
