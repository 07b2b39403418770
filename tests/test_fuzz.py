"""Fuzz every importer and policy loader (issue 11, hostile input).

Arbitrary text and bytes, and structured mutations of a valid sample (a dropped key, a value
of the wrong type, huge numbers, NaN and infinities, deep nesting, odd unicode, control
characters, truncated or spliced text) may only end in the project's validation error
(:class:`review.core.errors.InputError`, of which :class:`PolicyFileError` is a kind) with a message
that says where: never another exception.
"""

from __future__ import annotations

import copy
import csv
import io
import itertools
import json
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine

from review.audits import claims, plans
from review.builder import edits
from review.builder import operator as builder_operator
from review.cases import cases
from review.core.errors import InputError, PolicyFileError
from review.core.identity import SYSTEM
from review.core.taxonomy import Taxonomy, load_taxonomy
from review.corpus import corpus, docformat
from review.evaluation import evalruns, execution
from review.policy import policy
from review.traces import formats, importer, monitoring, redaction
from review.wording import messages
from storage.db import make_engine, migrate
from tests.helpers.corpus import GOOD
from tests.helpers.databases import copy_db
from tests.helpers.paths import ROOT
from tests.helpers.transact import write

POLICIES = ROOT / "policies"
TRACE_DATA = ROOT / "tests" / "data" / "traces"
TAX = load_taxonomy(POLICIES / "taxonomy.yaml")

EXAMPLES = int(os.environ.get("WORKBENCH_FUZZ_EXAMPLES", "150"))  # raise it for a deeper run
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
        HealthCheck.data_too_large,
    ],
)

# ---------------------------------------------------------------------------------------
# Strategies

# Raw JSON tokens json.dumps cannot write: numbers Python refuses to convert, infinities,
# nesting deeper than the parser's recursion limit, lone surrogates, NUL.
RAW_JSON = [
    "9" * 5000,
    "-" + "9" * 5000,
    "1" + "0" * 400,
    "1e999",
    "-1e999",
    "1e-999",
    "NaN",
    "Infinity",
    "-Infinity",
    "[" * 5000 + "]" * 5000,
    '{"a":' * 3000 + "1" + "}" * 3000,
    '"\\ud800"',
    '"\\u0000\\u202e\\u001b[31m"',
    '"' + "x" * 60_000 + '"',
]
ODD_TEXT = [
    "",
    " ",
    "\x00",
    "\u202e",
    "\ufeff",
    "\r\n",
    "\x1b[2J",
    "2025-13-45",
    "0000-00-00",
    "-1",
    "0",
    "true",
    "null",
    "1e309",
    "nan",
    "<script>alert(1)</script>",
    "![x](http://evil.example/pixel.png)",
    "javascript:alert(1)",
    "{{placeholder}}",
    "{0.__class__}",
    "%s%n",
    "(a+)+$",
    "[",
    "x" * 10_000,
]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(ODD_TEXT),
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)
# text with every control character and the bidi override likely
hostile_text = st.text(
    alphabet=st.one_of(
        st.characters(codec="utf-8"),
        st.characters(min_codepoint=0, max_codepoint=0x1F),
        st.sampled_from(["\u202e", "\u2028", "\ufeff", "\n", "\r", "-", ":", "{", "}", '"']),
    ),
    max_size=200,
)


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, (*prefix, i))


def _at(obj: Any, path: tuple[Any, ...]) -> Any:
    for p in path:
        obj = obj[p]
    return obj


def mutate(draw: st.DrawFn, sample: Any, raw_tokens: list[str]) -> tuple[Any, dict[str, str]]:
    """Apply one to three structural mutations to a copy of ``sample``. Returns the mutated
    object and the placeholders standing for raw tokens to splice into its serialised text."""
    obj = copy.deepcopy(sample)
    raws: dict[str, str] = {}
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(list(_paths(obj))))
        op = draw(st.sampled_from(["drop", "replace", "raw", "wrap", "add", "empty"]))
        if not path:
            if op == "replace":
                obj = draw(values)
            elif op == "wrap":
                obj = [obj]
            elif op == "add" and isinstance(obj, dict):
                obj[draw(st.text(max_size=10))] = draw(values)
            continue
        parent, key = _at(obj, path[:-1]), path[-1]
        if op == "drop":
            del parent[key]
        elif op == "replace":
            parent[key] = draw(values)
        elif op == "raw":
            token = f"__RAW{len(raws)}__"
            raws[token] = draw(st.sampled_from(raw_tokens))
            parent[key] = token
        elif op == "wrap":
            parent[key] = draw(st.sampled_from([[parent[key]], {"x": parent[key]}]))
        elif op == "empty":
            parent[key] = (
                type(parent[key])() if isinstance(parent[key], list | dict | str) else None
            )
        elif op == "add":
            target = _at(obj, path) if isinstance(_at(obj, path), dict) else parent
            if isinstance(target, dict):
                target[draw(st.text(max_size=10))] = draw(values)
            else:
                target.append(draw(values))
    return obj, raws


@st.composite
def json_mutation(draw: st.DrawFn, sample: Any) -> str:
    obj, raws = mutate(draw, sample, RAW_JSON)
    text = json.dumps(obj, ensure_ascii=draw(st.booleans()))
    for token, raw in raws.items():
        text = text.replace(json.dumps(token), raw)
    return text


RAW_YAML = [
    "9" * 5000,
    ".nan",
    ".inf",
    "-.inf",
    "1e999",
    "[" * 3000 + "]" * 3000,
    "{a: " * 2000 + "1" + "}" * 2000,
    "!!python/object/apply:os.system ['true']",
    "*undefined_alias",
    "&a [*a]",
    "2025-13-45",
    "'\u202e\x07'",
    "!!binary AAAA",
    "!!set {a, b}",
    "!!timestamp 2025-01-01",
    "? [complex, key]",
]


@st.composite
def yaml_mutation(draw: st.DrawFn, sample: Any) -> str:
    obj, raws = mutate(draw, sample, RAW_YAML)
    text = yaml.safe_dump(obj, allow_unicode=draw(st.booleans()), sort_keys=False)
    for token, raw in raws.items():
        text = text.replace(token, raw)
    return text


@st.composite
def text_mutation(draw: st.DrawFn, sample: str) -> str:
    """Delete, duplicate or insert at random places of a valid text."""
    text = sample
    for _ in range(draw(st.integers(1, 3))):
        n = len(text)
        a = draw(st.integers(0, n))
        b = draw(st.integers(a, min(n, a + 200)))
        op = draw(st.sampled_from(["delete", "insert", "duplicate", "truncate"]))
        if op == "delete":
            text = text[:a] + text[b:]
        elif op == "insert":
            text = text[:a] + draw(st.one_of(hostile_text, st.sampled_from(ODD_TEXT))) + text[a:]
        elif op == "duplicate":
            text = text[:b] + text[a:b] + text[b:]
        else:
            text = text[:a]
    return text


def lines_of(path: Path) -> list[str]:
    return [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]


SAMPLE_LINES: dict[str, list[str]] = {}  # filled below; strategies name their sample


@st.composite
def jsonl_input(draw: st.DrawFn, sample: str) -> str:
    """Some valid lines of a sample file with one or two of them mutated."""
    samples = SAMPLE_LINES[sample]
    out = draw(st.lists(st.sampled_from(samples), min_size=1, max_size=3))
    mutated: set[int] = set()
    for _ in range(draw(st.integers(1, 2))):
        i = draw(st.integers(0, len(out) - 1))
        kind = draw(st.sampled_from(["json", "text"]))
        if kind == "json" and i not in mutated:
            out[i] = draw(json_mutation(json.loads(out[i])))
        else:
            out[i] = draw(text_mutation(out[i]))
        mutated.add(i)
    sep = draw(st.sampled_from(["\n", "\r\n", "\n\n"]))
    return sep.join(out)


def any_of(*strategies: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(hostile_text, st.text(max_size=300), *strategies)


# ---------------------------------------------------------------------------------------
# The contract


def only_clear_errors(call: Callable[[], object], needs_line: bool = False) -> None:
    """Run ``call``; it may succeed or raise InputError with a message (naming the line
    when ``needs_line``). Any other exception escapes and fails the test."""
    try:
        call()
        event("accepted")
    except InputError as exc:
        event("refused")
        message = str(exc)
        assert message.strip(), "a validation error must say what is wrong"
        if needs_line:
            assert "line" in message, message


def consume(items: Iterable[object]) -> None:
    for _ in items:
        pass


# ---------------------------------------------------------------------------------------
# Production traces: canonical JSONL, OTLP JSON lines, Langfuse JSONL, CSV

JSONL_FORMATS = ("canonical", "langfuse", "otlp")
SAMPLE_LINES.update(
    canonical=lines_of(TRACE_DATA / "canonical.jsonl"),
    otlp=lines_of(TRACE_DATA / "otlp_openinference.jsonl")
    + lines_of(TRACE_DATA / "otlp_genai.jsonl"),
    langfuse=lines_of(TRACE_DATA / "langfuse.jsonl"),
)


@pytest.mark.parametrize("fmt", JSONL_FORMATS)
@FUZZ
@given(data=st.data())
def test_trace_jsonl_parsers_only_raise_input_errors(fmt: str, data: st.DataObject) -> None:
    text = data.draw(any_of(jsonl_input(fmt)))
    skip_bad = data.draw(st.booleans())
    only_clear_errors(
        lambda: consume(formats.iter_traces(io.StringIO(text), "fuzz.jsonl", fmt, skip_bad)),
        needs_line=True,
    )
    first = next((ln for ln in text.splitlines() if ln.strip()), "")
    only_clear_errors(lambda: formats.detect_format(first, "fuzz.jsonl"))


CSV_ROWS = list(csv.reader(io.StringIO((TRACE_DATA / "flat.csv").read_text(encoding="utf-8"))))


@st.composite
def csv_mutation(draw: st.DrawFn) -> str:
    rows = [list(r) for r in CSV_ROWS[: draw(st.integers(1, len(CSV_ROWS)))]]
    for _ in range(draw(st.integers(1, 3))):
        r = draw(st.integers(0, len(rows) - 1))
        row = rows[r]
        op = draw(st.sampled_from(["cell", "drop", "add", "truncate", "json"]))
        c = draw(st.integers(0, max(0, len(row) - 1)))
        if op == "cell" and row:
            row[c] = draw(st.one_of(hostile_text, st.sampled_from(ODD_TEXT + RAW_JSON)))
        elif op == "drop" and row:
            del row[c]
        elif op == "add":
            row.insert(c, draw(st.text(max_size=20)))
        elif op == "truncate":
            rows[r] = row[:c]
        elif op == "json" and row and row[c].startswith(("[", "{")):
            row[c] = draw(json_mutation(json.loads(row[c])))
    out = io.StringIO()
    csv.writer(out).writerows(rows)
    return out.getvalue()


@FUZZ
@given(data=st.data())
def test_trace_csv_parser_only_raises_input_errors(data: st.DataObject) -> None:
    sample = (TRACE_DATA / "flat.csv").read_text(encoding="utf-8")
    text = data.draw(any_of(csv_mutation(), text_mutation(sample)))
    skip_bad = data.draw(st.booleans())
    only_clear_errors(
        lambda: consume(formats.iter_traces(io.StringIO(text), "fuzz.csv", "csv", skip_bad)),
        needs_line=True,
    )


@pytest.fixture(scope="module")
def trace_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    eng = make_engine(f"sqlite:///{tmp_path_factory.mktemp('fuzz') / 'traces.db'}")
    migrate(eng)
    yield eng
    eng.dispose()


@st.composite
def trace_bytes(draw: st.DrawFn) -> tuple[bytes, str]:
    fmt = draw(st.sampled_from([*JSONL_FORMATS, "csv"]))
    if fmt == "csv":
        text = draw(csv_mutation())
        name = "upload.csv"
    else:
        text = draw(jsonl_input(fmt))
        name = "upload.jsonl"
    data = text.encode("utf-8")
    if draw(st.booleans()):  # splice invalid UTF-8 or raw bytes in
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.binary(min_size=1, max_size=8)) + data[at:]
    return data, name


@settings(FUZZ, max_examples=max(EXAMPLES // 3, 20))
@given(data=st.data())
def test_trace_upload_bytes_only_raise_input_errors(
    trace_engine: Engine, data: st.DataObject
) -> None:
    """The whole upload path: bytes, format detection, decoding, parsing, redaction, storing."""
    payload, name = data.draw(
        st.one_of(st.tuples(st.binary(max_size=400), st.sampled_from(["x.jsonl", "x.csv"])))
        | trace_bytes()
    )
    skip_bad = data.draw(st.booleans())
    with tempfile.TemporaryDirectory() as tmp:
        only_clear_errors(
            lambda: importer.import_bytes(
                trace_engine,
                SYSTEM,
                payload,
                name,
                tax=TAX,
                skip_bad=skip_bad,
                rejects_path=Path(tmp) / "rejects.jsonl",
            )
        )


# ---------------------------------------------------------------------------------------
# Documents (Markdown with front matter, JSONL), cases, evaluation run outputs


def _front_matter(text: str) -> tuple[dict[str, Any], str]:
    _, meta, body = text.split("---\n", 2)
    return yaml.safe_load(meta), body


@st.composite
def markdown_mutation(draw: st.DrawFn) -> str:
    meta, body = _front_matter(GOOD)
    meta_text = draw(yaml_mutation(meta))
    if draw(st.booleans()):
        body = draw(text_mutation(body))
    return f"---\n{meta_text}---\n{body}"


def _doc_record() -> dict[str, Any]:
    meta, body = _front_matter(GOOD)
    return {**meta, "effective_date": str(meta["effective_date"]), "body": body}


SAMPLE_LINES["documents"] = [json.dumps(_doc_record())]


@FUZZ
@given(data=st.data())
def test_document_uploads_only_raise_input_errors(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(["doc.md", "doc.txt", "docs.jsonl", "doc.pdf", "noext"]))
    if name.endswith(".jsonl"):
        text = data.draw(any_of(jsonl_input("documents")))
    else:
        text = data.draw(any_of(markdown_mutation(), text_mutation(GOOD)))
    only_clear_errors(lambda: corpus.parse_upload(name, text, TAX))


@FUZZ
@given(body=st.one_of(hostile_text, st.text(), text_mutation(GOOD)))
def test_document_bodies_always_split_into_blocks(body: str) -> None:
    """The corpus view lays out any body as text blocks; it never fails on one."""
    docformat.parse_blocks(body)
    docformat.outline(body)


SAMPLE_LINES["cases"] = lines_of(ROOT / "review" / "demo" / "cases.jsonl")[:5]


@FUZZ
@given(data=st.data())
def test_case_jsonl_import_only_raises_input_errors(data: st.DataObject) -> None:
    text = data.draw(any_of(jsonl_input("cases")))
    only_clear_errors(
        lambda: consume(cases.iter_cases_jsonl(text.splitlines(), "cases.jsonl", TAX)),
        needs_line=True,
    )


SAMPLE_LINES["run"] = [
    json.dumps(
        {
            "case": "CASE-001",
            "decision": "answer",
            "score": 0.82,
            "text": "Within 14 days [POL-REFUND-MONTHLY@2].",
            "cited_ids": ["POL-REFUND-MONTHLY@2"],
            "repeat": 0,
            "reason_code": None,
            "ranking_mode": "cosine",
            "versions": {"model": "m1"},
        }
    ),
    json.dumps({"case": "CASE-002", "decision": "abstain", "score": "0.1", "repeat": 1}),
    json.dumps({"case": "CASE-003", "error": "timeout"}),
]


@FUZZ
@given(data=st.data())
def test_run_output_import_only_raises_input_errors(data: st.DataObject) -> None:
    text = data.draw(any_of(jsonl_input("run")))
    only_clear_errors(
        lambda: consume(evalruns.iter_outputs(text.splitlines(), "run.jsonl", TAX)),
        needs_line=True,
    )


@pytest.fixture(scope="module")
def demo_engine_m(
    demo_notraces_template: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Engine]:
    eng = make_engine(copy_db(demo_notraces_template, tmp_path_factory.mktemp("fuzz_demo")))
    yield eng
    eng.dispose()


@settings(FUZZ, max_examples=max(EXAMPLES // 3, 20))
@given(data=st.data())
def test_imports_through_the_services_only_raise_input_errors(
    demo_engine_m: Engine, data: st.DataObject
) -> None:
    """Parsed and then stored against the demo database: what parses must also store (or be
    refused with a reason), whatever the numbers and texts are."""
    eng = demo_engine_m
    kind = data.draw(st.sampled_from(["documents", "cases", "run"]))
    text = data.draw(jsonl_input(kind))

    def go() -> None:
        if kind == "documents":
            corpus.import_documents(eng, SYSTEM, corpus.parse_upload("d.jsonl", text, TAX))
        elif kind == "cases":
            items = list(cases.iter_cases_jsonl(text.splitlines(), "cases.jsonl", TAX))
            write(eng, cases.import_cases, SYSTEM, items, "cases.jsonl")
        else:
            outputs = list(evalruns.iter_outputs(text.splitlines(), "run.jsonl", TAX))
            name = f"fuzz {next(_RUN_NAMES)}"
            evalruns.import_run(eng, SYSTEM, name, "v1", outputs, "run.jsonl")

    only_clear_errors(go)


_RUN_NAMES = itertools.count(1)


@FUZZ
@given(data=st.data())
def test_a_pipeline_response_is_either_an_output_or_a_problem(data: st.DataObject) -> None:
    """A bundled or user pipeline's response is checked, never trusted: anything malformed
    comes back as a problem text (stored as an infrastructure failure), not an exception."""
    sample = {
        "decision": "answer",
        "text": "Yes.",
        "citations": ["POL-REFUND@2"],
        "score": 0.7,
        "reason_code": None,
        "ranking_mode": "cosine",
    }
    obj, _ = mutate(data.draw, sample, ["x"])  # type: ignore[arg-type]  # DataObject.draw is a DrawFn
    result = execution.check_response(obj, TAX)
    assert isinstance(result, evalruns.OutputIn | str)


@FUZZ
@given(text=st.one_of(hostile_text, text_mutation("tier=team: 10\nlanguage=de: 5\n# note\n")))
def test_explicit_stratum_sizes_only_raise_input_errors(text: str) -> None:
    only_clear_errors(lambda: plans.parse_explicit_sizes(text), needs_line=True)


@FUZZ
@given(text=st.one_of(hostile_text, st.text(max_size=400)))
def test_answer_text_always_splits_into_claims(text: str) -> None:
    """The audit's claim review splits any answer text (untrusted) without failing."""
    claims.split_claims(text)
    claims.claims_with_citations(text)


# ---------------------------------------------------------------------------------------
# Policy files: taxonomy, no-answer policy, refusal wording, redaction, monitoring


def _load_taxonomy_text(text: str) -> Taxonomy:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "taxonomy.yaml"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        return load_taxonomy(path)


def _policy(text: str) -> None:
    policy.parse_policy(text, "no-answer-policy.yaml", set(TAX.slices))
    policy.canonical_text(text, "no-answer-policy.yaml", set(TAX.slices))


def _redaction(text: str) -> None:
    p = redaction.parse_redaction_policy(text)
    redaction.redact("Call +49 30 1234567 or mail a@b.example; IBAN DE89370400440532013000.", p)


LOADERS: dict[str, Callable[[str], object]] = {
    "taxonomy.yaml": _load_taxonomy_text,
    "no-answer-policy.yaml": _policy,
    "refusal-wording.yaml": lambda t: messages.parse_wording(t),
    "redaction.yaml": _redaction,
    "monitoring.yaml": lambda t: monitoring.parse_monitoring_policy(t),
}


@pytest.mark.parametrize("name", sorted(LOADERS))
def test_policy_samples_load(name: str) -> None:
    """The mutations start from files that load (so what they find is the mutation's)."""
    LOADERS[name]((POLICIES / name).read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", sorted(LOADERS))
@FUZZ
@given(data=st.data())
def test_policy_loaders_only_raise_policy_file_errors(name: str, data: st.DataObject) -> None:
    sample = (POLICIES / name).read_text(encoding="utf-8")
    text = data.draw(any_of(yaml_mutation(yaml.safe_load(sample)), text_mutation(sample)))
    try:
        LOADERS[name](text)
    except PolicyFileError as exc:
        assert str(exc).strip()


@FUZZ
@given(text=st.one_of(hostile_text, st.text(max_size=500)))
def test_redaction_handles_any_text(text: str) -> None:
    p = redaction.load_redaction_policy()
    out, counts = redaction.redact(text, p)
    assert isinstance(out, str) and all(v >= 0 for v in counts.values())


# ---------------------------------------------------------------------------------------
# What the fuzz run found, pinned


def _canonical_line(**changes: Any) -> str:
    record = json.loads(SAMPLE_LINES["canonical"][0])
    record.update(changes)
    return json.dumps(record)


def _parse_traces(text: str) -> None:
    consume(formats.iter_traces(io.StringIO(text), "t.jsonl", "canonical"))


def _parse_docs(text: str) -> None:
    corpus.parse_upload("d.jsonl", text, TAX)


def _parse_cases(text: str) -> None:
    consume(cases.iter_cases_jsonl(text.splitlines(), "c.jsonl", TAX))


def _parse_run(text: str) -> None:
    consume(evalruns.iter_outputs(text.splitlines(), "r.jsonl", TAX))


@pytest.mark.parametrize("parse", [_parse_traces, _parse_docs, _parse_cases, _parse_run])
@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("[" * 5000 + "]" * 5000, "nested too deeply"),
        ('{"a": ' + "9" * 5000 + "}", "a number too long to read"),
    ],
)
def test_json_lines_too_deep_or_too_long_are_refused_with_the_line(
    parse: Callable[[str], None], raw: str, reason: str
) -> None:
    with pytest.raises(InputError, match=rf"line 2: not valid JSON \({reason}\)"):
        parse("\n" + raw)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (_canonical_line(hits_after_filter=10**12), "field hits_after_filter: must be at most"),
        (_canonical_line(top_score=10**400), "field top_score: expected a finite number"),
        (_canonical_line(hits_after_filter="9" * 5000), "a number too long to read"),
    ],
)
def test_trace_numbers_beyond_what_is_stored_are_refused(line: str, message: str) -> None:
    with pytest.raises(InputError, match=rf"line 1: .*{message}"):
        _parse_traces(line)


def test_document_and_run_numbers_beyond_what_is_stored_are_refused() -> None:
    doc = {**_doc_record(), "version": 10**12}
    with pytest.raises(InputError, match="line 1: field version"):
        _parse_docs(json.dumps(doc))
    with pytest.raises(InputError, match="line 1: field repeat"):
        _parse_run(json.dumps({"case": "C", "decision": "answer", "repeat": 10**12}))


@pytest.mark.parametrize(
    "response",
    [
        {"decision": ["answer"]},
        {"decision": "answer", "reason_code": {"x": 1}},
        {"decision": "answer", "ranking_mode": 3},
        {"decision": "answer", "score": 10**400},
    ],
)
def test_malformed_pipeline_responses_are_problems_not_crashes(response: dict[str, Any]) -> None:
    assert str(execution.check_response(response, TAX)).startswith("malformed response")


def _nul_lines() -> list[tuple[Callable[[str], None], str, str]]:
    doc = {**_doc_record(), "body": "text\x00more"}
    case = json.loads(SAMPLE_LINES["cases"][0])
    case["question"] = "why\x00"
    return [
        (_parse_traces, _canonical_line(query="a\x00b"), "field query"),
        (_parse_traces, _canonical_line(attributes={"language": "e\x00n"}), "attributes.language"),
        (_parse_traces, _canonical_line(versions={"model": "m\x00"}), "versions.model"),
        (_parse_docs, json.dumps(doc), "field body"),
        (_parse_cases, json.dumps(case), "field question"),
        (_parse_run, json.dumps({"case": "C", "decision": "answer", "text": "\x00"}), "field text"),
    ]


@pytest.mark.parametrize(("parse", "line", "where"), _nul_lines())
def test_nul_characters_are_refused_with_line_and_field(
    parse: Callable[[str], None], line: str, where: str
) -> None:
    """PostgreSQL's text type cannot hold NUL: refused on import on every database."""
    with pytest.raises(InputError, match=rf"line 1: .*{where}.*NUL character"):
        parse(line)


# ---------------------------------------------------------------------------------------
# Case builder: an operator's parameters and span come from the expert's form


@pytest.mark.parametrize("operator", sorted(edits.OPERATORS))
@settings(FUZZ, max_examples=max(EXAMPLES // 3, 20))
@given(data=st.data())
def test_edit_operators_only_raise_input_errors(operator: str, data: st.DataObject) -> None:
    body = data.draw(st.sampled_from([_front_matter(GOOD)[1], "x", ""]) | hostile_text)
    spots = [
        (i, i + len(w))
        for w in ("14", "14 days", "5 GB", "Monthly", "EU", "Annual", ", except when more")
        if (i := body.find(w)) >= 0
    ]
    start, end = data.draw(
        st.tuples(st.integers(-3, len(body) + 3), st.integers(-3, len(body) + 3))
        | (st.sampled_from(spots) if spots else st.nothing())
    )
    fields = edits.OPERATORS[operator].param_fields()
    names = [f.name for f in fields]
    samples = {"int": 2027, "bool": True, "str": "2027"}
    valid = {
        f.name: f.choices[0] if f.choices else samples.get(f.type.split(" ")[0], "x")
        for f in fields
        if f.required or f.choices
    }
    params = data.draw(
        st.dictionaries(
            (st.sampled_from(names) if names else st.nothing()) | st.text(max_size=8),
            values,
            max_size=4,
        )
        | st.just(valid)
        | st.builds(lambda d: mutate(d.draw, valid, ["x"])[0], st.data())
    )

    def go() -> None:
        span = builder_operator.span_at(
            body, start, end, "position" if start == end else "selection"
        )
        edits.edit_document(body, operator, span, params, doc_id="POL-REFUND", version=2)

    only_clear_errors(go)


# ---------------------------------------------------------------------------------------
# Duplicate keys: json.loads keeps the last value silently; every reader refuses the record


def _twice(line: str, key: str) -> str:
    """``line`` (one JSON object) with ``key`` given a second time at its end."""
    record = json.loads(line)
    return line.rstrip()[:-1] + f", {json.dumps(key)}: {json.dumps(record[key])}}}"


def _duplicate_key_lines() -> list[tuple[str, Callable[[str], object], str, str]]:
    def traces(fmt: str) -> Callable[[str], object]:
        return lambda text: consume(formats.iter_traces(io.StringIO(text), "t.jsonl", fmt))

    return [
        ("documents", _parse_docs, SAMPLE_LINES["documents"][0], "title"),
        ("cases", _parse_cases, SAMPLE_LINES["cases"][0], "question"),
        ("run", _parse_run, SAMPLE_LINES["run"][0], "decision"),
        ("canonical", traces("canonical"), SAMPLE_LINES["canonical"][0], "query"),
        ("otlp", traces("otlp"), SAMPLE_LINES["otlp"][0], "resourceSpans"),
        ("langfuse", traces("langfuse"), SAMPLE_LINES["langfuse"][0], "traceId"),
    ]


@pytest.mark.parametrize(
    ("kind", "parse", "line", "key"), _duplicate_key_lines(), ids=lambda v: str(v)[:10]
)
def test_a_key_given_twice_in_one_object_is_refused_with_line_and_field(
    kind: str, parse: Callable[[str], object], line: str, key: str
) -> None:
    if kind != "otlp":  # (the first OTLP line holds child spans only: its trace ends later)
        parse(line)  # the sample itself is read
    with pytest.raises(InputError, match=rf"line 2: field {key}: appears twice in one JSON"):
        parse("\n" + _twice(line, key))


def test_a_key_given_twice_inside_a_nested_object_or_a_csv_cell_is_refused() -> None:
    nested = (
        _canonical_line().rstrip()[:-1] + ', "attributes": {"language": "en", "language": "de"}}'
    )
    with pytest.raises(InputError, match="line 1: field language: appears twice"):
        _parse_traces(nested)
    chunks = '[{"chunk_id": "a", "chunk_id": "b"}]'
    row = io.StringIO()
    csv.writer(row).writerows(
        [["trace_id", "time", "query", "chunks"], ["t", "2025-01-01", "q", chunks]]
    )
    with pytest.raises(InputError, match=r"line 2: field chunks\.chunk_id: appears twice"):
        consume(formats.iter_traces(io.StringIO(row.getvalue()), "t.csv", "csv"))
    # under skip-bad the record is set aside with the same reason and the rest is read
    items = list(
        formats.iter_traces(
            io.StringIO(nested + "\n" + _canonical_line()), "t.jsonl", "canonical", True
        )
    )
    assert [type(i).__name__ for i in items] == ["Rejected", "ParsedTrace"]
    assert "field language: appears twice" in items[0].reason  # type: ignore[union-attr]


# ---------------------------------------------------------------------------------------
# Sizes: every list and text of a record has a limit, refused with line and field


def _big_trace_lines() -> list[tuple[str, str]]:
    chunk = {"chunk_id": "c", "text": "t"}
    return [
        (
            _canonical_line(chunks=[{**chunk, "chunk_id": f"c{i}"} for i in range(1001)]),
            "field chunks: more than 1,000 chunks",
        ),
        (
            _canonical_line(citations=[{"claim": "x", "chunk_ids": []}] * 501),
            "field citations: more than 500 citations",
        ),
        (_canonical_line(identity_scopes=["public"] * 201), "field identity_scopes: more than 200"),
        (
            _canonical_line(attributes={f"a{i}": 1 for i in range(201)}),
            "field attributes: more than 200 attributes",
        ),
        (_canonical_line(attributes={"a" * 201: 1}), "field attributes: an attribute name is"),
        (
            _canonical_line(attributes={"language": "x" * 10_001}),
            "field attributes.language: longer than 10,000 characters",
        ),
        (
            _canonical_line(versions={"model": "m" * 10_001}),
            "field versions.model: longer than 10,000",
        ),
        (_canonical_line(query="q" * 1_000_001), "field query: longer than 1,000,000"),
    ]


@pytest.mark.parametrize(("line", "message"), _big_trace_lines(), ids=lambda v: str(v)[-30:])
def test_trace_lists_and_texts_beyond_their_limits_are_refused(line: str, message: str) -> None:
    with pytest.raises(InputError, match=rf"t\.jsonl: line 1: {message}"):
        _parse_traces(line)
    items = list(formats.iter_traces(io.StringIO(line), "t.jsonl", "canonical", True))
    assert len(items) == 1 and message.split(": ", 1)[1] in items[0].reason  # type: ignore[union-attr]


def test_a_megabyte_field_name_is_clipped_in_the_message() -> None:
    """An unknown key is named in the error, but not at any length."""
    line = _canonical_line(**{"k" * 1_000_000: 1})
    with pytest.raises(InputError) as info:
        _parse_traces(line)
    assert "unknown field" in str(info.value) and len(str(info.value)) < 400
    doc = {**_doc_record(), "authority": "a" * 1_000_000}
    with pytest.raises(InputError, match="line 1: field authority: String should have at most"):
        _parse_docs(json.dumps(doc))
