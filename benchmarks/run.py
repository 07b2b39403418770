"""Speed figures for the corpus and case lists at team scale (printed, never asserted).

    .venv/bin/python benchmarks/run.py [--docs 20000] [--cases 50000] [--url sqlite:///...]

Builds a synthetic database (bulk inserts), then times the queries the pages run for their
default views: counts, first and last page, filtered pages, text search, the overview
aggregations and a streaming export.
"""

from __future__ import annotations

import argparse
import io
import random
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sqlalchemy import insert  # noqa: E402

from review.cases import cases  # noqa: E402
from review.core.identity import SYSTEM  # noqa: E402
from review.core.taxonomy import load_taxonomy  # noqa: E402
from review.corpus import corpus  # noqa: E402
from review.monthly.overview import build_overview  # noqa: E402
from storage.db import make_engine, migrate, write_session  # noqa: E402
from storage.models import Case, CaseDocument, CaseSlice, Document, utcnow  # noqa: E402


def build(url: str, n_docs: int, n_cases: int, seed: int = 7) -> None:
    tax = load_taxonomy()
    rng = random.Random(seed)
    engine = make_engine(url)
    migrate(engine)
    now = utcnow()
    scopes = list(tax.access_scopes)
    auth = list(tax.authorities)
    jur = list(tax.jurisdictions)
    body = "# Title\n\n" + "Lorem ipsum dolor sit amet, refund window 14 days. " * 40
    with write_session(engine) as s:
        rows = []
        for i in range(n_docs):
            rows.append(
                dict(
                    doc_key=f"DOC-{i // 2:06d}",
                    version=1 + i % 2,
                    title=f"Document {i} policy",
                    body=body,
                    effective_date=None,
                    superseded_by=None,
                    authority=rng.choice(auth),
                    owner="Ops",
                    access_scope=rng.choice(scopes),
                    jurisdiction=rng.choice(jur),
                    is_current=bool(i % 2),
                    source="bench",
                    sha256="0" * 64,
                    created_at=now,
                    created_by="bench",
                )
            )
        s.execute(insert(Document), rows)
        decisions, cats, splits = list(tax.decisions), list(tax.categories), list(tax.splits)
        slices = list(tax.slices)
        crow, drow, srow = [], [], []
        for i in range(1, n_cases + 1):
            crow.append(
                dict(
                    id=i,
                    key=f"B-{i:06d}",
                    question=f"Question {i} about refunds?",
                    identity_name="customer",
                    identity_scopes=["public"],
                    expected_decision=rng.choice(decisions),
                    reason_codes=[],
                    category=rng.choice(cats),
                    split=rng.choice(splits),
                    status="ready",
                    family_id=None,
                    evidence_state=None,
                    notes="",
                    version=1,
                    created_at=now,
                    created_by="bench",
                    updated_at=now,
                    updated_by="bench",
                )
            )
            for pos in range(3):
                drow.append(
                    dict(
                        case_id=i,
                        document_id=1 + (i * 3 + pos) % n_docs,
                        position=pos,
                        visibility="visible",
                        role="context",
                    )
                )
            if rng.random() < 0.6:
                srow.append(dict(case_id=i, slice=rng.choice(slices)))
        s.execute(insert(Case), crow)
        s.execute(insert(CaseDocument), drow)
        s.execute(insert(CaseSlice), srow)
    engine.dispose()


def timed(label: str, fn: Callable[[], object], repeat: int = 5) -> tuple[str, float]:
    fn()  # warm
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return label, best * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--docs", type=int, default=20000)
    ap.add_argument("--cases", type=int, default=50000)
    ap.add_argument("--url", default=None)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="wb-bench-")
    url = args.url or f"sqlite:///{tmp}/bench.db"
    t0 = time.perf_counter()
    build(url, args.docs, args.cases)
    print(
        f"built {args.docs} document versions and {args.cases} cases in "
        f"{time.perf_counter() - t0:.1f}s ({url})"
    )
    engine = make_engine(url)
    tax = load_taxonomy()
    f_all = corpus.DocFilter()
    last = max(1, corpus.count_documents(engine, SYSTEM, f_all) // 25)
    c_all = cases.CaseFilter()
    c_last = max(1, cases.count_cases(engine, c_all) // 25)
    results = [
        timed(
            "corpus: count current documents", lambda: corpus.count_documents(engine, SYSTEM, f_all)
        ),
        timed("corpus: first page", lambda: corpus.search_documents(engine, SYSTEM, f_all)),
        timed(
            "corpus: last page", lambda: corpus.search_documents(engine, SYSTEM, f_all, page=last)
        ),
        timed(
            "corpus: filter jurisdiction=EU, page 1",
            lambda: corpus.search_documents(engine, SYSTEM, corpus.DocFilter(jurisdiction="EU")),
        ),
        timed(
            "corpus: text search 'policy 1999'",
            lambda: corpus.search_documents(
                engine, SYSTEM, corpus.DocFilter(text="Document 1999 policy")
            ),
        ),
        timed("cases: count all", lambda: cases.count_cases(engine, c_all)),
        timed("cases: first page", lambda: cases.list_cases(engine, c_all)),
        timed("cases: last page", lambda: cases.list_cases(engine, c_all, page=c_last)),
        timed(
            "cases: slice=entity_collision + split=test",
            lambda: cases.list_cases(
                engine, cases.CaseFilter(slice="entity_collision", split="test")
            ),
        ),
        timed(
            "cases: count slice=entity_collision",
            lambda: cases.count_cases(engine, cases.CaseFilter(slice="entity_collision")),
        ),
        timed("overview: all aggregations", lambda: build_overview(engine, SYSTEM, tax)),
        timed("cases: open one case", lambda: cases.get_case(engine, case_id=args.cases // 2)),
    ]
    t1 = time.perf_counter()
    n = cases.export_cases(engine, io.StringIO(), viewer=SYSTEM)
    export_s = time.perf_counter() - t1
    width = max(len(r[0]) for r in results)
    print(f"\n{'query'.ljust(width)}  best of 5 (ms)")
    for label, ms in results:
        print(f"{label.ljust(width)}  {ms:10.1f}")
    print(f"{'cases: export JSONL (streamed)'.ljust(width)}  {n / export_s:10.0f} cases/s")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\npeak resident memory: {peak:.0f} MiB")
    engine.dispose()


if __name__ == "__main__":
    main()
