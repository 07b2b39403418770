"""``workbench labels`` and the Labels in and out page: cases out to Label Studio and Argilla,
the real exports' labels back in, mapped, all or nothing, the same file twice adding nothing;
hostile tool user names stay text; who may use it."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import Engine, func, select

from review.cli import labelscli
from review.core import uploads
from review.core.taxonomy import Taxonomy
from review.labels import imports, labelstudio, tools
from review.labels.external import Skipped
from storage.db import make_engine, read_session
from storage.models import Label, LabelImport
from tests.helpers.pages import live_markdown, markdown_shown, no_exception, page_app, readable
from tests.helpers.paths import ROOT
from tools import labelstudio_roundtrip as rt

DATA = Path(__file__).parent / "data" / "labelstudio"
PAGE = "pages/exchange_page.py"
USERS = {"1": "ines.duarte@brightwave.example", "2": "tom.becker@brightwave.example"}
RAVI = "ravi.menon@brightwave.example"


@pytest.fixture
def ls_url(tmp_path: Path, tax: Taxonomy) -> str:
    """The database the committed Label Studio exports were made from."""
    url = f"sqlite:///{tmp_path / 'wb.db'}"
    eng = make_engine(url)
    try:
        rt.fixture_database(eng, tax)
    finally:
        eng.dispose()
    return url


@pytest.fixture
def ls_engine(ls_url: str) -> Engine:
    return make_engine(ls_url)


def labels(engine: Engine, source: str = "label-studio") -> int:
    with read_session(engine) as s:
        return int(s.scalar(select(func.count(Label.id)).where(Label.source == source)) or 0)


def submitted(name: str) -> int:
    return sum(
        1 for _ in labelstudio.read_export(io.BytesIO((DATA / name).read_bytes()), Skipped())
    )


# ---------------------------------------------------------------------------------------
# the command line


def test_cli_exports_both_tools_and_imports_a_real_export_once(
    ls_url: str, ls_engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKBENCH_DATABASE_URL", ls_url)
    cli = CliRunner()
    out = cli.invoke(
        labelscli.labels_group,
        ["export", "--tool", "label-studio", "--out", str(tmp_path / "ls"), "--family", rt.FAMILY],
    )
    assert out.exit_code == 0, out.output
    assert "for Label Studio" in out.output
    tasks = json.loads((tmp_path / "ls" / labelstudio.TASKS_FILE).read_text(encoding="utf-8"))
    assert {t["data"]["case_key"] for t in tasks} >= {"CASE-001", "CASE-002"}
    assert (
        (tmp_path / "ls" / labelstudio.CONFIG_FILE).read_text(encoding="utf-8").startswith("<View")
    )
    out = cli.invoke(
        labelscli.labels_group, ["export", "--tool", "argilla", "--out", str(tmp_path / "ar")]
    )
    assert out.exit_code == 0, out.output
    assert (tmp_path / "ar" / ".argilla" / "settings.json").is_file()

    # no mapping: refused, nothing written
    out = cli.invoke(
        labelscli.labels_group, ["import", str(DATA / "full.json"), "--tool", "label-studio"]
    )
    assert out.exit_code == 1 and "user mapping is required" in out.output
    # one annotator unmapped: refused with the record and the field
    out = cli.invoke(
        labelscli.labels_group,
        ["import", str(DATA / "full.json"), "--tool", "label-studio", "--user", f"1={USERS['1']}"],
    )
    assert out.exit_code == 1 and "field user" in out.output
    assert labels(ls_engine) == 0

    mapping = tmp_path / "users.txt"
    mapping.write_text(
        "# Label Studio user id = workbench e-mail\n"
        "1 = ines.duarte@brightwave.example\n"
        "2 = tom.becker@brightwave.example\n",
        encoding="utf-8",
    )
    args = ["import", str(DATA / "full.json"), "--tool", "label-studio", "--users", str(mapping)]
    out = cli.invoke(labelscli.labels_group, args)
    assert out.exit_code == 0, out.output
    n = submitted("full.json")
    assert f"{n:,} new label" in out.output and "cancelled" in out.output
    assert labels(ls_engine) == n
    again = cli.invoke(labelscli.labels_group, args)
    assert again.exit_code == 0 and "Nothing new from Label Studio" in again.output
    assert labels(ls_engine) == n
    listed = cli.invoke(labelscli.labels_group, ["imports"])
    assert listed.exit_code == 0 and "label-studio full.json" in listed.output
    assert f"{n} added" in listed.output


@pytest.mark.parametrize("tool", ["label-studio", "argilla"])
def test_cli_export_refuses_to_overwrite_what_is_there(
    ls_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tool: str
) -> None:
    monkeypatch.setenv("WORKBENCH_DATABASE_URL", ls_url)
    target = tmp_path / tool
    args = ["export", "--tool", tool, "--out", str(target)]
    assert CliRunner().invoke(labelscli.labels_group, args).exit_code == 0
    before = {p: p.read_bytes() for p in target.rglob("*") if p.is_file()}
    again = CliRunner().invoke(labelscli.labels_group, [*args, "--family", rt.FAMILY])
    assert again.exit_code == 1 and again.output.startswith("error: ")
    assert {p: p.read_bytes() for p in target.rglob("*") if p.is_file()} == before


def test_export_files_for_the_page_match_what_the_command_line_writes(
    ls_engine: Engine, tax: Taxonomy, tmp_path: Path
) -> None:
    files = tools.export_files(ls_engine, rt.EXPORTER, tax, "label-studio", family=rt.FAMILY)
    by_name = {f.file_name: f.data for f in files.files}
    assert by_name["tasks.json"] == (DATA / labelstudio.TASKS_FILE).read_bytes()
    assert by_name["labeling-config.xml"].decode() == labelstudio.labeling_config(tax)
    zipped = tools.export_files(ls_engine, rt.EXPORTER, tax, "argilla")
    (only,) = zipped.files
    names = zipfile.ZipFile(io.BytesIO(only.data)).namelist()
    assert any(n.endswith("settings.json") for n in names) and any(
        n.endswith("records.json") for n in names
    )
    assert zipped.cases == files.cases + (
        zipped.cases - files.cases
    )  # every ready case vs a family
    assert zipped.cases >= files.cases > 0


# ---------------------------------------------------------------------------------------
# the page


def test_page_imports_a_real_export_after_the_mapping_and_says_so_under_the_button(
    ls_url: str, ls_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = page_app(ls_url, monkeypatch, PAGE, RAVI).run()
    no_exception(at)
    at.file_uploader[0].set_value(
        [("full.json", (DATA / "full.json").read_bytes(), "application/json")]
    )
    at.run()
    no_exception(at)
    n = submitted("full.json")
    assert any(f"{n} submitted annotations by 2 annotators" in readable(c) for c in at.caption)
    # Label Studio names its users by id: nothing suggested, the import refuses until mapped
    next(b for b in at.button if b.label == "Import labels").click().run()
    assert any("Map every annotator first" in readable(e) for e in at.error)
    assert labels(ls_engine) == 0
    pickers = {readable(s.label).split(" ")[0]: s for s in at.selectbox if "annotation" in s.label}
    assert set(pickers) == set(USERS)
    for tool_user, email in USERS.items():
        pickers[tool_user].set_value(email)
    at.run()
    next(b for b in at.button if b.label == "Import labels").click().run()
    no_exception(at)
    assert labels(ls_engine) == n
    assert any("new label" in readable(s) for s in at.success)
    with read_session(ls_engine) as s:
        assert s.scalar(select(func.count(LabelImport.id))) == 1
    assert any("full.json" in str(d.value.to_dict()) for d in at.dataframe)


def test_page_is_for_reviewers_and_admins_only(
    ls_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = page_app(ls_url, monkeypatch, PAGE, "ines.duarte@brightwave.example").run()
    no_exception(at)
    assert not at.file_uploader and not at.button
    assert any("Label Studio" in readable(i) for i in at.info)


def test_hostile_tool_user_names_stay_text(
    ls_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    hostile = "![x](http://evil.example/x.png) <b>b</b> =HYPERLINK(1)"
    body = json.loads((DATA / "min-emails.json").read_text(encoding="utf-8"))
    for item in body:
        if str(item.get("annotator") or "").startswith("ines"):
            item["annotator"] = hostile
    at = page_app(ls_url, monkeypatch, PAGE, RAVI).run()
    at.file_uploader[0].set_value([("min.json", json.dumps(body).encode(), "application/json")])
    at.run()
    no_exception(at)
    assert not live_markdown("\n".join(markdown_shown(at)))
    labels_shown = [readable(s.label) for s in at.selectbox if "annotation" in s.label]
    assert any(hostile in label for label in labels_shown), labels_shown


def test_suggested_mapping_is_only_a_suggestion(ls_engine: Engine) -> None:
    got = imports.suggested_users(ls_engine, ["ines.duarte@brightwave.example", "1"])
    assert got == {"ines.duarte@brightwave.example": "ines.duarte@brightwave.example"}


def test_the_import_benchmark_runs_as_its_docstring_says(tmp_path: Path) -> None:
    """benchmarks/label_import.py (a 100 MB export by default) on a small export: the second
    import of the same file adds nothing. Its figures are printed, not asserted."""
    done = subprocess.run(
        [
            sys.executable,
            "benchmarks/label_import.py",
            "--cases",
            "30",
            "--annotators",
            "2",
            "--note-bytes",
            "10",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "first import: 60 added" in done.stdout
    assert "same file again: 0 added, 60 unchanged" in done.stdout


def test_page_refuses_an_upload_above_the_limit_and_names_the_command(
    ls_url: str, ls_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(uploads.ENV, "0.001")
    at = page_app(ls_url, monkeypatch, PAGE, RAVI).run()
    at.file_uploader[0].set_value(
        [("full.json", (DATA / "full.json").read_bytes(), "application/json")]
    )
    at.run()
    no_exception(at)
    errors = [readable(e) for e in at.error]
    assert any(
        "above the upload limit of 0.001 MB" in e and "workbench labels import full.json" in e
        for e in errors
    ), errors
    assert not [b for b in at.button if b.label == "Import labels"]
    assert labels(ls_engine) == 0
