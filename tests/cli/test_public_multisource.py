"""The public multi-source sample (MuSiQue) through the converter and the real imports."""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from review.cli.main import main
from tests.helpers.paths import ROOT
from tools import public_multisource as pm

SAMPLE = ROOT / "examples" / "public" / "musique-sample.json"


@pytest.fixture
def converted(tmp_path: Path) -> Path:
    out = tmp_path / "msq"
    assert pm.main(["convert", str(SAMPLE), str(out)]) == 0
    return out


def _run(args: list[str]) -> str:
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    return r.output


def test_sample_is_small_and_names_its_source_and_licence() -> None:
    assert SAMPLE.stat().st_size <= 300_000
    readme = (SAMPLE.parent / "README.md").read_text(encoding="utf-8")
    assert "CC BY 4.0" in readme and "https://github.com/StonyBrookNLP/musique" in readme


def test_sample_imports_through_the_cli_with_its_decisive_documents(
    converted: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKBENCH_DATABASE_URL", f"sqlite:///{tmp_path / 'msq.db'}")
    _run(["migrate"])
    _run(["add-user", "ada@example.org", "--name", "Ada", "--role", "admin", "--clearance"])
    questions = pm.read_questions(SAMPLE)
    assert len(questions) == 40

    # traces first: every paragraph they cite is unknown to the empty corpus, and the import
    # says so with the ids and the way forward
    r = CliRunner().invoke(main, ["import-traces", str(converted / "traces.jsonl")])
    assert r.exit_code == 0, r.output
    assert "80 traces" in r.output or "80 added" in r.output, r.output
    assert "never seen" in r.output and "MSQ-" in r.output, r.output

    # cases before documents are refused, naming a missing document; nothing is written
    r = CliRunner().invoke(main, ["import-cases", str(converted / "cases.jsonl")])
    assert r.exit_code == 1 and "MSQ-" in r.output, r.output

    out = _run(["import-docs", str(converted / "documents.jsonl")])
    assert "275 document versions added" in out, out
    out = _run(["import-cases", str(converted / "cases.jsonl")])
    assert "80 cases added" in out, out

    exported = tmp_path / "export.jsonl"
    _run(["export-cases", str(exported)])
    cases = {c["key"]: c for c in map(json.loads, exported.read_text().splitlines())}
    assert len(cases) == 80
    for q in questions:
        key = f"MSQ-{q.qid.replace('__', '-').replace('_', '-')}"
        case = cases[key]
        decisive = [d["doc_id"] for d in case["documents"] if d["role"] == "decisive"]
        assert decisive == [p.doc_id for p in q.decisive]
        assert len(case["required_claims"]) == len(q.steps)
        assert case["expected_decision"] == "answer"
        removed = cases[f"{key}-NOSUPPORT"]
        assert removed["family"] == case["family"]
        assert removed["expected_decision"] == "abstain"
        assert not [d for d in removed["documents"] if d["role"] == "decisive"]
        assert not set(decisive) & {d["doc_id"] for d in removed["documents"]}
    per_case = Counter(
        sum(d["role"] == "decisive" for d in c["documents"])
        for c in cases.values()
        if c["expected_decision"] == "answer"
    )
    assert per_case == {2: 8, 3: 27, 4: 5}

    # the same files again change nothing
    assert "275 already present unchanged" in _run(
        ["import-docs", str(converted / "documents.jsonl")]
    )


def test_a_broken_record_is_named_with_its_field(tmp_path: Path) -> None:
    record = json.loads(SAMPLE.read_text(encoding="utf-8"))[0]
    record["question_decomposition"][1]["paragraph_support_idx"] = 99
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(record) + "\n", encoding="utf-8")
    with pytest.raises(
        pm.DataError, match=r"record 1 .*question_decomposition\[1\].*no paragraph 99"
    ):
        pm.read_questions(bad)
    assert pm.main(["convert", str(bad), str(tmp_path / "out")]) == 1


def test_the_traces_can_be_replayed_and_span_four_weeks(converted: Path) -> None:
    """Every generated trace logs what the shipped policy's gate needs (the Thresholds page
    replays a proposal on them), and they spread over four weeks (Monitoring compares weeks)."""
    from review.policy.policy import load_policy
    from review.thresholds.redecide import lacked

    policy = load_policy()
    traces = [json.loads(line) for line in (converted / "traces.jsonl").read_text().splitlines()]
    assert len(traces) == 80
    assert [t["trace_id"] for t in traces if lacked(policy, t)] == []
    weeks = {dt.datetime.fromisoformat(t["time"]).isocalendar()[:2] for t in traces}
    assert len(weeks) >= 4
    refused = [t for t in traces if t["decision"] == "abstain"]
    answered_anyway = [t for t in traces if t["ungrounded"]]
    assert refused and answered_anyway
    assert len(refused) + len(answered_anyway) == 40


def test_documents_keep_sentences_whole_and_claims_read_as_statements() -> None:
    para = pm.Paragraph(
        "Albert, King of Sweden",
        "Albert ( , ; c. 1338 – 1 April 1412) was King of Sweden. G. Stanley Hall was first.",
    )
    assert para.sentences() == [
        "Albert ( , ; c. 1338 – 1 April 1412) was King of Sweden.",
        "G. Stanley Hall was first.",
    ]
    assert pm._claim("Albert, King of Sweden >> place of birth", "Mecklenburg") == (
        "Place of birth of Albert, King of Sweden: Mecklenburg."
    )
    assert pm._claim("Who published X?", "Y") == "Who published X: Y."


def test_an_annotator_sees_her_queue_before_the_slice_coverage_notes(
    converted: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sample covers two of the seven slices: Overview lists five coverage notes, and the
    annotator's own work (80 cases to label) came after all of them, below the fold."""
    from review.admin import users
    from review.core.taxonomy import load_taxonomy
    from review.monthly import overview
    from storage.db import make_engine

    url = f"sqlite:///{tmp_path / 'msq.db'}"
    monkeypatch.setenv("WORKBENCH_DATABASE_URL", url)
    _run(["migrate"])
    _run(["add-user", "ines@example.org", "--name", "Ines", "--role", "annotator"])
    _run(["import-docs", str(converted / "documents.jsonl")])
    _run(["import-cases", str(converted / "cases.jsonl")])
    eng = make_engine(url)
    ines = users.get_by_email(eng, "ines@example.org")
    assert ines is not None
    items = overview.build_overview(eng, users.to_actor(ines), load_taxonomy()).attention
    eng.dispose()
    assert items[0].page == "labeling" and items[0].text.startswith("80 ready cases")
    assert sum(a.text.startswith("Slice ") for a in items) == 5
