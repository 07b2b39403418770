"""The labeling tools the workbench exchanges cases and labels with, behind one face for the
page and the command line: what each tool's export is made of and which reader reads its
labels back (:mod:`review.labels.labelstudio`, :mod:`review.labels.argilla_io`).

Label Studio gets two files: the labeling configuration (paste it into the project's Labeling
Interface) and the tasks (import them). Argilla gets one zip holding the dataset as its client's
``rg.Dataset.to_disk`` lays it out (unzip it and ``rg.Dataset.from_disk`` the folder).
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from sqlalchemy import Engine

from review.cases.cases import CaseFilter
from review.core.errors import InputError
from review.core.identity import Actor
from review.core.taxonomy import Taxonomy
from review.labels import argilla_io, labelstudio
from review.labels.external import TOOLS, ExternalLabel, Skipped

__all__ = [
    "NAMES",
    "TOOLS",
    "Download",
    "ExportFiles",
    "Reader",
    "export_files",
    "export_to",
    "reader",
    "sha256_of",
]

#: each tool's name as people write it
NAMES: dict[str, str] = {"label-studio": "Label Studio", "argilla": "Argilla"}

Reader = Callable[[IO[bytes], Skipped], Iterator[ExternalLabel]]


def reader(tool: str) -> Reader:
    """The reader of ``tool``'s labels export (its submitted annotations, streamed)."""
    if tool == "label-studio":
        return lambda stream, skipped: labelstudio.read_export(stream, skipped)
    if tool == "argilla":
        return lambda stream, skipped: argilla_io.read_export(stream, skipped)
    raise ValueError(f"unknown labeling tool {tool!r}: one of {', '.join(TOOLS)}")


@dataclass(frozen=True)
class Download:
    label: str
    file_name: str
    mime: str
    data: bytes


@dataclass(frozen=True)
class ExportFiles:
    """The files to hand to the tool, how many cases they hold and how many of those were
    written with their restricted text withheld (the exporting user has no clearance)."""

    files: tuple[Download, ...]
    cases: int
    redacted: int


def export_files(
    engine: Engine,
    actor: Actor,
    tax: Taxonomy,
    tool: str,
    *,
    family: str | None = None,
    slice_: str | None = None,
) -> ExportFiles:
    """The ready cases (of one family and/or slice, if given) as ``tool``'s files, in memory,
    for the page's download buttons (the command line writes them to disk: :func:`export_to`)."""
    if tool == "label-studio":
        buf = io.BytesIO()
        flt = CaseFilter(family=family or None, slice=slice_ or None)
        done = labelstudio.export_tasks(engine, buf, tax, flt, viewer=actor)
        config = labelstudio.labeling_config(tax).encode("utf-8")
        return ExportFiles(
            (
                Download("Labeling configuration (XML)", "labeling-config.xml", "text/xml", config),
                Download("Tasks (JSON)", "tasks.json", "application/json", buf.getvalue()),
            ),
            done.written,
            done.redacted_cases,
        )
    if tool == "argilla":
        buf = io.BytesIO()
        flt_a = argilla_io.ExportFilter(family=family or None, slice=slice_ or None)
        rep = argilla_io.export_zip(engine, actor, tax, buf, flt_a)
        return ExportFiles(
            (
                Download(
                    "Argilla dataset (zip)",
                    "argilla-dataset.zip",
                    "application/zip",
                    buf.getvalue(),
                ),
            ),
            rep.written,
            rep.redacted,
        )
    raise ValueError(f"unknown labeling tool {tool!r}: one of {', '.join(TOOLS)}")


def export_to(
    engine: Engine,
    actor: Actor,
    tax: Taxonomy,
    tool: str,
    directory: Path,
    *,
    family: str | None = None,
    slice_: str | None = None,
) -> tuple[int, int]:
    """Write ``tool``'s files into ``directory`` (streamed); returns the cases written and
    how many of them had their restricted text withheld. Files already there are refused, not
    overwritten (a project's earlier tasks or dataset are not lost to a second export)."""
    if tool == "label-studio":
        there = [
            n for n in (labelstudio.CONFIG_FILE, labelstudio.TASKS_FILE) if (directory / n).exists()
        ]
        if there:
            raise InputError(f"{directory / there[0]} exists already; nothing was written")
        flt = CaseFilter(family=family or None, slice=slice_ or None)
        done = labelstudio.write_project(engine, directory, tax, flt, viewer=actor)
        return done.written, done.redacted_cases
    if tool == "argilla":
        flt_a = argilla_io.ExportFilter(family=family or None, slice=slice_ or None)
        rep = argilla_io.export_dir(engine, actor, tax, directory, flt_a)
        return rep.written, rep.redacted
    raise ValueError(f"unknown labeling tool {tool!r}: one of {', '.join(TOOLS)}")


def sha256_of(stream: IO[bytes]) -> str:
    """The file's sha256, read in blocks (the import log names the file by it)."""
    h = hashlib.sha256()
    while block := stream.read(1 << 20):
        h.update(block)
    return h.hexdigest()
