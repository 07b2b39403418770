"""The size limit on files uploaded through the pages.

``WORKBENCH_MAX_UPLOAD_MB`` (default 20, megabytes of 2**20 bytes, decimals allowed) bounds
every file a page accepts; a larger file is refused with the limit named and nothing is
written. The command-line imports stream their input and have no limit. The pages also pass
the limit to ``st.file_uploader`` so the browser refuses early, but the check here is the one
that holds: it runs on the bytes the server received.
"""

from __future__ import annotations

import math
import os

from review.core.errors import InputError

ENV = "WORKBENCH_MAX_UPLOAD_MB"
DEFAULT_MB = 20.0
MB = 2**20


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
    """The limit for ``st.file_uploader(max_upload_size=...)``: whole megabytes, rounded up
    (the exact check is :func:`check_upload`); None when the setting is invalid."""
    try:
        return max(1, math.ceil(max_upload_mb()))
    except InputError:
        return None


def _size(n: int) -> str:
    return f"{n / MB:.1f} MB" if n >= MB // 10 else f"{n:,} bytes"


def check_upload(name: str, size: int) -> None:
    """Refuse a file of ``size`` bytes above the limit, naming the file and the limit."""
    limit_mb = max_upload_mb()
    if size > int(limit_mb * MB):
        raise UploadTooLarge(
            f"{name} is {_size(size)}, above the upload limit of {limit_mb:g} MB ({ENV}); "
            "nothing was imported. Import large files with the workbench command line, which "
            "has no limit."
        )


def read_text(name: str, data: bytes) -> str:
    """The upload's text after the size check; a file that is not UTF-8 is refused."""
    check_upload(name, len(data))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{name}: line 1: the file is not UTF-8 text") from None
