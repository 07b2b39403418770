"""The size limit on files uploaded through the pages.

``WORKBENCH_MAX_UPLOAD_MB`` (default 20, megabytes of 2**20 bytes, decimals allowed) bounds
every file a page accepts; a larger file is refused with its size, the limit and the
command-line import to use instead (:data:`COMMANDS`), and nothing is written. The
command-line imports stream their input and have no limit.

The check here runs on the bytes the server received. The upload widgets let the browser send
files up to :data:`TRANSPORT_MB` (Streamlit's ``server.maxUploadSize`` in
.streamlit/config.toml), above the workbench's limit, so that a file a little too large
reaches this check and the person reads its size and the command; the browser refuses only
files above the transport cap, with Streamlit's own message (the caption under every upload
widget states the limit and the command, so that case is covered too).
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
    """The limit for ``st.file_uploader(max_upload_size=...)``: the transport cap, so a file
    above the workbench's limit still reaches :func:`check_upload` and is refused with its
    size and the command; None (Streamlit's setting) when the workbench's setting is invalid."""
    try:
        return max(TRANSPORT_MB, math.ceil(max_upload_mb()))
    except InputError:
        return None


def command(kind: str, name: str = "FILE") -> str:
    """The command-line import of an upload of ``kind`` (a key of :data:`COMMANDS`)."""
    return COMMANDS[kind].format(file=shlex.quote(name))


def limit_note(kind: str) -> str:
    """The line under an upload widget: the limit and the command for larger files (the
    widget itself shows the transport cap, which is not the limit)."""
    try:
        limit = f"The workbench takes up to {max_upload_mb():g} MB per file here"
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
