"""Uploads above the configured size are refused (issue 11, item 4): the review-level check
(WORKBENCH_MAX_UPLOAD_MB, default 20), every page upload path uses it, and each page shows an
error naming the limit and writes nothing."""

from __future__ import annotations

import re

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
    [("5", 5 * MB, 5), ("0.5", MB // 2, 1), (" 20.2 ", int(20.2 * MB), 21), ("", 20 * MB, 20)],
)
def test_the_limit_is_configured_by_environment(
    monkeypatch: pytest.MonkeyPatch, setting: str, limit_bytes: int, widget: int
) -> None:
    monkeypatch.setenv(uploads.ENV, setting)
    assert uploads.max_upload_bytes() == limit_bytes
    assert uploads.widget_limit_mb() == widget  # whole megabytes for st.file_uploader
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


def test_every_page_upload_goes_through_the_check() -> None:
    """Each file_uploader passes the configured limit to the widget, and the page reads the
    bytes through review.core.uploads; no page keeps a limit of its own."""
    pages = sorted((ROOT / "pages").rglob("*.py"))
    with_uploads = []
    for page in pages:
        src = page.read_text(encoding="utf-8")
        n = src.count("st.file_uploader(")
        if not n:
            continue
        # the workflow: a page file, or a part of a page in pages/<workflow>/
        rel = page.relative_to(ROOT / "pages")
        with_uploads.append(rel.parts[0] if len(rel.parts) > 1 else page.stem.removesuffix("_page"))
        assert src.count("max_upload_size=uploads.widget_limit_mb()") == n, page.name
        checks = src.count("uploads.read_text(") + src.count("uploads.check_upload(")
        assert checks >= n, page.name
        assert not re.search(r"MAX_UPLOAD|maxUploadSize|2\s*\*\*\s*20|1024\s*\*\s*1024", src), (
            page.name
        )
    assert {"cases", "corpus", "runs", "traces"} <= set(with_uploads)


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
    assert at.file_uploader[0].proto.max_upload_size_mb == 1
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
        for e in errors
    ), errors
    assert _counts(empty_url) == before
