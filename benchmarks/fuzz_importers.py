"""Every importer against hostile inputs, timed (printed, never asserted):

    .venv/bin/python benchmarks/fuzz_importers.py [--scale 1.0] [--timeout 60] [--only NAME]

Each importer (documents as Markdown and JSONL, a document body's block view, cases, run
outputs, traces in every format, the no-answer policy and the refusal wording YAML) reads a
set of hostile inputs: deep nesting, huge fields, many keys, keys given twice, long lines,
inputs shaped to make regular expressions backtrack, and "billion laughs" YAML. Each input
runs in a child process (killed after ``--timeout`` seconds) that reports wall time, CPU time
and whether the input was read or refused (with the start of the message).

The reference, measured in the same run, is the same importer reading a valid input of about
the same size (the shipped samples repeated). *Ratio* is CPU time per MB of the hostile input
over CPU time per MB of the reference: near or below 1, the importer reads hostile input as
fast as real input (or refuses it sooner); far above 1, the input found a slow path.
"""

from __future__ import annotations

import argparse
import io
import json
import multiprocessing as mp
import os
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from review.audits import claims  # noqa: E402
from review.builder.edits import OPERATORS  # noqa: E402
from review.cases import cases  # noqa: E402
from review.core.errors import InputError  # noqa: E402
from review.core.taxonomy import load_taxonomy  # noqa: E402
from review.corpus import corpus, docformat  # noqa: E402
from review.evaluation import evalruns  # noqa: E402
from review.policy import policy  # noqa: E402
from review.traces import formats  # noqa: E402
from review.wording import lint, messages  # noqa: E402

__all__ = ["main", "run"]

TAX = load_taxonomy()
TRACE_DATA = ROOT / "tests" / "data" / "traces"
POLICIES = ROOT / "policies"
MB = 2**20


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _lines(path: Path) -> list[str]:
    return [ln for ln in _read(path).splitlines() if ln.strip()]


# ---------------------------------------------------------------------------------------
# The importers, each a function of the input text


def _consume(items: object) -> None:
    for _ in items:  # type: ignore[attr-defined]
        pass


def _traces(fmt: str) -> Callable[[str], None]:
    return lambda text: _consume(formats.iter_traces(io.StringIO(text), f"x.{fmt}", fmt))


def _policy(text: str) -> None:
    policy.parse_policy(text, "no-answer-policy.yaml", set(TAX.slices))


IMPORTERS: dict[str, Callable[[str], None]] = {
    "documents .md": lambda t: _consume(corpus.parse_upload("d.md", t, TAX)),
    "documents .jsonl": lambda t: _consume(corpus.parse_upload("d.jsonl", t, TAX)),
    "document body view": lambda t: _consume(docformat.parse_blocks(t)),
    "case builder candidates": lambda t: _consume(op.candidates(t) for op in OPERATORS.values()),
    "answer claims (audit)": lambda t: _consume(claims.claims_with_citations(t)),
    "wording rules (refusals)": lambda t: _consume(lint.lint(t, key="E1")),
    "cases .jsonl": lambda t: _consume(cases.iter_cases_jsonl(t.splitlines(), "c.jsonl", TAX)),
    "run outputs .jsonl": lambda t: _consume(evalruns.iter_outputs(t.splitlines(), "r", TAX)),
    "traces canonical": _traces("canonical"),
    "traces otlp": _traces("otlp"),
    "traces langfuse": _traces("langfuse"),
    "traces csv": _traces("csv"),
    "no-answer policy YAML": _policy,
    "refusal wording YAML": lambda t: _consume([messages.parse_wording(t)]),
}


# ---------------------------------------------------------------------------------------
# Valid samples (the references) and hostile inputs


def _good_markdown() -> str:
    return _read(ROOT / "review" / "demo" / "docs" / "POL-REFUND-MONTHLY@2.md")


def _doc_record() -> dict[str, object]:
    doc = corpus.parse_upload("d.md", _good_markdown(), TAX)[0]
    return doc.model_dump(mode="json")


SAMPLES: dict[str, list[str]] = {
    "documents .jsonl": [json.dumps(_doc_record())],
    "cases .jsonl": _lines(ROOT / "review" / "demo" / "cases.jsonl"),
    "run outputs .jsonl": [
        json.dumps({"case": "CASE-001", "decision": "answer", "score": 0.8, "text": "Yes."})
    ],
    "traces canonical": _lines(TRACE_DATA / "canonical.jsonl"),
    "traces otlp": _lines(TRACE_DATA / "otlp_genai.jsonl"),  # hex ids: copies can renumber
    "traces langfuse": _lines(TRACE_DATA / "langfuse.jsonl"),
}


def reference(name: str, size: int) -> str:
    """A valid input for ``name`` of about ``size`` characters (at least one record)."""
    if name == "documents .md":
        head, body = _good_markdown().split("\n---\n", 1)
        return head + "\n---\n" + body * max(1, size // len(body))
    if name in ("document body view", "case builder candidates"):
        body = _good_markdown().split("\n---\n", 1)[1]
        return body * max(1, size // len(body))
    if name in ("answer claims (audit)", "wording rules (refusals)"):
        answer = (
            "I can't confirm that from the documents I can see. Refunds of a monthly charge "
            "are possible within 14 days [POL-REFUND-MONTHLY@2]; please ask your admin.\n"
        )
        return answer * max(1, size // len(answer))
    if name == "traces csv":
        header, *rows = _read(TRACE_DATA / "flat.csv").splitlines(keepends=True)
        one = "".join(rows)
        return header + one * max(1, size // len(one))
    if name == "no-answer policy YAML":
        return _read(POLICIES / "no-answer-policy.yaml")
    if name == "refusal wording YAML":
        return _read(POLICIES / "refusal-wording.yaml")
    block = "\n".join(SAMPLES[name]) + "\n"
    copies = range(max(1, size // len(block)))
    if name == "traces otlp":  # each copy its own 32-digit hex trace ids
        return "".join(
            re.sub(r'("traceId": ")[0-9a-f]{6}', rf"\g<1>{i:06x}", block) for i in copies
        )
    if name == "traces langfuse":
        return "".join(
            block.replace('"lf-', f'"lf{i}-').replace('"obs-', f'"o{i}-') for i in copies
        )
    if name.startswith("traces"):
        return "".join(block.replace('"trace_id": "', f'"trace_id": "r{i}-') for i in copies)
    return block * max(1, size // len(block))


def _front(meta: str, body: str = "Body.\n") -> str:
    """A Markdown document whose front matter ends with ``meta``."""
    head = _good_markdown().split("\n---\n", 1)[0]
    return f"{head}\n{meta}\n---\n{body}"


def _laughs(levels: int = 9, fan: int = 9) -> str:
    lines = ["a0: &a0 lol"]
    for i in range(1, levels + 1):
        refs = ", ".join([f"*a{i - 1}"] * fan)
        lines.append(f"a{i}: &a{i} [{refs}]")
    return "\n".join(lines)


def _json_with(sample: str, key: str, raw: str) -> str:
    """``sample`` (one JSON object) with ``key`` set to the raw JSON text ``raw``."""
    record = json.loads(sample)
    record[key] = "__RAW__"
    return json.dumps(record).replace('"__RAW__"', raw)


def hostile(name: str, scale: float) -> dict[str, str]:
    """The hostile inputs for importer ``name`` (label -> text)."""
    n = max(1, int(scale * 1_000_000))
    deep_json = "[" * 100_000 + "]" * 100_000
    many_keys = "{" + ",".join(f'"k{i}": {i}' for i in range(n // 10)) + "}"
    twice = "{" + ",".join('"k": 1' for _ in range(n // 10)) + "}"
    if name == "documents .md":
        return {
            "billion laughs front matter (514 bytes)": _front(_laughs()),
            "deep flow nesting in front matter": _front("x: " + "[" * 50_000 + "]" * 50_000),
            "deep implicit keys in front matter": _front("x: " + "[a: " * 20_000),
            "many keys in front matter": _front("".join(f"k{i}: 1\n" for i in range(n // 10))),
            "huge front-matter value": _front("title: " + "t" * n),
            "sexagesimal float overflow": _front("x: " + ":".join(["1"] * 300) + ".5"),
            "5,000-digit integer": _front("x: " + "9" * 5000),
            "body: space-only line under a pipe row": _front("", "| a |\n" + " " * n + "x\n"),
            "body: 1 MB single line": _front("", "word " * (n // 5)),
            "body: many table rows": _front("", "| a |\n|---|\n" + "| b |\n" * (n // 6)),
            "no closing front-matter line": "---\n" + "title: x\n" * (n // 9),
        }
    if name in ("answer claims (audit)", "wording rules (refusals)"):
        return {
            "run of question marks before a letter": "Why" + "?" * n + "a",
            "many short sentences": "Is it? " * (n // 7),
            "stop then long spaces": "A." + " " * n + "b",
            "many citation brackets": "Yes. " + "[a" * (n // 2),
            "one long word": "x" * n + ". A",
            "abbreviations": "e.g. " * (n // 5),
        }
    if name == "case builder candidates":
        return {
            "exception markers in one sentence": "Refunds apply " + "except " * (n // 7),
            "exception markers, one per paragraph": "A, except B.\n\n" * (n // 14),
            "space-only line under a pipe row": "| a |\n" + " " * n + "x\n",
            "numbers with units": "5 GB " * (n // 5),
            "years": "2025 " * (n // 5),
            "questions": "Is it? " * (n // 7),
        }
    if name == "document body view":
        return {
            "space-only line under a pipe row": "| a |\n" + " " * n + "x\n",
            "separator ending in spaces": "| a |\n|--" + " " * n + "x\n",
            "many pipes": ("|" * 1000 + "\n") * (n // 1000),
            "footnote opener": "[^" * (n // 2),
            "headings": "#" * n,
            "list markers": "- " * (n // 2),
        }
    if name == "no-answer policy YAML" or name == "refusal wording YAML":
        return {
            "billion laughs": _laughs(),
            "deep nesting": "x: " + "[" * 50_000 + "]" * 50_000,
            "deep implicit keys": "x: " + "[a: " * 20_000,
            "many keys": "".join(f"k{i}: 1\n" for i in range(n // 10)),
            "huge value": "x: " + "v" * n,
            "keys given twice": "a: 1\n" * (n // 5),
            "sexagesimal float overflow": "x: " + ":".join(["1"] * 300) + ".5",
            "long text beyond the limit": "# " + "c" * (2 * n) + "\n",
        }
    sample = (SAMPLES.get(name) or [""])[0]
    key = {
        "documents .jsonl": "title",
        "cases .jsonl": "question",
        "run outputs .jsonl": "text",
        "traces canonical": "query",
        "traces otlp": "resourceSpans",
        "traces langfuse": "input",
    }.get(name, "")
    if name == "traces csv":
        header = "trace_id,time,query,chunks\n"
        return {
            "huge quoted cell": header + 't1,2025-06-01,"' + "q" * n + '",\n',
            "deep JSON in a cell": header + 't1,2025-06-01,q,"' + deep_json + '"\n',
            "many columns": ",".join(f"c{i}" for i in range(n // 8)) + "\n",
            "keys given twice in a JSON cell": header
            + 't1,2025-06-01,q,"['
            + twice.replace('"', '""')
            + ']"\n',
            "far-future and year-1 times": header
            + "".join(
                f"t{i},9999-12-31,q,\nu{i},0001-01-01T00:00:00+01:00,q,\n" for i in range(n // 80)
            ),
            "one long line without a newline": "x" * n,
        }
    out = {
        "deep nesting": deep_json,
        "deep nesting in a field": _json_with(
            sample, key, deep_json[:20_000] + deep_json[-20_000:]
        ),
        "huge field": _json_with(sample, key, json.dumps("x" * n)),
        "many keys": many_keys,
        "many keys in a field": _json_with(sample, key, many_keys),
        "a key given many times": twice,
        "many blank and junk lines": "\n" * (n // 2) + "{" * 10,
        "5,000-digit number": _json_with(sample, key, "9" * 5000),
        "NaN and infinities": _json_with(sample, key, "[NaN, Infinity, -Infinity]"),
    }
    if name.startswith("traces"):
        out["far-future and year-1 times"] = "\n".join(
            _json_with(SAMPLES["traces canonical"][0], "time", json.dumps(t))
            for t in ("9999-12-31T23:59:59-01:00", "0001-01-01T00:00:00+01:00") * (n // 4000)
        )
        out["many chunks"] = _json_with(
            SAMPLES["traces canonical"][0],
            "chunks",
            json.dumps([{"chunk_id": f"c{i}"} for i in range(n // 20)]),
        )
    return out


# ---------------------------------------------------------------------------------------
# Timing in a child process


@dataclass(frozen=True)
class Result:
    importer: str
    case: str
    chars: int
    wall_s: float
    cpu_s: float
    outcome: str  # read | refused: ... | crashed: ... | killed after N s


def _child(importer: str, text: str, conn: Connection) -> None:
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        IMPORTERS[importer](text)
        outcome = "read"
    except InputError as exc:
        first = str(exc).splitlines()[0]
        outcome = "refused: " + (first if len(first) <= 90 else first[:87] + "...")
    except Exception as exc:  # a crash is what this benchmark exists to report
        outcome = f"crashed: {type(exc).__name__}: {str(exc)[:80]}"
    conn.send((time.perf_counter() - wall, time.process_time() - cpu, outcome))
    conn.close()


def time_one(importer: str, label: str, text: str, timeout: float) -> Result:
    ctx = mp.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(importer, text, send))
    start = time.perf_counter()
    proc.start()
    send.close()
    if recv.poll(timeout):
        wall, cpu, outcome = recv.recv()
    else:
        wall, cpu, outcome = (
            time.perf_counter() - start,
            float("nan"),
            f"killed after {timeout:g} s",
        )
        proc.kill()
    proc.join()
    return Result(importer, label, len(text), wall, cpu, outcome)


def run(scale: float = 1.0, timeout: float = 60.0, only: str | None = None) -> list[Result]:
    """Time every importer on its reference and its hostile inputs; print and return."""
    results: list[Result] = []
    print(
        f"{'importer':<24} {'input':<42} {'MB':>7} {'wall s':>8} {'CPU s':>8} {'ratio':>8}  outcome"
    )
    for name in IMPORTERS:
        if only and only not in name:
            continue
        cases_ = hostile(name, scale)
        size = max(len(t) for t in cases_.values())
        ref = time_one(name, "reference: valid input", reference(name, min(size, 5 * MB)), timeout)
        ref_rate = ref.cpu_s / max(ref.chars / MB, 1e-6)
        results.append(ref)
        _print(ref, 1.0)
        for label, text in cases_.items():
            r = time_one(name, label, text, timeout)
            results.append(r)
            rate = r.cpu_s / max(r.chars / MB, 1e-6)
            _print(r, rate / ref_rate if ref_rate > 0 else float("nan"))
    return results


def _print(r: Result, ratio: float) -> None:
    print(
        f"{r.importer:<24} {r.case[:42]:<42} {r.chars / MB:>7.2f} {r.wall_s:>8.3f} "
        f"{r.cpu_s:>8.3f} {ratio:>8.2f}  {r.outcome}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--scale", type=float, default=1.0, help="size of the large inputs, in MB")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds before a case is killed")
    ap.add_argument("--only", default=None, help="run only importers whose name contains this")
    args = ap.parse_args()
    print(f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs; scale {args.scale} MB")
    results = run(args.scale, args.timeout, args.only)
    bad = [r for r in results if r.outcome.startswith(("crashed", "killed"))]
    print(f"\n{len(results)} inputs; {len(bad)} crashed or killed")


if __name__ == "__main__":
    main()
