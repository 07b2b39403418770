"""Uploads above the configured size are refused (issue 11, item 4): the review-level check
(WORKBENCH_MAX_UPLOAD_MB, default 20), every page upload path uses it, and each page shows an
error naming the limit and writes nothing."""

from __future__ import annotations

import re

import click
import pytest
from sqlalchemy import func, select

from review.core import uploads
from review.core.errors import InputError
from storage.db import make_engine
from storage.models import AuditLog, Case, Document, EvalRun, Trace
from tests.helpers.pages import no_exception, page_app, readable
from tests.helpers.paths import ROOT

MB = 2**20


def test_default_limit_is_20_mb(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(uploads.ENV, raising=False)
    assert uploads.max_upload_mb() == 20
    assert uploads.max_upload_bytes() == 20 * MB
    uploads.check_upload("ok.jsonl", 20 * MB)  # at the limit: accepted
    with pytest.raises(uploads.UploadTooLarge) as exc:
        uploads.check_upload("big.jsonl", 20 * MB + 1)
    message = str(exc.value)
    assert "big.jsonl is 20.0 MB, above the upload limit of 20 MB (WORKBENCH_MAX_UPLOAD_MB)" in (
        message
    )
    assert "nothing was imported" in message
    assert isinstance(exc.value, InputError)  # the pages' error path catches it


@pytest.mark.parametrize(
    ("setting", "limit_bytes", "widget"),
    [
        ("5", 5 * MB, 5),
        ("0.5", MB // 2, 1),
        (" 20.2 ", int(20.2 * MB), 21),
        ("", 20 * MB, 20),
        ("250", 250 * MB, 250),
    ],
)
def test_the_limit_is_configured_by_environment(
    monkeypatch: pytest.MonkeyPatch, setting: str, limit_bytes: int, widget: int
) -> None:
    monkeypatch.setenv(uploads.ENV, setting)
    assert uploads.max_upload_bytes() == limit_bytes
    # the box shows the workbench's limit (rounded up to whole megabytes, so the browser
    # never refuses a file within it), the number the caption names; the check below names
    # the size and the command of a file above the setting that the box let through
    assert uploads.widget_limit_mb() == widget
    note = uploads.limit_note("cases")
    assert f"up to {float(setting or 20):g} MB per file" in note
    if float(setting or 20).is_integer():
        assert "rounds" not in note and f"up to {widget} MB per file" in note
    else:
        assert f"(the box rounds it up to {widget} MB)" in note
    uploads.check_upload("f", limit_bytes)
    with pytest.raises(uploads.UploadTooLarge):
        uploads.check_upload("f", limit_bytes + 1)


@pytest.mark.parametrize("setting", ["abc", "0", "-3", "inf", "nan", "20MB"])
def test_an_invalid_setting_refuses_every_upload_and_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, setting: str
) -> None:
    monkeypatch.setenv(uploads.ENV, setting)
    with pytest.raises(InputError, match="WORKBENCH_MAX_UPLOAD_MB must be a positive number"):
        uploads.check_upload("tiny.jsonl", 1)
    assert uploads.widget_limit_mb() is None  # the widget falls back to Streamlit's limit


def test_read_text_checks_size_before_decoding(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(uploads.ENV, "0.001")  # 1,048 bytes
    assert uploads.read_text("a.md", "héllo\n".encode()) == "héllo\n"
    with pytest.raises(uploads.UploadTooLarge, match=r"b\.md is 2,000 bytes, above .* 0\.001 MB"):
        uploads.read_text("b.md", b"\xff" * 2000)  # too large wins over not UTF-8
    with pytest.raises(InputError, match=r"c\.md: line 1: the file is not UTF-8 text"):
        uploads.read_text("c.md", b"caf\xe9")


def test_every_page_upload_goes_through_the_helper_and_the_check() -> None:
    """Every upload widget is ``ui.file_upload`` (the limit and the command under it), and the
    page reads the bytes through review.core.uploads with the kind of its command; no page
    keeps a limit of its own."""
    pages = sorted((ROOT / "pages").rglob("*.py"))
    with_uploads = []
    for page in pages:
        src = page.read_text(encoding="utf-8")
        if page.name == "ui.py":
            assert src.count("st.file_uploader(") == 1
            continue
        assert "st.file_uploader(" not in src, page.name
        kinds = re.findall(r'ui\.file_upload\(\s*"[^"]*",\s*"(\w+)"', src)
        if not kinds:
            continue
        rel = page.relative_to(ROOT / "pages")
        with_uploads.append(rel.parts[0] if len(rel.parts) > 1 else page.stem.removesuffix("_page"))
        checked = re.findall(r'uploads\.(?:read_text|check_upload)\(.*?, "(\w+)"\)', src)
        assert sorted(checked) == sorted(kinds), page.name
        assert set(kinds) <= set(uploads.COMMANDS), page.name
        assert not re.search(r"MAX_UPLOAD|maxUploadSize|2\s*\*\*\s*20|1024\s*\*\s*1024", src), (
            page.name
        )
    assert {"cases", "corpus", "runs", "traces"} <= set(with_uploads)


def test_the_message_names_the_size_the_limit_and_the_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(uploads.ENV, "20")
    with pytest.raises(uploads.UploadTooLarge) as exc:
        uploads.check_upload("my traces.jsonl", 35 * MB, "traces")
    assert str(exc.value) == (
        "my traces.jsonl is 35.0 MB, above the upload limit of 20 MB (WORKBENCH_MAX_UPLOAD_MB); "
        "nothing was imported. Import it with the command line, which has no limit: "
        "workbench import-traces 'my traces.jsonl'"
    )
    assert uploads.limit_note("cases") == (
        "The workbench takes up to 20 MB per file here; for a larger file use the command line: "
        "workbench import-cases FILE"
    )


def test_every_command_named_is_a_command_with_those_options() -> None:
    from review.cli.main import main

    for kind, template in uploads.COMMANDS.items():
        words = uploads.command(kind).split()
        assert words[0] == "workbench", kind
        cmd = main.commands[words[1]]
        if isinstance(cmd, click.Group):  # a subcommand: workbench labels import ...
            cmd = cmd.commands[words[2]]
        options = {o for p in cmd.params for o in getattr(p, "opts", [])}
        assert {w for w in words if w.startswith("--")} <= options, template


def test_the_transport_cap_is_streamlits_setting() -> None:
    config = (ROOT / ".streamlit" / "config.toml").read_text(encoding="utf-8")
    assert re.search(rf"^maxUploadSize = {uploads.TRANSPORT_MB}$", config, re.M)


# --- the pages -------------------------------------------------------------------------------

PAGES = [
    ("pages/corpus_page.py", "Import", "notes.md", "text/markdown"),
    ("pages/cases_page.py", "Import cases", "cases.jsonl", "application/jsonl"),
    ("pages/runs_page.py", "Import run", "run.jsonl", "application/jsonl"),
    ("pages/traces_page.py", "Import traces", "traces.jsonl", "application/jsonl"),
]


def _counts(url: str) -> tuple[int, ...]:
    eng = make_engine(url)
    try:
        with eng.connect() as c:
            return tuple(
                int(c.execute(select(func.count()).select_from(m)).scalar_one())
                for m in (Document, Case, EvalRun, Trace, AuditLog)
            )
    finally:
        eng.dispose()


@pytest.mark.parametrize(("page", "button", "name", "mime"), PAGES)
def test_a_page_refuses_an_upload_above_the_limit_and_writes_nothing(
    empty_url: str,
    monkeypatch: pytest.MonkeyPatch,
    page: str,
    button: str,
    name: str,
    mime: str,
) -> None:
    monkeypatch.setenv(uploads.ENV, "0.001")
    before = _counts(empty_url)
    at = page_app(empty_url, monkeypatch, page, "solo@example.org").run()
    no_exception(at)
    # the box's limit (whole megabytes) lets this file through to the workbench's own check
    assert at.file_uploader[0].proto.max_upload_size_mb == uploads.widget_limit_mb() == 1
    payload = b'{"key": "x"}\n' * 200  # 2,600 bytes: above 1,048
    at.file_uploader[0].set_value([(name, payload, mime)])
    for t in at.text_input:
        if t.label == "Run name":
            t.input("too big")
    next(b for b in at.button if b.label == button).click().run()
    no_exception(at)
    errors = [readable(e) for e in at.error]
    assert any(
        f"{name} is 2,600 bytes, above the upload limit of 0.001 MB (WORKBENCH_MAX_UPLOAD_MB)" in e
        and "command line, which has no limit: workbench import-" in e
        for e in errors
    ), errors
    assert _counts(empty_url) == before


@pytest.mark.parametrize(("page", "button", "name", "mime"), PAGES)
def test_the_box_and_its_caption_name_one_limit(
    empty_url: str,
    monkeypatch: pytest.MonkeyPatch,
    page: str,
    button: str,
    name: str,
    mime: str,
) -> None:
    """The box shows "Limit 20MB per file" (its max_upload_size) beside the caption's "up to
    20 MB": never Streamlit's 200 MB transport cap beside the workbench's 20 MB."""
    monkeypatch.delenv(uploads.ENV, raising=False)
    at = page_app(empty_url, monkeypatch, page, "solo@example.org").run()
    no_exception(at)
    assert at.file_uploader[0].proto.max_upload_size_mb == 20
    captions = [readable(c) for c in at.caption]
    assert any(
        "takes up to 20 MB per file here; for a larger file use the command line: workbench "
        "import-" in c
        for c in captions
    ), captions
    assert not any("200" in c for c in captions)
