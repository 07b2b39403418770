"""The size limit on files uploaded through the pages.

``WORKBENCH_MAX_UPLOAD_MB`` (default 20, megabytes of 2**20 bytes, decimals allowed) bounds
every file a page accepts; a larger file is refused with its size, the limit and the
command-line import to use instead (:data:`COMMANDS`), and nothing is written. The
command-line imports stream their input and have no limit.

The upload box and the caption under it name one limit: the box's own limit
(``st.file_uploader(max_upload_size=...)``, shown in the box as "Limit 20MB per file") is the
workbench's, in whole megabytes (a fractional setting is rounded up, and the caption says
so), and the caption states it with the command-line import for larger files. Streamlit
refuses a file above the box's limit in the browser ("File must be 20.0MB or smaller."),
beside that caption; a file between the setting and the box's rounded-up limit reaches the
check here, which runs on the bytes the server received and names the file's size, the
limit and the command. :data:`TRANSPORT_MB` (Streamlit's ``server.maxUploadSize`` in
.streamlit/config.toml) only caps what any request may carry.
"""

from __future__ import annotations

import math
import os
import shlex

from review.core.errors import InputError

ENV = "WORKBENCH_MAX_UPLOAD_MB"
DEFAULT_MB = 20.0
MB = 2**20
#: What the browser may send at all (megabytes): .streamlit/config.toml ``maxUploadSize``.
TRANSPORT_MB = 200

#: The command-line import for each kind of upload (``{file}``: the uploaded file's name).
COMMANDS = {
    "documents": "workbench import-docs {file}",
    "cases": "workbench import-cases {file}",
    "run": "workbench import-run {file} --name RUN-NAME",
    "judge": "workbench import-judge {file} --run RUN-NAME",
    "traces": "workbench import-traces {file}",
    "labels": "workbench labels import {file} --tool TOOL --users USER-MAP",
}


class UploadTooLarge(InputError):
    """An uploaded file is above the configured limit; nothing was written."""


def max_upload_mb() -> float:
    """The configured limit in megabytes (read at each call, so a restart is not needed)."""
    raw = os.environ.get(ENV, "").strip()
    if not raw:
        return DEFAULT_MB
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise InputError(
            f"{ENV} must be a positive number of megabytes, not {raw!r}; uploads are refused "
            "until it is fixed"
        )
    return value


def max_upload_bytes() -> int:
    return int(max_upload_mb() * MB)


def widget_limit_mb() -> int | None:
    """The limit for ``st.file_uploader(max_upload_size=...)``, which the box shows: the
    workbench's own limit in whole megabytes (rounded up, so nothing within the limit is
    refused in the browser; what lies between is refused by :func:`check_upload` with its
    size and the command); None (Streamlit's setting) when the workbench's setting is
    invalid, whose caption then says what is wrong."""
    try:
        return math.ceil(max_upload_mb())
    except InputError:
        return None


def command(kind: str, name: str = "FILE") -> str:
    """The command-line import of an upload of ``kind`` (a key of :data:`COMMANDS`)."""
    return COMMANDS[kind].format(file=shlex.quote(name))


def limit_note(kind: str) -> str:
    """The line under an upload widget: the limit (the one the box shows, and why the box's
    number differs when the setting is not a whole number of megabytes) and the command for
    larger files."""
    try:
        mb = max_upload_mb()
        limit = f"The workbench takes up to {mb:g} MB per file here"
        if not float(mb).is_integer():
            limit += f" (the box rounds it up to {math.ceil(mb)} MB)"
    except InputError as exc:
        limit = str(exc)
    return f"{limit}; for a larger file use the command line: {command(kind)}"


def _size(n: int) -> str:
    return f"{n / MB:.1f} MB" if n >= MB // 10 else f"{n:,} bytes"


def check_upload(name: str, size: int, kind: str | None = None) -> None:
    """Refuse a file of ``size`` bytes above the limit, naming the file, its size, the limit
    and (with ``kind``, a key of :data:`COMMANDS`) the command-line import to use instead."""
    limit_mb = max_upload_mb()
    if size > int(limit_mb * MB):
        instead = (
            f"Import it with the command line, which has no limit: {command(kind, name)}"
            if kind is not None
            else "Import large files with the workbench command line, which has no limit."
        )
        raise UploadTooLarge(
            f"{name} is {_size(size)}, above the upload limit of {limit_mb:g} MB ({ENV}); "
            f"nothing was imported. {instead}"
        )


def read_text(name: str, data: bytes, kind: str | None = None) -> str:
    """The upload's text after the size check; a file that is not UTF-8 is refused."""
    check_upload(name, len(data), kind)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{name}: line 1: the file is not UTF-8 text") from None
