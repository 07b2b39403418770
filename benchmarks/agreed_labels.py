"""Reading the agreed labels from the stored rollup (case_agreed) beside computing them from the
labels (the rule, review.cases.agreed.agreed_reference_subquery), on a given database.

    .venv/bin/python benchmarks/agreed_labels.py --url sqlite:////tmp/copy-of-scale.db

Prints wall and CPU time (median of ``--repeat``) of: every agreed label, the agreed labels of
one page of cases, the Runs page's outputs frame of the newest run as it reads them now and as
it read them before (the reference computation joined instead of the table), refreshing one
case's row as a labeling save does, and rebuilding every row as a bulk load does (the rebuild
writes: use a copy of a database that matters). Nothing is asserted."""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from sqlalchemy import select  # noqa: E402

from review.cases import agreed  # noqa: E402
from review.core.taxonomy import load_taxonomy  # noqa: E402
from review.evaluation import evalruns  # noqa: E402
from storage.db import make_engine, read_session, write_session  # noqa: E402
from storage.models import Case, Label  # noqa: E402


def timed(name: str, repeat: int, fn: Callable[[], Any]) -> tuple[float, float]:
    walls: list[float] = []
    cpus: list[float] = []
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    wall, cpu = statistics.median(walls), statistics.median(cpus)
    print(f"{name:<62} wall {wall:8.3f} s   CPU {cpu:8.3f} s")
    return wall, cpu


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--url", required=True, help="a database at the newest schema (a copy)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-writes", action="store_true", help="skip the refresh and the rebuild")
    args = ap.parse_args(argv)
    engine = make_engine(args.url)
    tax = load_taxonomy()
    with read_session(engine) as s:
        ids = list(s.scalars(select(Case.id).order_by(Case.id)))
        last_case = s.scalar(select(Label.case_id).order_by(Label.id.desc()).limit(1))
    runs = evalruns.list_runs(engine)
    print(f"{args.url}: {len(ids):,} cases, {len(runs)} runs (median of {args.repeat})")

    def read(q: Any, subset: list[int] | None = None) -> int:
        stmt = select(q.c.case_id, q.c.gold_decision, q.c.gold_reasons, q.c.agreed_by)
        if subset is not None:
            stmt = stmt.where(q.c.case_id.in_(subset))
        with read_session(engine) as s:
            return len(s.execute(stmt).all())

    page = ids[:100]
    stored = timed(
        "every agreed label, stored", args.repeat, lambda: read(agreed.agreed_subquery())
    )
    timed("every agreed label, computed (reference)", args.repeat,
          lambda: read(agreed.agreed_reference_subquery()))  # fmt: skip
    timed("100 cases' agreed labels, stored", args.repeat,
          lambda: read(agreed.agreed_subquery(), page))  # fmt: skip
    timed("100 cases' agreed labels, computed (reference)", args.repeat,
          lambda: read(agreed.agreed_reference_subquery(), page))  # fmt: skip
    if runs:
        run_id = runs[0].id
        now = timed(f"Runs: outputs_frame({run_id}) reading the stored table", args.repeat,
                    lambda: evalruns.outputs_frame(engine, run_id, tax))  # fmt: skip
        with mock.patch.object(evalruns, "gold_subquery", agreed.agreed_reference_subquery):
            before = timed(f"Runs: outputs_frame({run_id}) computing them (before)", args.repeat,
                           lambda: evalruns.outputs_frame(engine, run_id, tax))  # fmt: skip
        print(f"outputs frame: {before[0] / max(now[0], 1e-9):.1f}x faster (wall)")
    if not args.no_writes and last_case is not None:

        def refresh() -> None:
            with write_session(engine) as s:
                agreed.refresh_agreed(s, [last_case])

        def rebuild() -> None:
            with write_session(engine) as s:
                agreed.rebuild_agreed(s)

        timed(f"refresh one case's row (case {last_case}, a labeling save)", args.repeat, refresh)
        timed("rebuild every row (after a bulk load)", args.repeat, rebuild)
    print(f"stored rows read: {read(agreed.agreed_subquery()):,}; first read {stored[0]:.3f} s")


if __name__ == "__main__":
    main()
