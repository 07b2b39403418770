"""Turn a public multi-hop QA data set (MuSiQue) into the workbench's import formats.

MuSiQue (Trivedi et al., TACL 2022, CC BY 4.0) gives each question 20 Wikipedia paragraphs,
marks the ones that support the answer and decomposes the question into single-hop steps,
each answered by one supporting paragraph (2 to 4 of them). This script writes, into a folder:

- ``documents.jsonl``: one document per distinct paragraph (its title, then one sentence per
  line), for ``workbench import-docs`` or the Corpus page;
- ``cases.jsonl``: per question an answerable case (required claims from the decomposition
  steps, the supporting paragraphs decisive, the others distractors) and its unanswerable
  variant with only the distractors (same family, evidence removed), for ``workbench
  import-cases`` or the Cases page;
- ``traces.jsonl``: per question a production trace that retrieved the supporting paragraphs
  and answered, and one that retrieved only distractors (most refused, some answered anyway:
  the auditor's finds), for ``workbench import-traces`` or the Traces page.

Usage::

    python tools/public_multisource.py sample musique_train.json examples/public/musique-sample.json
    python tools/public_multisource.py convert examples/public/musique-sample.json OUTDIR

Input is a JSON list or JSONL of MuSiQue records (``id``, ``paragraphs`` with ``idx``,
``title``, ``paragraph_text``, ``is_supporting``; ``question``, ``question_decomposition``
with ``paragraph_support_idx``; ``answer``, ``answer_aliases``, ``answerable``). Everything
derived is deterministic (hashes, never the clock or a random generator), so a re-run writes
the same files and a re-import changes nothing.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import re
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SOURCE = "MuSiQue (CC BY 4.0), https://github.com/StonyBrookNLP/musique"
IDENTITY = {"name": "public-reader", "scopes": ["public"]}
#: the day the first generated trace is logged
TRACE_START = dt.datetime(2026, 10, 5, 8, 0, tzinfo=dt.UTC)
#: a sentence ends at . ! or ? before a capital or digit, except after an initial ("G. Stanley
#: Hall") or a short abbreviation ("c. 1338", "St. Louis", "No. 5")
_SENTENCE_END = re.compile(
    r"(?<![\s(][A-Za-z]\.)(?<!\b[Cc]a\.)(?<!\bSt\.)(?<!\bNo\.)(?<!\bMr\.)(?<!\bDr\.)"
    r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])"
)
_NOT_ID = re.compile(r"[^A-Za-z0-9]+")


class DataError(ValueError):
    """A record the converter cannot read; the message names the record and the field."""


@dataclass(frozen=True)
class Paragraph:
    title: str
    text: str

    @property
    def doc_id(self) -> str:
        """A readable id that stays the same for the same title and text."""
        slug = _NOT_ID.sub("-", self.title).strip("-")[:60] or "untitled"
        digest = hashlib.sha256(f"{self.title}\n{self.text}".encode()).hexdigest()[:8]
        return f"MSQ-{slug}-{digest}"

    def sentences(self) -> list[str]:
        return [s.strip() for s in _SENTENCE_END.split(self.text) if s.strip()]

    def document(self) -> dict[str, Any]:
        body = "\n\n".join(self.sentences()) or self.text
        return {
            "doc_id": self.doc_id,
            "version": 1,
            "title": self.title,
            "effective_date": None,
            "superseded_by": None,
            "authority": "guide",
            "owner": "Wikipedia (via MuSiQue)",
            "access_scope": "public",
            "jurisdiction": "global",
            "body": body,
        }


@dataclass
class Question:
    qid: str
    question: str
    answer: str
    aliases: list[str]
    steps: list[tuple[str, str, int]]  # (question with earlier answers filled in, answer, idx)
    paragraphs: dict[int, Paragraph]
    supporting: list[int] = field(default_factory=list)

    @property
    def decisive(self) -> list[Paragraph]:
        return [self.paragraphs[i] for i in self.supporting]

    @property
    def distractors(self) -> list[Paragraph]:
        return [p for i, p in sorted(self.paragraphs.items()) if i not in self.supporting]


def _need(record: dict[str, Any], name: str, kind: type, where: str) -> Any:
    value = record.get(name)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise DataError(f"{where}: field {name}: expected {kind.__name__}, got {value!r:.80}")
    return value


def parse_record(record: Any, where: str) -> Question:
    """One MuSiQue record as a :class:`Question` (the error names ``where`` and the field)."""
    if not isinstance(record, dict):
        raise DataError(f"{where}: expected a JSON object")
    qid = _need(record, "id", str, where)
    where = f"{where} ({qid})"
    paragraphs: dict[int, Paragraph] = {}
    flagged: set[int] = set()
    for n, p in enumerate(_need(record, "paragraphs", list, where)):
        if not isinstance(p, dict):
            raise DataError(f"{where}: paragraphs[{n}]: expected a JSON object")
        idx = _need(p, "idx", int, f"{where}: paragraphs[{n}]")
        title = _need(p, "title", str, f"{where}: paragraphs[{n}]").strip() or "Untitled"
        text = _need(p, "paragraph_text", str, f"{where}: paragraphs[{n}]").strip()
        if not text:
            raise DataError(f"{where}: paragraphs[{n}]: field paragraph_text: empty")
        paragraphs[idx] = Paragraph(title, text)
        if p.get("is_supporting") is True:
            flagged.add(idx)
    steps: list[tuple[str, str, int]] = []
    answers: list[str] = []
    for n, step in enumerate(_need(record, "question_decomposition", list, where)):
        at = f"{where}: question_decomposition[{n}]"
        if not isinstance(step, dict):
            raise DataError(f"{at}: expected a JSON object")
        idx = _need(step, "paragraph_support_idx", int, at)
        if idx not in paragraphs:
            raise DataError(f"{at}: field paragraph_support_idx: no paragraph {idx}")
        text = _need(step, "question", str, at)
        for k, earlier in enumerate(answers, start=1):
            text = text.replace(f"#{k}", earlier)
        answer = _need(step, "answer", str, at).strip()
        steps.append((" ".join(text.split()), answer, idx))
        answers.append(answer)
    supporting = list(dict.fromkeys(idx for _, _, idx in steps)) or sorted(flagged)
    return Question(
        qid=qid,
        question=_need(record, "question", str, where).strip(),
        answer=str(record.get("answer", "")).strip(),
        aliases=[str(a) for a in record.get("answer_aliases") or []],
        steps=steps,
        paragraphs=paragraphs,
        supporting=supporting,
    )


def read_records(path: Path) -> list[Any]:
    """A JSON list, or JSONL (one record a line)."""
    text = path.read_text(encoding="utf-8")
    if text.lstrip().startswith("["):
        data = json.loads(text)
        if not isinstance(data, list):
            raise DataError(f"{path}: expected a JSON list of records")
        return data
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def read_questions(path: Path) -> list[Question]:
    return [parse_record(r, f"{path}: record {n}") for n, r in enumerate(read_records(path), 1)]


# ---------------------------------------------------------------------------------------
# Cases


def _claim(step_question: str, answer: str) -> str:
    """A hop as a statement: "What company published X: Y." or, for MuSiQue's relation
    steps ("X >> place of birth"), "place of birth of X: Y."."""
    text = step_question.rstrip("?").strip()
    if " >> " in text:
        subject, relation = text.split(" >> ", 1)
        text = f"{relation.strip()} of {subject.strip()}"
        text = text[:1].upper() + text[1:]
    return f"{text}: {answer}."


def _split(qid: str) -> str:
    bucket = int(hashlib.sha256(qid.encode()).hexdigest(), 16) % 10
    return "test" if bucket < 2 else "validation" if bucket < 4 else "train"


def _case_key(qid: str, suffix: str = "") -> str:
    return f"MSQ-{_NOT_ID.sub('-', qid).strip('-')[:100]}{suffix}"


def cases_for(q: Question) -> list[dict[str, Any]]:
    """The answerable case and its distractor-only (unanswerable) variant."""
    family = _case_key(q.qid).replace("MSQ-", "FAM-MSQ-", 1)
    hops = len(q.decisive)
    base = {
        "question": q.question,
        "identity": IDENTITY,
        "family": family,
        "language": "en",
        "split": _split(q.qid),
        "status": "ready",
    }
    aliases = f" (also: {', '.join(q.aliases)})" if q.aliases else ""
    answerable = {
        "key": _case_key(q.qid),
        **base,
        "required_claims": [_claim(sq, a) for sq, a, _ in q.steps],
        "documents": [
            {"doc_id": p.doc_id, "version": 1, "visibility": "visible", "role": "decisive"}
            for p in q.decisive
        ]
        + [
            {"doc_id": p.doc_id, "version": 1, "visibility": "visible", "role": "distractor"}
            for p in q.distractors
        ],
        "expected_decision": "answer",
        "reason_codes": [],
        "category": "in_scope",
        "slices": ["near_neighbour_distractor"],
        "evidence_state": "present",
        "notes": f"{SOURCE}, question {q.qid}: {hops} supporting paragraphs, one per hop. "
        f"Answer: {q.answer}{aliases}.",
    }
    removed = {
        "key": _case_key(q.qid, "-NOSUPPORT"),
        **base,
        "required_claims": answerable["required_claims"],
        "documents": [
            {"doc_id": p.doc_id, "version": 1, "visibility": "visible", "role": "distractor"}
            for p in q.distractors
        ],
        "expected_decision": "abstain",
        "reason_codes": ["no_answer_bearing_evidence"],
        "category": "near_miss",
        "slices": ["near_neighbour_distractor", "compound_insufficiency"],
        "evidence_state": "removed",
        "notes": f"{SOURCE}, question {q.qid} with its {hops} supporting paragraphs left out: "
        "only MuSiQue's distractor paragraphs remain, none of which settles a hop.",
    }
    return [answerable, removed]


# ---------------------------------------------------------------------------------------
# Traces


def _unit(*parts: str) -> float:
    """A number in [0, 1) fixed by ``parts``."""
    digest = hashlib.sha256("\x1f".join(parts).encode()).hexdigest()
    return int(digest[:12], 16) / 16**12


def _chunk(p: Paragraph, rank: int, score: float) -> dict[str, Any]:
    return {
        "chunk_id": f"{p.doc_id}@1#p",
        "doc_id": p.doc_id,
        "doc_version": 1,
        "rank": rank,
        "score": round(score, 3),
        "text": p.text,
        "filtered": False,
        "effective_date": None,
    }


def _versions() -> dict[str, str]:
    return {
        "model": "public-reader-llm@1",
        "embedding": "bge-small-en-v1.5",
        "reranker": "none",
        "prompt": "multihop-answer@3",
        "index": "musique-2026-10",
        "policy": "no-answer-policy@1",
    }


def traces_for(q: Question, n: int, start: dt.datetime = TRACE_START) -> list[dict[str, Any]]:
    """A trace that found the supporting paragraphs, and one that found only distractors."""
    # 16 hours apart: 40 questions cover four weeks, so Monitoring has weeks to compare
    when = start + dt.timedelta(hours=16 * n)
    decisive = [
        _chunk(p, r, 0.9 - 0.05 * r - 0.1 * _unit(q.qid, str(r)))
        for r, p in enumerate(q.decisive, 1)
    ]
    offset = len(decisive)
    near = [
        _chunk(p, offset + r, 0.55 - 0.04 * r - 0.1 * _unit(q.qid, "d", str(r)))
        for r, p in enumerate(q.distractors[:3], 1)
    ]
    found = {
        "trace_id": f"msq-{n:04d}-found",
        "time": when.isoformat().replace("+00:00", "Z"),
        "query": q.question,
        "rewritten_query": q.question.rstrip("?"),
        "user_role": "reader",
        "identity_scopes": ["public"],
        "chunks": decisive + near,
        "context_sent": "\n".join(f"[{c['chunk_id']}] {c['text']}" for c in decisive + near),
        "ranking_mode": "vector",
        "hits_after_filter": len(decisive) + len(near),
        "top_score": decisive[0]["score"] if decisive else None,
        "answerable": True,
        "ambiguous": False,
        "ungrounded": False,
        "topics": [],
        "decision": "answer",
        "reason_code": None,
        "answer_text": f"{q.answer}.",
        "citations": [
            {"claim": _claim(sq, a), "chunk_ids": [f"{q.paragraphs[i].doc_id}@1#p"]}
            for sq, a, i in q.steps
        ],
        "feedback": None,
        "versions": _versions(),
        "attributes": {"language": "en", "document_type": "guide", "dataset": "musique"},
    }
    only = [
        _chunk(p, r, 0.5 - 0.04 * r - 0.15 * _unit(q.qid, "o", str(r)))
        for r, p in enumerate(q.distractors[:5], 1)
    ]
    # one in four distractor-only retrievals is answered anyway: an unsupported answer the
    # reviewers' audit should find (the answer is MuSiQue's, cited to a paragraph lacking it)
    answered = _unit(q.qid, "answered") < 0.25
    missed = {
        **found,
        "trace_id": f"msq-{n:04d}-distractors",
        "time": (when + dt.timedelta(hours=1)).isoformat().replace("+00:00", "Z"),
        "chunks": only,
        "context_sent": "\n".join(f"[{c['chunk_id']}] {c['text']}" for c in only),
        "hits_after_filter": len(only),
        "top_score": only[0]["score"] if only else None,
        "answerable": answered,
        "ungrounded": answered,
        "decision": "answer" if answered else "abstain",
        "reason_code": None if answered else "no_answer_bearing_evidence",
        "answer_text": f"{q.answer}."
        if answered
        else "I could not find this in the sources available to me. "
        "Could you tell me more about what you are looking for?",
        "citations": [{"claim": f"{q.answer}.", "chunk_ids": [only[0]["chunk_id"]]}]
        if answered and only
        else [],
        "feedback": "negative" if answered and _unit(q.qid, "fb") < 0.5 else None,
    }
    return [found, missed]


# ---------------------------------------------------------------------------------------
# Files


@dataclass
class Converted:
    documents: list[dict[str, Any]]
    cases: list[dict[str, Any]]
    traces: list[dict[str, Any]]


def convert(questions: Sequence[Question]) -> Converted:
    docs: dict[str, dict[str, Any]] = {}
    cases: list[dict[str, Any]] = []
    traces: list[dict[str, Any]] = []
    for n, q in enumerate(questions, 1):
        for p in q.paragraphs.values():
            docs.setdefault(p.doc_id, p.document())
        cases.extend(cases_for(q))
        traces.extend(traces_for(q, n))
    return Converted(list(docs.values()), cases, traces)


def _write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> int:
    n = 0
    with path.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")
            n += 1
    return n


def write(converted: Converted, out: Path) -> dict[str, int]:
    out.mkdir(parents=True, exist_ok=True)
    return {
        "documents": _write_jsonl(out / "documents.jsonl", converted.documents),
        "cases": _write_jsonl(out / "cases.jsonl", converted.cases),
        "traces": _write_jsonl(out / "traces.jsonl", converted.traces),
    }


def sample(records: Sequence[Any], questions: int, distractors: int) -> Iterator[Any]:
    """The questions with the most hops first (then the file's order), each keeping its
    supporting paragraphs and its first ``distractors`` others."""
    parsed = [(parse_record(r, f"record {n}"), r) for n, r in enumerate(records, 1)]
    order = sorted(range(len(parsed)), key=lambda i: (-len(parsed[i][0].supporting), i))
    for i in sorted(order[:questions]):
        q, record = parsed[i]
        keep = set(q.supporting)
        others = [p["idx"] for p in record["paragraphs"] if p["idx"] not in keep]
        keep.update(others[:distractors])
        yield {**record, "paragraphs": [p for p in record["paragraphs"] if p["idx"] in keep]}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    conv = sub.add_parser("convert", help="write documents, cases and traces JSONL")
    conv.add_argument("source", type=Path)
    conv.add_argument("out", type=Path)
    samp = sub.add_parser("sample", help="a smaller MuSiQue file: most hops first")
    samp.add_argument("source", type=Path)
    samp.add_argument("out", type=Path)
    samp.add_argument("--questions", type=int, default=40)
    samp.add_argument("--distractors", type=int, default=4)
    args = parser.parse_args(argv)
    try:
        if args.command == "convert":
            counts = write(convert(read_questions(args.source)), args.out)
            print(", ".join(f"{v} {k}" for k, v in counts.items()), f"written to {args.out}")
        else:
            rows = list(sample(read_records(args.source), args.questions, args.distractors))
            args.out.write_text(json.dumps(rows, ensure_ascii=False, indent=0) + "\n", "utf-8")
            print(f"{len(rows)} questions written to {args.out}")
    except (DataError, json.JSONDecodeError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
