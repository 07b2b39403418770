"""The documentation site builds with every warning an error (a broken link or anchor, a page
in no table of contents, an include that is missing), and the README stays a short start
whose links lead somewhere."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import docs
from tests.helpers.paths import ROOT

#: about 150 lines (issue 37): what it is, two screenshots, the two commands, the demo users
#: and a link per role, and links into docs/
README_MOST_LINES = 160


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
         str(docs.DOCS), str(tmp_path / "html")],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr + done.stdout
    assert (tmp_path / "html" / "index.html").is_file()
    assert (tmp_path / "html" / "metrics.html").is_file()


def _slug(heading: str) -> str:
    """A heading's anchor as GitHub (and MyST) make it."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    return {_slug(h) for h in re.findall(r"^#{1,6} (.+)$", text, re.M)}


def test_every_link_of_the_readme_leads_to_a_file_and_heading_that_exist() -> None:
    links = re.findall(r"\]\(([^)\s]+)\)", docs.text("README"))
    local = [link for link in links if not re.match(r"https?://", link)]
    assert len(local) >= 10
    for link in local:
        target, _, anchor = link.partition("#")
        path = ROOT / target
        assert path.exists(), link
        if anchor:
            assert anchor in _anchors(path), link


def test_the_readme_is_short() -> None:
    lines = docs.text("README").splitlines()
    assert len(lines) <= README_MOST_LINES, len(lines)


def test_every_docs_page_is_in_a_table_of_contents_and_the_readme_links_to_it() -> None:
    """The strict build refuses a page in no table of contents; here: the README names every
    page too, so a reader of the repository finds it without the site."""
    readme = docs.text("README")
    pages = sorted(
        p.relative_to(docs.DOCS).with_suffix("").as_posix()
        for p in docs.DOCS.rglob("*.md")
        if p.stem != "index"
    )
    assert len(pages) >= 14
    for page in pages:
        if page in ("security", "deployment"):  # included from SECURITY.md, deploy/README.md
            continue
        assert f"(docs/{page}.md" in readme, page


def test_every_picture_of_a_guide_is_taken_by_a_browser_test() -> None:
    """A guide's pictures are what the browser journeys show (tests/helpers/guideshots.py,
    `make guide-shots`): each is a name a browser test takes and a file in docs/guides/img,
    and no file there is left unused."""
    guides = docs.DOCS / "guides"
    shown = set()
    for page in guides.glob("*.md"):
        shown |= set(re.findall(r"!\[[^\]]*\]\(img/([\w-]+)\.png\)", page.read_text("utf-8")))
    taken = set()
    for test in (ROOT / "tests" / "browser").glob("*.py"):
        taken |= set(re.findall(r'guide_shot\(\s*\w+,\s*"([\w-]+)"\)', test.read_text("utf-8")))
    files = {p.stem for p in (guides / "img").glob("*.png")}
    assert len(shown) >= 10
    assert shown <= taken, sorted(shown - taken)
    assert shown == files, (sorted(shown - files), sorted(files - shown))


def test_the_command_reference_is_the_commands_own_help() -> None:
    from review.cli import reference

    assert docs.text("cli-reference") == reference.render(), (
        "run `python -m review.cli.reference > docs/cli-reference.md`"
    )


def _usage_rows() -> list[str]:
    """The command cells of the Command line page's table: "workbench sync phoenix --url URL"."""
    cells = re.findall(r"^\| `(workbench [^`]+)` \|", docs.text("commands"), re.M)
    return [cell.replace("\\|", "|") for cell in cells]


def test_every_command_is_on_the_command_line_page_with_only_the_options_it_has() -> None:
    """Each row names a command (or subcommand) and options it has; every command that is not
    a group of others has its row. A renamed or removed option fails here."""
    import click

    from review.cli import reference

    found = dict(reference.commands())
    rows = _usage_rows()
    assert len(rows) >= 30
    seen = set()
    for row in rows:
        words = tuple(row.split()[1:])
        path = max((p for p in found if words[: len(p)] == p), key=len, default=None)
        assert path is not None, row
        seen.add(path)
        cmd = found[path]
        names = {n for p in cmd.params for n in (*p.opts, *p.secondary_opts)}
        for flag in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", row):
            assert flag in names, f"{row}: {flag} is not an option of workbench {' '.join(path)}"
    leaves = {p for p, c in found.items() if not isinstance(c, click.Group)}
    assert leaves <= seen, sorted(" ".join(p) for p in leaves - seen)


def _table(page: str, after: str) -> list[list[str]]:
    """The rows (cells, stripped) of the first Markdown table after ``after`` on ``page``."""
    text = docs.text(page)
    lines = text[text.index(after) :].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def _metrics_example_frame() -> Any:
    """The worked example of docs/metrics.md as the frame a run's outputs make."""
    import pandas as pd

    from review.core.taxonomy import load_taxonomy

    answering = load_taxonomy().answering_decisions()
    rows = []
    for case, gold, reasons, output, reason, ok, cites, message, also in _table(
        "metrics", "## A worked example"
    ):
        expected_key, _, used_key = message.partition(" / ")
        flags = {f.strip() for f in also.split(",") if f.strip()}
        assert flags <= {"contradicts a claim", "cites a distractor", "claim after refusal"}
        rows.append(
            {
                "key": case,
                "gold": gold,
                "gold_reasons": [r.strip() for r in reasons.split(",") if r.strip()],
                "decision": output,
                "reason_code": reason or None,
                "infra": False,
                "answerable": gold in answering,
                "answered": output in answering,
                "answer_ok": ok == "yes",
                "citations_support": cites == "yes",
                "expected_message": expected_key or None,
                "message_key": used_key or None,
                "contradicts_claim": "contradicts a claim" in flags,
                "refusal_cites_distractor": "cites a distractor" in flags,
                "claim_after_refusal": "claim after refusal" in flags,
                "slices": (),
                "split": "test",
            }
        )
    return pd.DataFrame(rows)


def test_the_metrics_worked_example_is_what_the_code_computes() -> None:
    from review.evaluation import runmetrics

    frame = _metrics_example_frame()
    assert len(frame) == 8
    computed = [
        [
            runmetrics.LABELS[m.name],
            f"{m.k} / {m.n}",
            f"{m.value:.3f}" if m.name == "crag_score" else f"{m.value:.1%}",
        ]
        for m in runmetrics.summarize(frame).values()
    ]
    stated = [row[:3] for row in _table("metrics", "What each figure counts here")]
    assert stated == computed


def test_the_release_gate_page_explains_every_source_of_a_row() -> None:
    from review.thresholds import release

    rows = {row[0]: row[1] for row in _table("release-gate", "## Where each row comes from")}
    assert rows == release.SOURCES


def test_the_audit_estimate_example_is_what_the_code_computes() -> None:
    from review.core.sampling import estimate_from_counts

    counts = [
        (stratum, int(population), int(audited), int(found))
        for stratum, population, audited, found in _table("audit-estimates", "## A worked example")
    ]
    est = estimate_from_counts(counts)
    assert est.estimate is not None and est.lo is not None and est.hi is not None
    assert est.std_error is not None
    raw = est.raw
    computed = {
        "Estimate": f"{est.estimate:.1%}",
        "95% interval": f"{est.lo:.1%} to {est.hi:.1%}",
        "Standard error": f"{est.std_error * 100:.1f} points",
        "Raw rate of the sample": f"{raw.rate:.1%} ({raw.successes} of {raw.n}), "
        f"{raw.lo:.1%} to {raw.hi:.1%}",
        "Strata with one audited trace": ", ".join(est.single_item_strata),
    }
    stated = dict(_table("audit-estimates", "What the estimate says"))
    assert stated == computed


def test_the_trace_formats_page_is_the_formats_docstring() -> None:
    from review.cli import reference

    assert docs.text("trace-formats") == reference.trace_formats(), (
        "run `python -m review.cli.reference traces > docs/trace-formats.md`"
    )
    for name in ("canonical.jsonl", "otlp_openinference.jsonl", "langfuse.jsonl", "flat.csv"):
        assert (ROOT / "tests" / "data" / "traces" / name).is_file(), name


def test_the_signoff_page_is_the_signoff_and_chain_docstrings() -> None:
    from review.cli import reference

    made, _, example = docs.text("signoff").partition("\n## A worked example\n")
    assert made.rstrip("\n") + "\n" == reference.signoff_page(), (
        "run `python -m review.cli.reference signoff` and put its output before the page's "
        "'## A worked example'"
    )
    assert example


_HASH = re.compile(r"\b[0-9a-f]{64}\b")
_DAY = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")


def _same(output: str) -> str:
    """An output with the hashes and dates a demo built today has in their place."""
    return _DAY.sub("DAY", _HASH.sub("HASH", output.strip()))


def test_the_signoff_worked_example_is_what_the_commands_print(
    demo_template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    from click.testing import CliRunner
    from sqlalchemy import text

    from review.cli.main import main
    from review.policy import chain, inforce, signoff
    from storage.db import make_engine

    monkeypatch.delenv(chain.ENV_KEY, raising=False)
    chain.set_signing_key(None)
    after = "## A worked example"

    def fresh(name: str) -> Any:
        path = tmp_path / f"{name}.db"
        shutil.copy(demo_template, path)
        monkeypatch.setenv("WORKBENCH_DATABASE_URL", f"sqlite:///{path}")
        signoff.clear_chain_cache()
        return make_engine(f"sqlite:///{path}")

    def verify(*args: str) -> tuple[int, str]:
        signoff.clear_chain_cache()
        r = CliRunner().invoke(main, ["verify-signoffs", *args])
        return r.exit_code, r.output

    engine = fresh("intact")
    with engine.connect() as c:
        stored = c.execute(
            text(
                "select s.id, v.kind, v.number, s.signer, s.role from signoffs s "
                "join policy_versions v on v.id = s.policy_version_id order by s.id"
            )
        ).all()
    kinds = {"no_answer_policy": "no-answer policy", "refusal_wording": "refusal wording"}
    assert [
        [str(i), f"{kinds[kind]} version {number}", signer, role]
        for i, kind, number, signer, role in stored
    ] == _table("signoff", after)
    code, printed = verify()
    assert code == 0
    assert _same(printed) == _same(docs.block("signoff", "text", "**The record verifies.**"))
    out = tmp_path / "approved.yaml"
    assert CliRunner().invoke(main, ["export-policy", str(out)]).exit_code == 0
    first = out.read_text(encoding="utf-8").splitlines()[0]
    assert _same(first) == _same(docs.block("signoff", "text", "workbench export-policy"))
    head = _HASH.findall(first)[0]

    with engine.begin() as c:
        c.execute(text(docs.block("signoff", "sql", "**Someone rewrites a signature.**")))
    code, printed = verify()
    assert code == 1
    assert _same(printed) == _same(docs.block("signoff", "text", "now exits 1"))
    signoff.clear_chain_cache()
    assert _same(signoff.integrity_banner(engine) or "") == _same(
        docs.block("signoff", "text", "every page shows")
    )
    version = inforce.in_force(engine).version
    assert version is not None and version.number == 2
    refused = CliRunner().invoke(main, ["export-policy", str(tmp_path / "again.yaml")])
    assert refused.exit_code == 1 and "nothing is exported" in refused.output
    engine.dispose()

    engine = fresh("cut")
    with engine.begin() as c:
        c.execute(text(docs.block("signoff", "sql", "**Someone deletes signatures.**")))
    code, printed = verify()
    assert code == 1
    assert _same(printed) == _same(docs.block("signoff", "text", "the chain of the four rows"))
    # the writer also rewrites the head and the audit log: only the exported head catches it
    with engine.begin() as c:
        last, last_hash = c.execute(
            text("select id, row_hash from signoffs order by id desc limit 1")
        ).one()
        c.execute(
            text("update settings set value = :v where key = :k"),
            {"v": f'{{"count": {last}, "head": "{last_hash}"}}', "k": signoff.CHAIN_KEY},
        )
        c.execute(
            text(
                "delete from audit_log where id in (select id from audit_log "
                "where entity = 'policy_version' and action in ('approve', 'reject') "
                "order by id desc limit 2)"
            )
        )
    code, printed = verify()
    assert code == 0, printed
    code, printed = verify("--head", head)
    assert code == 1
    assert f"HEAD MISMATCH: no stored signature has the recorded head {head}" in printed
    assert "the record was rewritten or cut back since it was recorded" in printed
    engine.dispose()
    signoff.clear_chain_cache()


def _signal(cell: str, kind: type) -> Any:
    if cell == "(not logged)":
        return None
    return kind(cell)


def test_the_threshold_gate_checks_are_what_the_gate_returns() -> None:
    from review.policy import gate
    from review.policy.policy import SIGNAL_MISSING, load_policy

    rows = _table("threshold-gate", "## The checks")
    order = [row[0] for row in rows]
    assert order == [*load_policy().gate_order, SIGNAL_MISSING]
    for check, _, decision, reason, message in rows[:-1]:
        expected = "answer" if check == "low_score_caveat" else gate.RULE_DECISION[check]
        assert decision.split(" with ")[0] == expected, check
        assert (reason if reason != "(none)" else None) == gate.RULE_REASON_CODE[check], check
        assert (message if message != "(none)" else None) == gate.RULE_MESSAGE_KEY[check], check


def test_the_threshold_gate_worked_example_is_what_the_gate_decides() -> None:
    from review.policy import gate
    from review.policy.policy import load_policy

    policy = load_policy()
    rows = _table("threshold-gate", "## A worked example")
    assert len(rows) == 14
    for number, mode, hits, score, otherwise, decision, check, reason, message in rows:
        signals: dict[str, Any] = {
            "answerable": True,
            "ambiguous": False,
            "ungrounded": False,
            "topics": ("billing",),
        }
        if otherwise:
            name, _, value = (part.strip() for part in otherwise.partition("="))
            if value == "(not logged)":
                signals[name] = None
            elif name == "topics":
                signals[name] = tuple(v.strip() for v in value.split(","))
            else:
                signals[name] = value == "true"
        result = gate.decide(
            policy,
            gate.Signals(mode, _signal(hits, int), _signal(score, float), **signals),
        )
        shown = f"{result.decision} with caveat" if result.caveat else result.decision
        assert shown == decision, number
        rule = f"{result.rule} ({result.detail})" if result.detail else result.rule
        assert rule == check, number
        assert (result.reason_code or "") == reason, number
        assert (result.message_key or "") == message, number


def test_the_monitoring_rules_table_states_the_bundled_settings() -> None:
    from review.traces import monitoring

    policy = monitoring.load_monitoring_policy()
    rows = _table("monitoring-alerts", "## The rules")
    assert [row[0] for row in rows] == list(monitoring.RULE_ORDER)
    for rule, _, fires, severity in rows:
        settings = getattr(policy.alerts, rule)
        stated = re.findall(r"`(\w+)` (\d+(?:\.\d+)?)", f"{fires} {severity}")
        assert stated, rule
        for name, value in stated:
            assert float(getattr(settings, name)) == float(value), (rule, name)
    assert f"`min_traces_per_week` ({policy.min_traces_per_week})" in docs.flat("monitoring-alerts")


def test_the_monitoring_worked_example_raises_the_alerts_it_lists() -> None:
    import datetime as dt

    import pandas as pd

    from review.traces import monitoring

    columns = ("traces", "no_answer", "caveat", "ungrounded", "negative_on_refusals")
    days = []
    for span, *counts, missing in _table("monitoring-alerts", "## A worked example"):
        first, _, last = span.partition(" to ")
        day, end = dt.date.fromisoformat(first), dt.date.fromisoformat(last or first)
        while day <= end:
            # a span's decisions without a reason fall on its last day
            days.append(
                {"day": day, **dict(zip(columns, map(int, counts), strict=True)),
                 "missing_reason": int(missing) if day == end else 0}
            )  # fmt: skip
            day += dt.timedelta(days=1)
    daily = pd.DataFrame(days)
    daily["week"] = [d - dt.timedelta(days=d.weekday()) for d in daily["day"]]
    weekly = daily.groupby("week", as_index=False)[["traces", "no_answer", "missing_reason"]].sum()
    weekly["no_answer_rate"] = weekly["no_answer"] / weekly["traces"]
    policy = monitoring.load_monitoring_policy()
    alerts = [
        *monitoring.evaluate_alerts(weekly, policy),
        *monitoring.evaluate_window_alerts(daily[["day", *monitoring.DAILY_COLUMNS]], policy),
    ]
    assert {a.week for a in alerts} == {dt.date(2026, 3, 9)}
    raised = [[a.rule, a.severity, a.message] for a in alerts]
    assert raised == _table("monitoring-alerts", "raises four alerts")
