"""Production trace parsers: the sample exports, malformed input, grouping and round trips."""

from __future__ import annotations

import base64
import datetime as dt
import io
import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from review.core.errors import InputError
from review.core.taxonomy import Taxonomy
from review.traces.formats import detect_format, iter_traces
from review.traces.formats.canonical import (
    iter_canonical_jsonl,
    trace_from_dict,
    trace_to_dict,
    write_canonical_jsonl,
)
from review.traces.formats.flatcsv import iter_csv
from review.traces.formats.langfuse import iter_langfuse_jsonl
from review.traces.formats.otlp import iter_otlp_jsonl
from review.traces.model import (
    Chunk,
    Citation,
    ParsedTrace,
    Rejected,
    Trace,
    TraceItem,
    TraceVocabulary,
)
from tests.helpers.paths import TRACE_DATA as DATA

UTC = dt.UTC


def read(name: str) -> list[TraceItem]:
    parser = {
        "canonical.jsonl": iter_canonical_jsonl,
        "otlp_openinference.jsonl": iter_otlp_jsonl,
        "otlp_genai.jsonl": iter_otlp_jsonl,
        "langfuse.jsonl": iter_langfuse_jsonl,
        "flat.csv": iter_csv,
    }[name]
    with (DATA / name).open(encoding="utf-8", newline="") as fh:
        return list(parser(fh, name))


def traces(items: Iterable[TraceItem]) -> dict[str, Trace]:
    out: dict[str, Trace] = {}
    for item in items:
        assert isinstance(item, ParsedTrace), item
        out[item.trace.trace_id] = item.trace
    return out


def lines(*records: Any) -> io.StringIO:
    return io.StringIO(
        "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records)
    )


# ---------------------------------------------------------------------------------------
# The sample files


SAMPLES = [
    "canonical.jsonl",
    "otlp_openinference.jsonl",
    "otlp_genai.jsonl",
    "langfuse.jsonl",
    "flat.csv",
]


@pytest.mark.parametrize("name", SAMPLES)
def test_every_sample_file_parses_completely(name: str) -> None:
    items = read(name)
    assert all(isinstance(i, ParsedTrace) for i in items), items
    parsed = traces(items)
    assert 3 <= len(parsed) <= 6
    for t in parsed.values():
        assert t.time.tzinfo is not None and t.time.utcoffset() == dt.timedelta(0)
        assert t.query.strip()
        assert t.decision in {"answer", "abstain", "clarify", "partial", "escalate"}
        assert len({c.chunk_id for c in t.chunks}) == len(t.chunks)


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("canonical.jsonl", "canonical"),
        ("otlp_openinference.jsonl", "otlp"),
        ("otlp_genai.jsonl", "otlp"),
        ("langfuse.jsonl", "langfuse"),
        ("flat.csv", "csv"),
    ],
)
def test_detect_format_recognises_each_sample(name: str, fmt: str) -> None:
    first = (DATA / name).read_text(encoding="utf-8").splitlines()[0]
    assert detect_format(first, name) == fmt
    with (DATA / name).open(encoding="utf-8", newline="") as fh:
        assert traces(iter_traces(fh, name, fmt)) == traces(read(name))


def test_detect_format_refuses_unknown_json() -> None:
    with pytest.raises(InputError, match=r"x\.jsonl: line 1: not a known trace format"):
        detect_format('{"hello": 1}', "x.jsonl")
    with pytest.raises(InputError, match="unknown trace format 'xml'"):
        iter_traces(io.StringIO(""), "f", "xml")


def test_canonical_sample_fields() -> None:
    t = traces(read("canonical.jsonl"))
    first = t["bw-2025-06-03-000184"]
    assert first.time == dt.datetime(2025, 6, 3, 9, 14, 22, 120000, tzinfo=UTC)
    assert first.rewritten_query == "refund window monthly Team plan charge"
    assert first.identity_scopes == ("public",)
    assert first.chunks[0] == Chunk(
        chunk_id="POL-REFUND-MONTHLY@2#2.1",
        doc_id="POL-REFUND-MONTHLY",
        doc_version=2,
        rank=1,
        score=0.83,
        text=first.chunks[0].text,
        filtered=False,
        effective_date=dt.date(2025, 3, 1),
    )
    assert first.citations == (
        Citation(
            "Monthly charges can be refunded within 14 days of the charge date.",
            ("POL-REFUND-MONTHLY@2#2.1",),
        ),
    )
    assert first.versions["policy"] == "no-answer-policy@7"
    assert first.attributes == {
        "language": "en",
        "document_type": "policy",
        "customer_tier": "team",
    }
    # a local time with an offset becomes UTC
    assert t["bw-2025-06-04-000022"].time == dt.datetime(2025, 6, 4, 5, 2, 48, tzinfo=UTC)
    legal = t["bw-2025-06-04-000107"]
    assert legal.decision == "escalate" and legal.reason_code == "restricted_topic"
    assert [c.filtered for c in legal.chunks] == [True, False]
    empty = t["bw-2025-06-05-000003"]
    assert empty.chunks == () and empty.hits_after_filter == 0 and empty.top_score is None


def test_docstring_example_is_a_full_valid_canonical_line() -> None:
    import review.traces.formats as tf

    doc = tf.__doc__ or ""
    block = doc.split("one line)::", 1)[1].split("\n\n", 2)[1]
    line = " ".join(part.strip() for part in block.splitlines())
    data = json.loads(line)
    trace = trace_from_dict(data)
    # every field of the model is shown, so the README example documents the whole schema
    assert set(data) == set(trace_to_dict(trace))
    assert set(data["chunks"][0]) == set(trace_to_dict(trace)["chunks"][0])
    assert trace.chunks[1].filtered is True
    assert trace.decision == "answer" and trace.feedback == "positive"


def test_openinference_sample_interleaved_and_base64_ids() -> None:
    items = read("otlp_openinference.jsonl")
    # each trace is emitted on the line of its root span, in file order
    assert [(i.trace.trace_id, i.line_no) for i in items if isinstance(i, ParsedTrace)] == [
        ("5b8efff798038103d269b633813fc60c", 2),
        ("0af7651916cd43dd8448eb211c80319c", 3),
        ("4bf92f3577b34da6a3ce929d0e0e4736", 4),  # written in base64 in the file
    ]
    t = traces(items)
    refund = t["5b8efff798038103d269b633813fc60c"]
    assert refund.query.startswith("We were charged for the monthly Business plan")
    assert refund.rewritten_query == "refund window monthly plan charge"
    assert refund.time == dt.datetime(2025, 6, 3, 9, 14, 22, tzinfo=UTC)
    assert [(c.chunk_id, c.rank, c.score, c.doc_version) for c in refund.chunks] == [
        ("POL-REFUND-MONTHLY@2#2.1", 1, 0.83, 2),
        ("POL-REFUND-MONTHLY@2#2.3", 2, 0.69, 2),
    ]
    assert refund.chunks[0].effective_date == dt.date(2025, 3, 1)
    assert refund.answer_text.startswith("Yes. You can ask for a refund within 14 days")
    assert len(refund.citations) == 2
    # model and prompt from the LLM span, policy from the resource, the rest from rag.version.*
    assert refund.versions == {
        "model": "gpt-4.1-mini-2025-04-14",
        "prompt": "support-answer@12",
        "policy": "no-answer-policy@7",
        "embedding": "text-embedding-3-large",
        "index": "kb-2025-06-01",
    }
    assert refund.attributes == {"language": "en", "customer_tier": "business"}
    backups = t["0af7651916cd43dd8448eb211c80319c"]
    # numbers written as strings ("0.79", intValue "2") are accepted
    assert backups.top_score == 0.79 and backups.hits_after_filter == 2
    assert backups.chunks[0].score == 0.79
    # no output on the root: the LLM span's output is the answer
    assert backups.answer_text.startswith("Not by default")
    credit = t["4bf92f3577b34da6a3ce929d0e0e4736"]
    # the filtered id was not among the retrieved documents: it is kept, marked filtered
    assert credit.chunks == (Chunk("SLA-ENTERPRISE@2#3", filtered=True),)
    assert credit.decision == "abstain" and credit.feedback == "expected_answer"


def test_genai_sample() -> None:
    t = traces(read("otlp_genai.jsonl"))
    eu = t["6e0c63257de34c92bf9efcd03927272e"]
    assert eu.query == "Where is the data of an EU-region workspace backed up?"
    assert eu.rewritten_query == "EU region backup location"
    assert eu.ranking_mode == "semantic_reranker" and eu.top_score == 3.1
    assert [c.chunk_id for c in eu.chunks] == ["DATA-RESIDENCY-EU@1#3", "DATA-RESIDENCY-UK@1#3.1"]
    assert eu.chunks[0].text.startswith("Customer content, search indexes")
    assert eu.answer_text.startswith("Backups of EU-region workspaces")  # gen_ai.output.messages
    assert eu.versions["model"] == "gpt-4.1-mini-2025-04-14"  # response model wins
    assert eu.versions["embedding"] == "text-embedding-3-large"
    assert eu.versions["index"] == "kb-2025-06-01"
    assert eu.versions["reranker"] == "semantic-ranker-2025"
    assert eu.versions["prompt"] == "support-answer@12"  # from the resource
    team = t["d4cda95b652f4a1592b449d5929fda1b"]
    assert team.chunks[0].score == 2.8 and team.hits_after_filter == 1
    clarify = t["8a3c60f7d188f8fa79d48a391a778fa6"]
    assert clarify.decision == "clarify" and clarify.ambiguous is True
    assert clarify.answer_text.startswith("Which plan is the workspace on?")


def test_langfuse_sample() -> None:
    items = read("langfuse.jsonl")
    assert [(i.trace.trace_id, i.line_no) for i in items if isinstance(i, ParsedTrace)] == [
        ("lf-7f1c9e2a", 1),
        ("lf-8a2d0f3b", 4),
        ("lf-9b3e1a4c", 7),
    ]
    t = traces(items)
    annual = t["lf-7f1c9e2a"]
    assert annual.query.startswith("If we cancel our annual Team plan")
    assert annual.rewritten_query == "annual plan cancellation refund first term"
    # LangChain-style document: id, score and document fields read from its metadata
    assert annual.chunks == (
        Chunk(
            "POL-REFUND-ANNUAL@1#2.1",
            "POL-REFUND-ANNUAL",
            1,
            1,
            0.84,
            annual.chunks[0].text,
            False,
            dt.date(2024, 1, 1),
        ),
    )
    assert annual.versions == {
        "model": "gpt-4.1-mini-2025-04-14",
        "prompt": "support-answer@12",
        "index": "kb-2025-06-01",
        "policy": "no-answer-policy@7",
    }
    assert annual.attributes == {"language": "en", "customer_tier": "team"}
    assert annual.identity_scopes == ("public",)
    assert annual.answer_text.startswith("Yes: cancelling within 30 days")
    indexes = t["lf-8a2d0f3b"]
    assert indexes.rewritten_query == "EU workspace search index location"
    assert [c.score for c in indexes.chunks] == [0.77, 0.62]
    assert indexes.feedback == "positive"  # flat "rag.feedback" metadata key
    discount = t["lf-9b3e1a4c"]
    assert discount.chunks == (Chunk("SALES-DISCOUNT@1#2", filtered=True),)
    assert discount.reason_code == "source_not_allowed"


def test_csv_sample() -> None:
    items = read("flat.csv")
    # the second row has a line break inside a quoted cell: the third record starts on line 5
    assert [i.line_no for i in items] == [2, 3, 5]
    t = traces(items)
    refund = t["csv-0001"]
    assert refund.time == dt.datetime(2025, 6, 7, 10, 0, tzinfo=UTC)  # no offset: UTC
    assert refund.hits_after_filter == 1 and refund.top_score == 0.86
    assert refund.answerable is True and refund.ungrounded is False
    assert refund.versions == {"model": "gpt-4.1-mini-2025-04-14", "policy": "no-answer-policy@7"}
    assert refund.attributes == {"language": "en", "customer_tier": "business"}
    german = t["csv-0002"]
    assert german.identity_scopes == ("public", "internal")
    assert german.answerable is True and german.ambiguous is False  # yes / no
    assert "\n" in german.answer_text
    nothing = t["csv-0003"]
    assert nothing.rewritten_query is None and nothing.top_score is None
    assert nothing.ungrounded is None and nothing.citations == ()


# ---------------------------------------------------------------------------------------
# Canonical JSONL: malformed input


def good_record(**changes: Any) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "trace_id": "t-1",
        "time": "2025-06-03T09:14:22Z",
        "query": "How long is the refund window for monthly plans?",
        "chunks": [{"chunk_id": "POL-REFUND-MONTHLY@2#2.1", "score": 0.8, "text": "14 days"}],
        "decision": "answer",
    }
    rec.update(changes)
    return {k: v for k, v in rec.items() if v is not ...}


CANONICAL_BAD = [
    ('{"trace_id": "t-1", "time": "2025-06-03T09:14:22Z", "query": "How lo', "not valid JSON"),
    ("[1, 2]", "expected a JSON object, got a list"),
    (good_record(trace_id=...), "field trace_id: required field is missing"),
    (good_record(trace_id="  "), "field trace_id: must not be empty"),
    (good_record(query=42), "field query: expected text, got number 42"),
    (good_record(time="yesterday"), "field time: not a valid ISO 8601 time: 'yesterday'"),
    (good_record(decision="maybe"), "field decision: unknown decision 'maybe'"),
    (good_record(reason_code="vibes"), "field reason_code: unknown reason code 'vibes'"),
    (
        good_record(chunks=[{"chunk_id": "c1", "score": "high"}]),
        "field chunks.0.score: expected a number, got text 'high'",
    ),
    (good_record(chunks=[{"chunk_id": "c1", "score": True}]), "field chunks.0.score: expected"),
    (good_record(chunks=[{"score": 0.5}]), "field chunks.0.chunk_id: required field is missing"),
    (
        good_record(chunks=[{"chunk_id": "c1", "rank": 0}]),
        "field chunks.0.rank: must be at least 1",
    ),
    (
        good_record(chunks=[{"chunk_id": "c1", "effective_date": "2025-13-01"}]),
        "field chunks.0.effective_date: not a valid date",
    ),
    (
        good_record(chunks=[{"chunk_id": "c1", "doc": "x"}]),
        "field chunks.0.doc: unknown field",
    ),
    (
        good_record(chunks=[{"chunk_id": "c1"}, {"chunk_id": "c1"}]),
        "field chunks.1.chunk_id: chunk id 'c1' appears twice",
    ),
    (good_record(chunks={"chunk_id": "c1"}), "field chunks: expected a list of chunk objects"),
    (good_record(hits_after_filter=-1), "field hits_after_filter: must be at least 0"),
    (good_record(hits_after_filter=2.5), "field hits_after_filter: expected a whole number"),
    (good_record(answerable="maybe"), "field answerable: expected true or false"),
    (good_record(reason="x"), "field reason: unknown field (put extra facts under attributes)"),
    (
        good_record(citations=[{"claim": "14 days", "chunk_ids": "c1"}]),
        "field citations.0.chunk_ids: expected a list of text",
    ),
    (good_record(citations=[{"chunk_ids": []}]), "field citations.0.claim: required"),
    (good_record(versions={"model": ["a"]}), "field versions.model: expected a version as text"),
    (good_record(attributes={"tier": {"a": 1}}), "field attributes.tier: expected text, a number"),
]


@pytest.mark.parametrize(("record", "message"), CANONICAL_BAD)
def test_canonical_bad_record_names_file_line_and_field(record: Any, message: str) -> None:
    fh = lines(good_record(trace_id="ok-1"), "", record)
    with pytest.raises(InputError) as err:
        list(iter_canonical_jsonl(fh, "prod.jsonl"))
    assert str(err.value).startswith("prod.jsonl: line 3: ")
    assert message in str(err.value)


def test_canonical_nan_score_is_refused() -> None:
    fh = io.StringIO(
        '{"trace_id": "t", "time": "2025-06-03T00:00:00Z", "query": "q", "top_score": NaN}\n'
    )
    with pytest.raises(InputError, match="field top_score: expected a finite number"):
        list(iter_canonical_jsonl(fh, "f"))


def test_canonical_numbers_as_strings_and_defaults() -> None:
    rec = good_record(
        top_score="0.82",
        hits_after_filter="3",
        chunks=[{"chunk_id": "a", "doc_version": "2", "score": "0.82"}, {"chunk_id": "b"}],
        decision="Abstain",
    )
    (item,) = iter_canonical_jsonl(lines(rec), "f")
    assert isinstance(item, ParsedTrace)
    t = item.trace
    assert t.top_score == 0.82 and t.hits_after_filter == 3
    assert t.chunks[0].doc_version == 2 and t.chunks[0].score == 0.82
    assert [c.rank for c in t.chunks] == [1, 2]  # rank defaults to the position
    assert t.decision == "abstain"
    assert t.answer_text == "" and t.citations == () and t.versions == {} and t.feedback is None


@pytest.mark.parametrize(
    ("written", "read"),
    [
        (["legal_dispute"], ("legal_dispute",)),
        ("pricing, legal_dispute", ("pricing", "legal_dispute")),
        ([], ()),  # classified: no topic
        ("[]", ()),
        (None, None),  # not classified: the gate's restricted-topic check fails closed
        ("  ", None),
    ],
)
def test_canonical_topics_keep_not_classified_apart_from_no_topic(
    written: Any, read: tuple[str, ...] | None
) -> None:
    (item,) = iter_canonical_jsonl(lines(good_record(topics=written)), "f")
    assert isinstance(item, ParsedTrace) and item.trace.topics == read
    assert trace_from_dict(trace_to_dict(item.trace)).topics == read


def test_bad_topics_are_refused_naming_the_field() -> None:
    with pytest.raises(InputError, match="field topics: expected a list of topic keys"):
        list(iter_canonical_jsonl(lines(good_record(topics={"a": 1})), "f"))
    with pytest.raises(InputError, match="field topics: more than 50 topics"):
        list(iter_canonical_jsonl(lines(good_record(topics=[f"t{i}" for i in range(51)])), "f"))


def test_otlp_rag_topics() -> None:
    (item,) = otlp(export(root(TA, rag__topics="security_incident")))
    assert isinstance(item, ParsedTrace) and item.trace.topics == ("security_incident",)
    (item,) = otlp(export(root(TA)))
    assert isinstance(item, ParsedTrace) and item.trace.topics is None
    # classified with no topic stays apart from not classified
    (item,) = otlp(export(root(TA, rag__topics="[]")))
    assert isinstance(item, ParsedTrace) and item.trace.topics == ()
    # OpenInference span metadata (JSON text) carries the topics when rag.topics is not set
    meta = json.dumps({"topics": ["legal_dispute"], "user": "u1"})
    (item,) = otlp(export(root(TA, metadata=meta)))
    assert isinstance(item, ParsedTrace) and item.trace.topics == ("legal_dispute",)
    (item,) = otlp(export(root(TA, metadata=json.dumps({"topics": []}))))
    assert isinstance(item, ParsedTrace) and item.trace.topics == ()
    both = otlp(export(root(TA, metadata=meta, rag__topics="pricing")))
    assert isinstance(both[0], ParsedTrace) and both[0].trace.topics == ("pricing",)
    (item,) = otlp(export(root(TA, metadata=json.dumps({"user": "u1"}))))
    assert isinstance(item, ParsedTrace) and item.trace.topics is None
    with pytest.raises(InputError, match="metadata key topics: expected a list of topic keys"):
        otlp(export(root(TA, metadata=json.dumps({"topics": {"a": 1}}))))


def test_interaction_after_the_response_in_every_format() -> None:
    """Note 000's reformulation and citation-interaction signals: true, false or not logged."""
    (item,) = iter_canonical_jsonl(
        lines(good_record(reformulated=True, citation_opened="false")), "f"
    )
    assert isinstance(item, ParsedTrace)
    assert (item.trace.reformulated, item.trace.citation_opened) == (True, False)
    (item,) = iter_canonical_jsonl(lines(good_record()), "f")
    assert isinstance(item, ParsedTrace)
    assert (item.trace.reformulated, item.trace.citation_opened) == (None, None)
    with pytest.raises(InputError, match="field reformulated: expected"):
        list(iter_canonical_jsonl(lines(good_record(reformulated="maybe")), "f"))
    (item,) = otlp(export(root(TA, rag__reformulated=True, rag__citation_opened=False)))
    assert isinstance(item, ParsedTrace)
    assert (item.trace.reformulated, item.trace.citation_opened) == (True, False)


def test_canonical_skip_bad_yields_rejected_with_line_numbers_and_continues() -> None:
    truncated = json.dumps(good_record(trace_id="t-5"))[:40]
    text = "\n".join(
        [
            json.dumps(good_record(trace_id="t-1")),
            json.dumps(good_record(trace_id="t-2", decision="maybe")),
            "",
            json.dumps(good_record(trace_id="t-4")),
            truncated,
        ]
    )
    items = list(iter_canonical_jsonl(io.StringIO(text), "f", skip_bad=True))
    assert [type(i).__name__ for i in items] == [
        "ParsedTrace",
        "Rejected",
        "ParsedTrace",
        "Rejected",
    ]
    assert [i.line_no for i in items] == [1, 2, 4, 5]
    bad = items[1]
    assert isinstance(bad, Rejected)
    assert bad.raw_line == json.dumps(good_record(trace_id="t-2", decision="maybe"))
    assert bad.reason.startswith("field decision: unknown decision 'maybe'")
    assert bad.message("f").startswith("f: line 2: field decision")
    last = items[3]
    assert isinstance(last, Rejected) and last.raw_line == truncated
    assert last.reason.startswith("not valid JSON")


def test_canonical_reader_is_lazy() -> None:
    """Traces come out as lines are read: the parser never reads the whole file first."""
    consumed = 0

    def source() -> Iterator[str]:
        nonlocal consumed
        for i in range(1000):
            consumed += 1
            yield json.dumps(good_record(trace_id=f"t-{i}")) + "\n"

    first = next(iter_canonical_jsonl(source(), "f"))
    assert isinstance(first, ParsedTrace) and first.trace.trace_id == "t-0"
    assert consumed == 1


def test_vocabulary_defaults_match_the_project_taxonomy(tax: Taxonomy) -> None:
    assert TraceVocabulary.from_taxonomy(tax) == TraceVocabulary()


def test_vocabulary_from_a_taxonomy_restricts_decisions() -> None:
    vocab = TraceVocabulary(decisions=frozenset({"answer", "abstain"}))
    with pytest.raises(InputError, match="unknown decision 'escalate'"):
        list(iter_canonical_jsonl(lines(good_record(decision="escalate")), "f", vocab=vocab))


# ---------------------------------------------------------------------------------------
# Round trip


ident = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_@#.", min_size=1, max_size=20)
# any text but NUL, which the parsers refuse (PostgreSQL cannot store it)
free_text = st.text(st.characters(exclude_characters="\x00"), max_size=60).filter(
    lambda s: s.strip() != ""
)
scores = st.floats(allow_nan=False, allow_infinity=False, width=64) | st.none()


@st.composite
def trace_strategy(draw: st.DrawFn) -> Trace:
    ids = draw(st.lists(ident, max_size=5, unique=True))
    chunks = tuple(
        Chunk(
            chunk_id=cid,
            doc_id=draw(st.none() | ident),
            doc_version=draw(st.none() | st.integers(1, 50)),
            rank=i + 1,
            score=draw(scores),
            text=draw(st.text(max_size=80)).strip() and draw(free_text),
            filtered=draw(st.booleans()),
            effective_date=draw(st.none() | st.dates(dt.date(2000, 1, 1), dt.date(2100, 1, 1))),
        )
        for i, cid in enumerate(ids)
    )
    return Trace(
        trace_id=draw(ident),
        time=draw(
            st.datetimes(dt.datetime(2000, 1, 1), dt.datetime(2025, 12, 31), timezones=st.just(UTC))
        ),
        query=draw(free_text),
        rewritten_query=draw(st.none() | free_text),
        user_role=draw(st.none() | ident),
        identity_scopes=tuple(draw(st.lists(ident, max_size=3))),
        chunks=chunks,
        context_sent=draw(st.just("") | free_text),
        ranking_mode=draw(st.sampled_from([None, "cosine", "bm25", "semantic_reranker"])),
        hits_after_filter=draw(st.none() | st.integers(0, 100)),
        top_score=draw(scores),
        answerable=draw(st.none() | st.booleans()),
        ambiguous=draw(st.none() | st.booleans()),
        ungrounded=draw(st.none() | st.booleans()),
        decision=draw(st.none() | st.sampled_from(sorted(TraceVocabulary().decisions))),
        reason_code=draw(st.none() | st.sampled_from(sorted(TraceVocabulary().reason_codes))),
        answer_text=draw(st.just("") | free_text),
        citations=tuple(
            Citation(draw(free_text), tuple(draw(st.lists(st.sampled_from(ids))) if ids else ()))
            for _ in range(draw(st.integers(0, 2)))
        ),
        feedback=draw(st.none() | st.sampled_from(["positive", "answer_wrong", "expected_answer"])),
        reformulated=draw(st.none() | st.booleans()),
        citation_opened=draw(st.none() | st.booleans()),
        versions=draw(st.dictionaries(ident, ident, max_size=3)),
        attributes=draw(
            st.dictionaries(
                ident,
                st.text(st.characters(exclude_characters="\x00"), max_size=10)
                | st.integers(-1000, 1000)
                | st.booleans()
                | st.floats(allow_nan=False, allow_infinity=False),
                max_size=3,
            )
        ),
    )


@settings(max_examples=150, deadline=None)
@given(st.lists(trace_strategy(), min_size=1, max_size=4))
def test_canonical_write_then_read_gives_the_same_traces(ts: list[Trace]) -> None:
    buf = io.StringIO()
    assert write_canonical_jsonl(ts, buf) == len(ts)
    buf.seek(0)
    back = [i.trace for i in iter_canonical_jsonl(buf, "f") if isinstance(i, ParsedTrace)]
    assert back == ts


# ---------------------------------------------------------------------------------------
# OTLP


def _s(v: Any) -> dict[str, Any]:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    return {"stringValue": v}


def span(
    trace_id: str,
    span_id: str,
    parent: str | None = None,
    start: int | str = "1748942062000000000",
    **attrs: Any,
) -> dict[str, Any]:
    return {
        "traceId": trace_id,
        "spanId": span_id,
        "parentSpanId": parent or "",
        "name": "s",
        "startTimeUnixNano": start,
        "attributes": [{"key": k.replace("__", "."), "value": _s(v)} for k, v in attrs.items()],
    }


def export(*spans: dict[str, Any]) -> dict[str, Any]:
    return {"resourceSpans": [{"resource": {}, "scopeSpans": [{"spans": list(spans)}]}]}


TA = "5b8efff798038103d269b633813fc60c"
TB = "0af7651916cd43dd8448eb211c80319c"


def root(tid: str, sid: str = "00f067aa0ba902b7", **attrs: Any) -> dict[str, Any]:
    base = {"rag.query": "Is there an SLA for Team?", "rag.decision": "answer"}
    base.update({k.replace("__", "."): v for k, v in attrs.items()})
    return span(tid, sid, None, **{k.replace(".", "__"): v for k, v in base.items()})


def otlp(*records: Any, skip_bad: bool = False, **kw: Any) -> list[TraceItem]:
    return list(iter_otlp_jsonl(lines(*records), "spans.jsonl", skip_bad, **kw))


def test_otlp_ids_hex_and_base64_normalise_to_the_same_lowercase_hex() -> None:
    b64_trace = base64.b64encode(bytes.fromhex(TA)).decode()
    urlsafe = base64.urlsafe_b64encode(bytes.fromhex(TB)).decode().rstrip("=")
    for written, expected in [
        (TA.upper(), TA),
        (b64_trace, TA),
        (b64_trace.rstrip("="), TA),  # padding may be left out
        (urlsafe, TB),
    ]:
        (item,) = otlp(export(root(written)))
        assert isinstance(item, ParsedTrace) and item.trace.trace_id == expected
    # both spellings in one file are the same trace: the second root comes after it closed
    with pytest.raises(InputError, match="arrives after its trace was closed"):
        otlp(export(root(TA)), export(root(b64_trace)))


def test_otlp_start_time_as_int_or_string() -> None:
    a = otlp(export(span(TA, "00f067aa0ba902b7", None, 1748942062123456789, rag__query="q")))
    b = otlp(export(span(TA, "00f067aa0ba902b7", None, "1748942062123456789", rag__query="q")))
    assert isinstance(a[0], ParsedTrace) and isinstance(b[0], ParsedTrace)
    assert (
        a[0].trace.time == b[0].trace.time == dt.datetime(2025, 6, 3, 9, 14, 22, 123456, tzinfo=UTC)
    )


OTLP_BAD = [
    ('{"resourceSpans": [{"scopeSpans": [', "not valid JSON"),
    ({"resource_spans": []}, "field resourceSpans: missing (not an OTLP/JSON trace export)"),
    (
        export({**root(TA), "traceId": None}),
        "field resourceSpans.0.scopeSpans.0.spans.0.traceId: trace id is missing",
    ),
    (
        export(root("not*base64*at*all")),
        "traceId: 'not*base64*at...' is neither a 32-digit hex nor a base64 trace id",
    ),
    (export(root("AAAA")), "traceId: 'AAAA' decodes to 3 bytes; a trace id has 16"),
    (export(root("0" * 32)), "the trace id is all zeros"),
    (
        export({**root(TA), "spanId": "xyz!"}),
        "spans.0.spanId: 'xyz!' is neither a 16-digit hex nor a base64 span id",
    ),
    (
        export({**root(TA), "startTimeUnixNano": "soon"}),
        "spans.0.startTimeUnixNano: expected a whole number, got text 'soon'",
    ),
    (export({**root(TA), "attributes": {"a": 1}}), "spans.0.attributes: expected a list"),
    (
        export(root(TA, rag__decision="maybe")),
        "spans.0 attribute rag.decision: unknown decision 'maybe'",
    ),
    (
        export(root(TA, rag__top_score="high")),
        "spans.0 attribute rag.top_score: expected a number, got text 'high'",
    ),
    (
        export(root(TA, rag__decison="answer")),
        "spans.0 attribute rag.decison: unknown key in the rag namespace",
    ),
    (
        export(root(TA, rag__citations="[{")),
        "spans.0 attribute rag.citations: not valid JSON",
    ),
    (
        export(
            span(
                TA,
                "b7ad6b7169203331",
                "00f067aa0ba902b7",
                openinference__span__kind="RETRIEVER",
                **{"retrieval__documents__0__document__id": "c1"},
                **{"retrieval__documents__0__document__score": "high"},
            ),
            root(TA),
        ),
        "spans.0 attribute retrieval.documents.0.document.score: expected a number",
    ),
    (
        export(
            span(
                TA,
                "b7ad6b7169203331",
                "00f067aa0ba902b7",
                gen_ai__operation__name="retrieval",
                gen_ai__retrieval__documents='[{"id": "c1", "score": "0,8"}]',
            ),
            root(TA),
        ),
        "attribute gen_ai.retrieval.documents.0.score: expected a number, got text '0,8'",
    ),
    (export(span(TA, "00f067aa0ba902b7")), "field query: no span carries the question"),
]


@pytest.mark.parametrize(("record", "message"), OTLP_BAD)
def test_otlp_bad_input_names_file_line_and_field(record: Any, message: str) -> None:
    with pytest.raises(InputError) as err:
        otlp(export(root(TB)), record)
    assert str(err.value).startswith("spans.jsonl: line 2: ")
    assert message in str(err.value)


def test_otlp_truncated_file() -> None:
    text = (DATA / "otlp_openinference.jsonl").read_text()
    cut = text[: len(text) - 400]  # the last line (trace 3's root) loses its end
    with pytest.raises(InputError, match=r"x: line 4: not valid JSON"):
        list(iter_otlp_jsonl(io.StringIO(cut), "x"))
    items = list(iter_otlp_jsonl(io.StringIO(cut), "x", skip_bad=True))
    assert [(type(i).__name__, i.line_no) for i in items] == [
        ("ParsedTrace", 2),
        ("ParsedTrace", 3),
        ("Rejected", 4),  # the broken line
        ("Rejected", 3),  # trace 3 never got its root: refused, not imported half-done
    ]
    assert "no root span" in items[3].reason  # type: ignore[union-attr]
    rootless = list(iter_otlp_jsonl(io.StringIO(cut), "x", skip_bad=True, accept_rootless=True))
    assert isinstance(rootless[3], ParsedTrace)
    assert rootless[3].trace.query == "enterprise SLA service credit cap"  # retrieval query


def test_otlp_skip_bad_rejects_only_the_bad_trace_of_a_batch() -> None:
    bad_child = span(TA, "b7ad6b7169203331", "00f067aa0ba902b7", rag__hits_after_filter="lots")
    items = otlp(
        export(bad_child, root(TB, sid="53995c3f42cd8ad8")),
        export(span(TA, "c1a2b3c4d5e6f708", "00f067aa0ba902b7", rag__top_score=0.5)),
        export(root(TA)),
        export(root(TB, sid="2f3a9c1d5e7b8a60")),  # TB is closed: a late root is refused
        skip_bad=True,
    )
    assert [(type(i).__name__, i.line_no) for i in items] == [
        ("Rejected", 1),
        ("ParsedTrace", 1),
        ("Rejected", 4),
    ]
    first, second, third = items
    assert isinstance(first, Rejected) and isinstance(second, Rejected | ParsedTrace)
    assert first.reason.startswith(f"trace {TA}: field resourceSpans.0.scopeSpans.0.spans.0")
    assert "rag.hits_after_filter: expected a whole number" in first.reason
    assert isinstance(second, ParsedTrace) and second.trace.trace_id == TB
    assert isinstance(third, Rejected) and "arrives after its trace was closed" in third.reason


def test_otlp_spans_that_disagree_are_refused() -> None:
    with pytest.raises(InputError) as err:
        otlp(
            export(span(TA, "b7ad6b7169203331", "00f067aa0ba902b7", rag__decision="abstain")),
            export(root(TA, rag__decision="answer")),
        )
    assert "disagree: 'abstain' (line 1) and 'answer' (line 2)" in str(err.value)


def test_otlp_spans_in_the_root_line_may_come_after_the_root() -> None:
    child = span(
        TA,
        "b7ad6b7169203331",
        "00f067aa0ba902b7",
        openinference__span__kind="RETRIEVER",
        input__value="sla team",
        retrieval__documents__0__document__id="SLA-TEAM@1#2",
    )
    (item,) = otlp(export(root(TA), child))
    assert isinstance(item, ParsedTrace)
    assert item.trace.rewritten_query == "sla team"
    assert [c.chunk_id for c in item.trace.chunks] == ["SLA-TEAM@1#2"]


def test_otlp_memory_holds_only_open_traces() -> None:
    """A trace is emitted as soon as its root is read, not at the end of the file."""
    consumed = 0
    records = [
        export(span(TA, "b7ad6b7169203331", "00f067aa0ba902b7", rag__top_score=0.5)),
        export(root(TA)),
        export(root(TB)),
    ]

    def source() -> Iterator[str]:
        nonlocal consumed
        for r in records:
            consumed += 1
            yield json.dumps(r) + "\n"

    first = next(iter_otlp_jsonl(source(), "f"))
    assert isinstance(first, ParsedTrace) and first.trace.trace_id == TA
    assert consumed == 2
    with pytest.raises(InputError, match="more than 1 traces are open at once"):
        list(
            iter_otlp_jsonl(
                lines(
                    export(span(TA, "b7ad6b7169203331", "00f067aa0ba902b7")),
                    export(span(TB, "b7ad6b7169203331", "00f067aa0ba902b7")),
                ),
                "f",
                max_open_traces=1,
            )
        )


def _sample_spans() -> list[dict[str, Any]]:
    out = []
    for line in (DATA / "otlp_openinference.jsonl").read_text().splitlines():
        for rs in json.loads(line)["resourceSpans"]:
            res = rs["resource"]["attributes"]
            for ss in rs["scopeSpans"]:
                for sp in ss["spans"]:
                    out.append({**sp, "attributes": res + sp["attributes"]})
    return out


@settings(max_examples=60, deadline=None)
@given(st.randoms(use_true_random=False), st.integers(1, 6))
def test_otlp_any_interleaving_with_roots_last_gives_the_same_traces(rnd: Any, batch: int) -> None:
    spans = _sample_spans()
    children = [s for s in spans if s["parentSpanId"]]
    rnd.shuffle(children)
    order = list(children)
    # spans are exported when they end, so each root goes anywhere after its trace's children
    for r in (s for s in spans if not s["parentSpanId"]):
        own = [i for i, s in enumerate(order) if s["traceId"] == r["traceId"]]
        order.insert(rnd.randint(max(own, default=-1) + 1, len(order)), r)
    records = [export(*order[i : i + batch]) for i in range(0, len(order), batch)]
    assert traces(otlp(*records)) == traces(read("otlp_openinference.jsonl"))


# ---------------------------------------------------------------------------------------
# Langfuse


def obs(oid: str, tid: Any = "lf-1", parent: str | None = None, **kw: Any) -> dict[str, Any]:
    d: dict[str, Any] = {
        "id": oid,
        "traceId": tid,
        "type": "SPAN",
        "name": "support-answer",
        "startTime": "2025-06-06T08:00:00.000Z",
        "endTime": "2025-06-06T08:00:02.000Z",
        "parentObservationId": parent,
        "input": "Is the EU region available on Team?",
        "output": "Not with a residency commitment.",
        "metadata": {"rag": {"decision": "answer"}},
    }
    d.update(kw)
    return d


def langfuse(*records: Any, skip_bad: bool = False) -> list[TraceItem]:
    return list(iter_langfuse_jsonl(lines(*records), "obs.jsonl", skip_bad))


LANGFUSE_BAD = [
    ('{"id": "o1", "traceId": "lf-2", "type": "SPAN", "sta', "not valid JSON"),
    (obs("o1", tid=None), "field traceId: required field is missing"),
    (obs("o1", tid=7.5), "field traceId: expected text, got number 7.5"),
    (obs("o1", type="WIDGET"), "field type: unknown observation type 'WIDGET'"),
    (obs("o1", startTime="tuesday"), "field startTime: not a valid ISO 8601 time"),
    (obs("o1", metadata=["a"]), "field metadata: expected an object, got a list"),
    (
        obs("o1", metadata={"rag": {"decision": "sure"}}),
        "field metadata.rag.decision: unknown decision 'sure'",
    ),
    (
        obs("o2", parent="o1", type="RETRIEVER", output={"docs": []}),
        "field output.documents: expected a list of retrieved documents",
    ),
    (
        obs("o2", parent="o1", type="RETRIEVER", output=[{"id": "c1", "score": "high"}]),
        "field output.0.score: expected a number, got text 'high'",
    ),
    (
        obs("o2", parent="o1", type="RETRIEVER", output=[{"page_content": "x", "metadata": {}}]),
        "field output.0.id: required field is missing",
    ),
]


@pytest.mark.parametrize(("record", "message"), LANGFUSE_BAD)
def test_langfuse_bad_input_names_file_line_and_field(record: Any, message: str) -> None:
    good = obs("g1", tid="lf-0")
    with pytest.raises(InputError) as err:
        langfuse(good, record)
    assert str(err.value).startswith("obs.jsonl: line 2: ")
    assert message in str(err.value)


def test_langfuse_truncated_file_and_skip_bad() -> None:
    text = (DATA / "langfuse.jsonl").read_text()
    cut = text[: len(text) - 60]
    with pytest.raises(InputError, match=r"x: line 8: not valid JSON"):
        list(iter_langfuse_jsonl(io.StringIO(cut), "x"))
    items = list(iter_langfuse_jsonl(io.StringIO(cut), "x", skip_bad=True))
    assert [(type(i).__name__, i.line_no) for i in items] == [
        ("ParsedTrace", 1),
        ("ParsedTrace", 4),
        ("Rejected", 8),
        ("ParsedTrace", 7),  # its retriever observation was lost; the root is still there
    ]


def test_langfuse_bad_observation_rejects_its_whole_trace_once() -> None:
    items = langfuse(
        obs("o1", tid="lf-1"),
        obs("o2", tid="lf-1", parent="o1", type="RETRIEVER", output=[{"id": 3, "score": "x"}]),
        obs("o3", tid="lf-1", parent="o1", type="GENERATION"),
        obs("p1", tid="lf-2", startTime="2025-06-06T09:00:00Z", endTime="2025-06-06T09:00:01Z"),
        skip_bad=True,
    )
    assert [(type(i).__name__, i.line_no) for i in items] == [("Rejected", 2), ("ParsedTrace", 4)]
    assert items[0].reason.startswith("trace lf-1: field output.0.score")  # type: ignore[union-attr]


def test_langfuse_trace_closes_once_a_later_observation_starts_after_the_root_ended() -> None:
    consumed = 0
    records = [
        obs("o1", tid="lf-1"),
        obs("o2", tid="lf-1", parent="o1", type="GENERATION", startTime="2025-06-06T08:00:01Z"),
        obs("p1", tid="lf-2", startTime="2025-06-06T08:00:03Z", endTime="2025-06-06T08:00:04Z"),
        obs("p2", tid="lf-2", parent="p1", startTime="2025-06-06T08:00:03.5Z"),
    ]

    def source() -> Iterator[str]:
        nonlocal consumed
        for r in records:
            consumed += 1
            yield json.dumps(r) + "\n"

    it = iter_langfuse_jsonl(source(), "f")
    first = next(it)
    assert isinstance(first, ParsedTrace) and first.trace.trace_id == "lf-1"
    assert consumed == 3  # emitted before the file ends
    # a straggler for the closed trace is refused rather than imported as a second trace
    late = [*records[:3], obs("o9", tid="lf-1", parent="o1", startTime="2025-06-06T08:00:05Z")]
    with pytest.raises(
        InputError, match=r"line 4: trace lf-1: .* arrives after its trace was closed"
    ):
        list(iter_langfuse_jsonl(lines(*late), "f"))


def test_langfuse_message_lists_and_flat_metadata() -> None:
    items = langfuse(
        obs(
            "o1",
            input=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "SLA?"}],
            output={"role": "assistant", "content": "99.5% for Team."},
            metadata={"rag.decision": "answer", "rag.version.policy": "p@3", "rag.attr.tier": 2},
        )
    )
    (item,) = items
    assert isinstance(item, ParsedTrace)
    assert item.trace.query == "SLA?" and item.trace.answer_text == "99.5% for Team."
    assert item.trace.versions == {"policy": "p@3"} and item.trace.attributes == {"tier": 2}


# ---------------------------------------------------------------------------------------
# CSV

HEADER = "trace_id,time,query,decision,top_score,chunks\n"


def csv_rows(*rows: str, header: str = HEADER) -> io.StringIO:
    return io.StringIO(header + "".join(r + "\n" for r in rows))


CSV_BAD = [
    ("t2,2025-06-03T10:00:00Z,q,maybe,,", "field decision: unknown decision 'maybe'"),
    ("t2,2025-06-03T10:00:00Z,q,answer,high,", "field top_score: expected a number, got text"),
    (",2025-06-03T10:00:00Z,q,answer,,", "field trace_id: required field is missing"),
    ("t2,03/06/2025,q,answer,,", "field time: not a valid ISO 8601 time: '03/06/2025'"),
    ('t2,2025-06-03T10:00:00Z,q,answer,,"[{""chunk_id"": 1"', "field chunks: not valid JSON"),
    (
        't2,2025-06-03T10:00:00Z,q,answer,,"[{""chunk_id"": ""c"", ""score"": ""x""}]"',
        "field chunks.0.score: expected a number",
    ),
    ("t2,2025-06-03T10:00:00Z,q,answer,,,extra", "the row has 7 cells but the header has 6"),
]


@pytest.mark.parametrize(("row", "message"), CSV_BAD)
def test_csv_bad_row_names_file_line_and_field(row: str, message: str) -> None:
    fh = csv_rows("t1,2025-06-03T10:00:00Z,q,answer,0.5,[]", row)
    with pytest.raises(InputError) as err:
        list(iter_csv(fh, "flat.csv"))
    assert str(err.value).startswith("flat.csv: line 3: ")
    assert message in str(err.value)


@pytest.mark.parametrize(
    ("header", "message"),
    [
        ("trace_id,time,query,verdict\n", "line 1: field column 'verdict': unknown column"),
        ("trace_id,time,decision\n", "line 1: field column 'query': required column is missing"),
        ("trace_id,time,query,query\n", "line 1: field column 'query': appears twice"),
        ("", "line 1: the file is empty"),
    ],
)
def test_csv_bad_header_always_raises(header: str, message: str) -> None:
    with pytest.raises(InputError, match=re.escape(message)):
        list(iter_csv(io.StringIO(header), "flat.csv", skip_bad=True))


def test_csv_truncated_file_and_skip_bad() -> None:
    text = (DATA / "flat.csv").read_text(encoding="utf-8")
    cut = text[: text.index("Die Gutschrift")]  # ends inside a quoted cell
    with pytest.raises(InputError, match=r"f: line 3: not valid CSV"):
        list(iter_csv(io.StringIO(cut, newline=""), "f"))
    fh = csv_rows(
        "t1,2025-06-03T10:00:00Z,q,answer,0.5,[]",
        "t2,2025-06-03T10:00:00Z,q,maybe,,",
        "",
        't3,2025-06-03T10:00:00Z,"a question',
    )
    items = list(iter_csv(fh, "f", skip_bad=True))
    assert [(type(i).__name__, i.line_no) for i in items] == [
        ("ParsedTrace", 2),
        ("Rejected", 3),
        ("Rejected", 5),
    ]
    assert isinstance(items[1], Rejected)
    assert items[1].raw_line == "t2,2025-06-03T10:00:00Z,q,maybe,,"
