"""A large Label Studio export through the label import: time, CPU and peak memory (issue 32).

    .venv/bin/python benchmarks/label_import.py [--cases 20000] [--annotators 3]
        [--note-bytes 1500] [--url URL]

Builds ``--cases`` ready cases (SQLite in a temporary directory, or ``--url``), writes a Label
Studio JSON-MIN export in which every annotator labels every case (each note ``--note-bytes``
long, so the defaults make a file of about 100 MB), and imports it twice through the one label
import (``review.labels.imports``, read by ``review.labels.labelstudio.read_export``): the first
run writes every label, the second adds nothing. Printed: the file's size, each run's wall and
CPU time, annotations per second, and the process's peak memory (ru_maxrss) after each step,
beside the file's size, which the import does not hold whole. The reference measured in the
same run is a plain streaming read of the file by the reader alone. Figures are printed, never
asserted.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script from anywhere: the helpers live in tests/

from review.admin import users  # noqa: E402
from review.core import database  # noqa: E402
from review.core.identity import SYSTEM  # noqa: E402
from review.core.taxonomy import load_taxonomy  # noqa: E402
from review.labels import imports, labelstudio, tools  # noqa: E402
from review.labels.external import ExternalLabel, Skipped  # noqa: E402
from storage.db import make_engine, migrate  # noqa: E402
from tests.helpers.labeling import add_cases  # noqa: E402


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _write_export(path: Path, keys: list[str], annotators: int, note_bytes: int) -> int:
    decisions = ["answer", "abstain", "clarify"]
    n = 0
    with path.open("w", encoding="utf-8") as f:
        f.write("[")
        for k, key in enumerate(keys):
            for a in range(annotators):
                decision = decisions[(k + a * (k % 2)) % 3]
                item = {
                    "id": k + 1,
                    "case_key": key,
                    "question": f"Question {k}?",
                    "decision": decision,
                    "note": ("n" * note_bytes),
                    "annotator": a + 1,
                    "annotation_id": n + 1,
                    "created_at": "2026-11-30T09:00:00.000000Z",
                    "updated_at": "2026-11-30T09:00:00.000000Z",
                    "lead_time": 12.5,
                }
                if decision != "answer":  # JSON-MIN writes one picked choice as its text
                    item["reason_codes"] = "no_answer_bearing_evidence"
                f.write(("," if n else "") + "\n" + json.dumps(item))
                n += 1
        f.write("\n]\n")
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", type=int, default=20_000)
    ap.add_argument("--annotators", type=int, default=3)
    ap.add_argument("--note-bytes", type=int, default=1500)
    ap.add_argument("--url", default=None)
    args = ap.parse_args()
    tax = load_taxonomy()
    with tempfile.TemporaryDirectory() as tmp:
        url = args.url or f"sqlite:///{Path(tmp) / 'bench.db'}"
        engine = make_engine(url)
        migrate(engine)
        emails = [f"annotator{a + 1}@bench.example" for a in range(args.annotators)]
        for email in emails:
            users.add_user(engine, SYSTEM, email, email.split("@")[0], ["annotator"], False)
        add_cases(engine, args.cases, tax, "BENCH")
        keys = [f"BENCH-{k:03d}" for k in range(args.cases)]
        path = Path(tmp) / "export-min.json"
        n = _write_export(path, keys, args.annotators, args.note_bytes)
        size = path.stat().st_size
        print(f"file: {size / 2**20:,.1f} MiB, {n:,} annotations, {args.cases:,} cases")
        print(f"peak memory before reading: {_peak_mib():,.0f} MiB")

        w0, c0 = time.perf_counter(), time.process_time()
        with path.open("rb") as fh:
            read = sum(1 for _ in labelstudio.read_export(fh, Skipped()))
        ref_wall, ref_cpu = time.perf_counter() - w0, time.process_time() - c0
        print(
            f"reference, read only: {read:,} annotations in {ref_wall:.1f} s wall, "
            f"{ref_cpu:.1f} s CPU ({read / ref_wall:,.0f}/s); peak {_peak_mib():,.0f} MiB"
        )
        with path.open("rb") as fh:
            sha = tools.sha256_of(fh)
        mapping = {str(a + 1): email for a, email in enumerate(emails)}

        def records(skipped: Skipped) -> Iterator[ExternalLabel]:
            with path.open("rb") as fh:
                yield from labelstudio.read_export(fh, skipped)

        for run in ("first import", "same file again"):
            w0, c0 = time.perf_counter(), time.process_time()
            report = database.write(
                engine,
                lambda s: imports.import_labels(
                    s,
                    SYSTEM,
                    "label-studio",
                    records,
                    mapping,
                    tax,
                    file_name=path.name,
                    sha256=sha,
                ),
            )
            wall, cpu = time.perf_counter() - w0, time.process_time() - c0
            print(
                f"{run}: {report.added:,} added, {report.unchanged:,} unchanged in {wall:.1f} s "
                f"wall, {cpu:.1f} s CPU ({n / wall:,.0f} annotations/s, {wall / ref_wall:.1f}x "
                f"the read alone); peak {_peak_mib():,.0f} MiB"
            )
        engine.dispose()


if __name__ == "__main__":
    main()
