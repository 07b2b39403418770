"""How the Monthly review (and the Audit page) scale with the number of open audit plans.

On a copy of a scale database (``benchmarks/scale.py --keep`` leaves one), opens audit plans
up to each count of ``--open-plans`` (created and drawn as a reviewer would, with some verdicts
recorded, a few of them revised), then times, as a median of ``--runs`` runs, wall and CPU:

- ``hook``: the audit section of the month's record (``review.monthly.report.audit_hook``:
  the weighted estimates of every plan the month shows);
- ``estimates``: ``review.audits.estimates.estimates`` of each of those plans, one by one;
- the Monthly review and Audit pages' default view, opened cold (data caches cleared) through
  the router with AppTest, signed in as ``--user``, with the SQL time and statement count.

Figures are printed, never asserted. The source database is never written: it is copied to
``--copy`` first (unless ``--reuse`` keeps an earlier copy, with its plans).

    PYTHONPATH=. .venv/bin/python benchmarks/monthly_plans.py \\
        --source /work/scale/k100/scale.db --copy /tmp/monthly.db --open-plans 1,5,25
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import random
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from sqlalchemy import Engine, func, select  # noqa: E402

from benchmarks.scale import REVIEWER, SqlTimer  # noqa: E402
from storage.db import make_engine, read_session, run_write  # noqa: E402
from storage.models import AuditItem, SamplingPlan  # noqa: E402

PAGES = (("Monthly review", "pages/review_page.py"), ("Audit", "pages/audit_page.py"))


def _open_plans(engine: Engine) -> int:
    from review.core.terms import PlanStatus

    with read_session(engine) as s:
        return int(
            s.scalar(
                select(func.count())
                .select_from(SamplingPlan)
                .where(SamplingPlan.status == PlanStatus.open)
            )
            or 0
        )


def open_plans(engine: Engine, target: int, sample: int, audited: float, seed: int) -> int:
    """Create and draw plans until ``target`` are open; record verdicts on a share
    ``audited`` of each new plan's items (one in ten of them revised). Returns how many
    were created."""
    from review.admin import users
    from review.audits import plans, verdicts
    from review.audits.population import PopulationFilter
    from review.audits.vocabulary import NEEDS_NOTE, NEEDS_STAGE, VERDICTS

    row = users.get_by_email(engine, REVIEWER)
    assert row is not None
    actor = users.to_actor(row)
    rng = random.Random(seed)
    strata_choices: Sequence[tuple[str, ...]] = (
        ("decision",),
        ("decision", "feedback"),
        ("language",),
        ("decision", "customer_tier"),
    )
    made = 0
    while _open_plans(engine) < target:
        n = _open_plans(engine) + 1
        spec = plans.PlanSpec(
            name=f"Open plan {n} ({dt.datetime.now(dt.UTC):%H:%M:%S.%f})",
            filter=PopulationFilter(),
            strata=strata_choices[n % len(strata_choices)],
            allocation="proportional" if n % 3 else "equal",
            total=sample,
            seed=seed + n,
        )
        plan_id = run_write(engine, partial(plans.create_plan, actor=actor, spec=spec))
        run_write(engine, partial(plans.draw_plan, actor=actor, plan_id=plan_id))
        with read_session(engine) as s:
            ids = list(s.scalars(select(AuditItem.id).where(AuditItem.plan_id == plan_id)))
        for item_id in rng.sample(ids, int(len(ids) * audited)):
            based_on = None
            for _ in range(2 if rng.random() < 0.1 else 1):
                v = rng.choice(list(VERDICTS))
                given = verdicts.VerdictIn(
                    v,
                    stages=("retrieval_missed",) if v in NEEDS_STAGE else (),
                    notes="benchmark verdict" if v in NEEDS_NOTE else "",
                )
                saved = run_write(
                    engine,
                    partial(
                        verdicts.submit_verdict,
                        actor=actor,
                        item_id=item_id,
                        verdict=given,
                        based_on=based_on,
                    ),
                )
                based_on = saved.id
        made += 1
    return made


def timed(fn: Callable[[], Any], runs: int) -> tuple[float, float]:
    """Median wall and CPU seconds of ``runs`` calls."""
    walls, cpus = [], []
    for _ in range(runs):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return statistics.median(walls), statistics.median(cpus)


def shown_plans(engine: Engine, month: str) -> list[int]:
    """The plans the month's audit section covers (as ``report.audit_hook`` picks them)."""
    from review.audits import plans
    from review.core.terms import PlanStatus
    from review.monthly.records import month_bounds

    first, last = month_bounds(month)
    return [
        p.id
        for p in plans.list_plans(engine)
        if first <= p.created_at.date() <= last or p.status != PlanStatus.closed
    ]


def measure(url: str, month: str, runs: int, user: str, timeout: float) -> dict[str, Any]:
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    from review.admin import users
    from review.audits import estimates
    from review.core.taxonomy import load_taxonomy
    from review.monthly import report

    engine = make_engine(url)
    tax = load_taxonomy()
    from review.monthly.records import month_bounds

    first, last = month_bounds(month)
    ids = shown_plans(engine, month)
    out: dict[str, Any] = {"open": _open_plans(engine), "shown": len(ids)}
    out["hook"] = timed(lambda: report.audit_hook(engine, tax, month, first, last), runs)
    out["estimates"] = timed(lambda: [estimates.estimates(engine, i) for i in ids], runs)
    row = users.get_by_email(engine, user)
    assert row is not None
    engine.dispose()
    os.environ["WORKBENCH_DATABASE_URL"] = url
    for name, page in PAGES:
        walls, cpus, sql_s, sql_n, problems = [], [], [], [], []
        for _ in range(runs):
            at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=timeout)
            at.session_state["wb_user_id"] = row.id
            at.run()  # the default page: warms imports, the engine and the router
            st.cache_data.clear()
            sql = SqlTimer()
            w0, c0 = time.perf_counter(), time.process_time()
            with sql:
                at.switch_page(page).run()
            walls.append(time.perf_counter() - w0)
            cpus.append(time.process_time() - c0)
            sql_s.append(sql.total())
            sql_n.append(sql.count())
            problems = [str(e.value)[:200] for e in at.exception]
        out[name] = {
            "wall": statistics.median(walls),
            "cpu": statistics.median(cpus),
            "sql_s": statistics.median(sql_s),
            "sql_n": int(statistics.median(sql_n)),
            "problems": problems,
        }
    return out


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", default="/work/scale/k100/scale.db", help="SQLite scale database")
    ap.add_argument("--copy", default="/tmp/monthly_plans.db", help="where the copy goes")
    ap.add_argument("--reuse", action="store_true", help="keep an existing copy and its plans")
    ap.add_argument("--open-plans", default="1,5,25", help="comma list of open-plan counts")
    ap.add_argument("--sample", type=int, default=400, help="items drawn per plan")
    ap.add_argument("--audited", type=float, default=0.3, help="share of items given verdicts")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--month", default=None, help="the review's month (default: the newest)")
    ap.add_argument("--user", default=REVIEWER)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--page-timeout", type=float, default=300.0)
    return ap.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    copy = Path(args.copy)
    if not (args.reuse and copy.exists()):
        shutil.copyfile(args.source, copy)
    url = f"sqlite:///{copy}"
    engine = make_engine(url)
    from review.monthly import reviews

    sessions = reviews.list_sessions(engine)
    month = args.month or (sessions[0].month if sessions else None)
    if month is None:
        raise SystemExit("the database has no monthly review: open one first")
    print(f"database {copy} (copy of {args.source}); month {month}; user {args.user}")
    print(
        f"{'open':>4} {'shown':>5}  {'hook wall/cpu':>15}  {'estimates wall/cpu':>18}  "
        + "  ".join(f"{name + ' wall/cpu (sql s, n)':>36}" for name, _ in PAGES)
    )
    for target in [int(t) for t in args.open_plans.split(",") if t.strip()]:
        open_plans(engine, target, args.sample, args.audited, args.seed)
        r = measure(url, month, args.runs, args.user, args.page_timeout)
        cells = []
        for name, _ in PAGES:
            p = r[name]
            cells.append(
                f"{p['wall']:6.2f}/{p['cpu']:5.2f} s ({p['sql_s']:5.2f} s, {p['sql_n']:4d})"
                + (f" ERROR {p['problems'][0]}" if p["problems"] else "")
            )
        print(
            f"{r['open']:>4} {r['shown']:>5}  {r['hook'][0]:7.3f}/{r['hook'][1]:6.3f}  "
            f"{r['estimates'][0]:9.3f}/{r['estimates'][1]:7.3f}  "
            + "  ".join(f"{c:>36}" for c in cells),
            flush=True,
        )
    engine.dispose()


if __name__ == "__main__":
    main()
