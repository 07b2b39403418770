"""A real public multi-hop data set through the live paths, end to end (issue 31).

Two HotpotQA dev questions (distractor setting; records 5a8b57f25542995d1e6f1371 and
5a8c7595554299585d9e36b6, CC BY-SA 4.0, in tests/live/data/hotpotqa_dev_slice.json: the
first with all ten Wikipedia paragraphs, the second with three) are answered as a two-hop RAG
pipeline logs them with OpenInference: a root CHAIN span, a RETRIEVER span per hop (the
second hop's query names the bridge entity the first found) and an LLM span. The REAL
OpenTelemetry SDK exports every span both to the workbench's OTLP receiver and to a REAL
Phoenix, as a collector fanning out would. The receiver imports each trace whole: every
paragraph of both hops as a chunk, once, with its document, score and text, the question
and answer; the Phoenix sync then finds those traces stored and records their root spans;
an audit batch judges them (one note quoting the restricted paragraph); the push puts the
verdicts on the root spans in Phoenix, with the restricted words kept home."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from sqlalchemy import Engine, select

from review.audits import pushback
from review.audits.items import ClaimDraft
from review.audits.verdicts import VerdictIn
from review.core import clearance
from review.core.identity import SYSTEM
from review.traces import browse
from review.traces.live import phoenix as phoenix_sync_module
from review.traces.live import sources, staging
from review.traces.live.receiver import Receiver, ReceiverConfig
from storage.db import read_session
from storage.models import SourceSpan, TraceSource
from tests.helpers.actors import REVIEWER, make_actor
from tests.helpers.pushing import closed_batch, phoenix_annotations
from tests.helpers.traces import add_document
from tests.live.phoenix_server import (
    PHOENIX_GROUP,
    PhoenixServer,
    phoenix,  # noqa: F401  (the module-scoped fixture)
    wait_for_spans,
)

pytestmark = [pytest.mark.timeout(1800), PHOENIX_GROUP]

DATA = Path(__file__).parent / "data" / "hotpotqa_dev_slice.json"
PROJECT = "hotpotqa"
ADMIN = make_actor("admin", "admin@test.example", clearance=True, uid=41)
#: the distractor paragraph made restricted in the corpus (its trace becomes restricted)
SECRET_TITLE = "Janet Waldo"


def records() -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = json.loads(DATA.read_text(encoding="utf-8"))
    return data


def doc_key(title: str) -> str:
    return "WIKI-" + re.sub(r"[^A-Za-z0-9]+", "-", title).strip("-").upper()


def paragraph(sentences: list[str]) -> str:
    return "".join(sentences).strip()


def hops(rec: dict[str, Any]) -> list[tuple[str, list[tuple[str, str]]]]:
    """(query, [(title, text)]) of each hop: the first retrieves the first gold paragraph
    and half the distractors, the second (its query naming the gold title the first found)
    the rest."""
    gold = list(dict.fromkeys(t for t, _ in rec["supporting_facts"]))
    paras = [(t, paragraph(s)) for t, s in rec["context"]]
    first = [p for p in paras if p[0] == gold[0]]
    rest = [p for p in paras if p[0] != gold[0]]
    half = len(rest) // 2
    second_gold = [p for p in rest if p[0] in gold]
    others = [p for p in rest if p[0] not in gold]
    return [
        (rec["question"], first + others[:half]),
        (f"{rec['question']} ({gold[0]})", second_gold + others[half:]),
    ]


def send(endpoints: list[str], recs: list[dict[str, Any]]) -> list[str]:
    provider = TracerProvider(
        resource=Resource.create(
            {"service.name": "hotpot-rag", "openinference.project.name": PROJECT}
        )
    )
    for url in endpoints:
        provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=url, timeout=60)))
    tracer = provider.get_tracer("hotpot-live-test")
    ids = []
    try:
        for rec in recs:
            with tracer.start_as_current_span("rag-request") as root:
                root.set_attribute("openinference.span.kind", "CHAIN")
                root.set_attribute("input.value", rec["question"])
                rank = 0
                for h, (query, docs) in enumerate(hops(rec)):
                    with tracer.start_as_current_span(f"retrieve-hop-{h + 1}") as r:
                        r.set_attribute("openinference.span.kind", "RETRIEVER")
                        r.set_attribute("input.value", query)
                        for n, (title, text) in enumerate(docs):
                            rank += 1
                            p = f"retrieval.documents.{n}.document"
                            r.set_attribute(f"{p}.id", f"{doc_key(title)}@1#p0")
                            r.set_attribute(f"{p}.score", round(1.0 - rank / 20, 3))
                            r.set_attribute(f"{p}.content", text)
                            r.set_attribute(
                                f"{p}.metadata",
                                json.dumps({"doc_id": doc_key(title), "doc_version": 1}),
                            )
                with tracer.start_as_current_span("generate") as g:
                    g.set_attribute("openinference.span.kind", "LLM")
                    g.set_attribute("llm.model_name", "reader-test")
                    g.set_attribute("output.value", rec["answer"])
                root.set_attribute("output.value", rec["answer"])
                root.set_attribute("rag.decision", "answer")
                ids.append(f"{root.get_span_context().trace_id:032x}")
        provider.force_flush(timeout_millis=120_000)
    finally:
        provider.shutdown()
    return ids


@pytest.fixture
def receiver(engine: Engine) -> Iterator[tuple[int, str]]:
    src = sources.add_source(engine, SYSTEM, kind="otlp", name="hotpot-receiver")
    r = Receiver(engine, SYSTEM, int(src.id), ReceiverConfig(port=0, assemble_every=None))
    port = r.start()
    yield int(src.id), f"http://127.0.0.1:{port}/v1/traces"
    r.stop()


def test_hotpotqa_multi_hop_traces_arrive_whole_and_their_verdicts_reach_phoenix(
    engine: Engine,
    receiver: tuple[int, str],
    phoenix: PhoenixServer,  # noqa: F811
) -> None:
    recs = records()
    for rec in recs:
        for title, sentences in rec["context"]:
            scope = "restricted" if title == SECRET_TITLE else "public"
            add_document(
                engine, doc_key(title), title=title, scope=scope, body=paragraph(sentences)
            )
    receiver_id, receiver_url = receiver
    sent = send([receiver_url, phoenix.traces_url], recs)
    spans_per_trace = 1 + 2 + 1
    wait_for_spans(phoenix.base_url, PROJECT, spans_per_trace * len(recs))

    # the receiver: every trace whole, both hops' paragraphs, the mapping right
    done = staging.assemble(engine, SYSTEM, receiver_id, grace_seconds=0)
    assert (done.imported, done.rejected, done.waiting_spans) == (len(recs), 0, 0), done
    for rec, tid in zip(recs, sent, strict=True):
        v = browse.get_trace(engine, ADMIN, trace_id=tid)
        assert v is not None
        assert (v.query, v.answer_text, v.decision) == (rec["question"], rec["answer"], "answer")
        want = [(f"{doc_key(t)}@1#p0", doc_key(t), t2) for _, docs in hops(rec) for t, t2 in docs]
        got = [(c.chunk_id, c.doc_id, c.text) for c in v.chunks]
        assert sorted(got) == sorted(want), "every paragraph of both hops, once"
        assert len(got) == len(rec["context"])
        gold = {doc_key(t) for t, _ in rec["supporting_facts"]}
        assert gold <= {c.doc_id for c in v.chunks}, "both gold paragraphs (multi-hop)"
        assert v.versions.get("model") == "reader-test"
        ranks = [c.rank or 0 for c in v.chunks]
        assert ranks == sorted(ranks) and 0 not in ranks
    restricted_tid = sent[1]  # the Kiss and Tell question retrieved the restricted paragraph
    assert browse.get_trace(engine, ADMIN, trace_id=restricted_tid).restricted  # type: ignore[union-attr]

    # Phoenix: the same traces, synced; they are stored already, their root spans recorded
    src = sources.add_source(
        engine, ADMIN, kind="phoenix", name="hotpot-phoenix", url=phoenix.base_url, project=PROJECT
    )
    synced = phoenix_sync(engine, src.id)
    assert synced.error is None and synced.imported == 0 and synced.rejected == 0, synced
    with read_session(engine) as s:
        roots = {
            str(t): str(sp)
            for t, sp in s.execute(
                select(SourceSpan.trace_id, SourceSpan.span_id)
                .join(TraceSource, TraceSource.id == SourceSpan.source_id)
                .where(SourceSpan.parent_id.is_(None), TraceSource.name == "hotpot-phoenix")
            )
        }
    assert set(roots) == set(sent)

    # audited and pushed
    quoting = VerdictIn(
        "unsupported_answer",
        stages=("retrieval_missed",),
        notes="The answer leaned on: best known in animation for voicing Judy Jetson.",
        claims=(ClaimDraft(f"The answer is {recs[0]['answer']}.", (), "unsupported"),),
    )
    plain = VerdictIn("unsupported_answer", stages=("retrieval_missed",), notes="Second hop ok.")
    pid = closed_batch(engine, [REVIEWER], [quoting, plain])
    report = pushback.push_to_phoenix(engine, REVIEWER, plan_id=pid)
    assert report.ok and report.not_pushable == 0 and report.pushed > 0, report.summary()
    held = phoenix_annotations(phoenix.base_url, PROJECT, sorted(roots.values()))
    verdicts = {a["span_id"]: a for a in held if a["name"] == "workbench.verdict"}
    assert set(verdicts) == set(roots.values())
    with read_session(engine) as s:
        secret_runs = clearance.restricted_runs(s)
    for a in held:
        assert a["identifier"] == REVIEWER.email and a["annotator_kind"] == "HUMAN"
        shown = json.dumps([a["result"], a["metadata"]])
        assert not clearance.word_runs(shown) & secret_runs, a
    assert verdicts[roots[restricted_tid]]["result"]["explanation"] == clearance.REDACTED


def phoenix_sync(engine: Engine, source_id: int) -> phoenix_sync_module.SyncReport:
    return phoenix_sync_module.sync_phoenix(
        engine, ADMIN, source_id, grace_seconds=0, overlap_seconds=0
    )
