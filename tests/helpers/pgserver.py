"""A throwaway PostgreSQL cluster from Debian's binaries (initdb in a temp dir, a free port)."""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path


def find_bin(name: str) -> str | None:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if found:
        return found[-1]
    return shutil.which(name)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PgServer:
    """``folder`` keeps the cluster there (``stop`` leaves it, and a later ``start`` reuses it);
    by default a temporary folder is made and removed."""

    def __init__(self, folder: Path | None = None, options: str = "") -> None:
        initdb = find_bin("initdb")
        pg_ctl = find_bin("pg_ctl")
        if not initdb or not pg_ctl:
            raise FileNotFoundError("PostgreSQL binaries (initdb, pg_ctl) are not installed")
        self.initdb, self.pg_ctl = initdb, pg_ctl
        self.keep = folder is not None
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)
        self.dir = folder if folder is not None else Path(tempfile.mkdtemp(prefix="wb-pg-"))
        self.options = options
        self.port = _free_port()
        self.user: str | None = None
        if os.geteuid() == 0:  # initdb refuses to run as root: use the postgres account
            try:
                pwd.getpwnam("postgres")
            except KeyError as exc:
                raise FileNotFoundError("running as root and no 'postgres' user") from exc
            self.user = "postgres"
            shutil.chown(self.dir, user="postgres")
            self.dir.chmod(0o700)

    def _run(self, *args: str) -> None:
        cmd = list(args)
        if self.user:
            cmd = ["runuser", "-u", self.user, "--", *cmd]
        subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=120)

    def start(self) -> str:
        data = self.dir / "data"
        if self.keep and (data / "PG_VERSION").exists():
            pass  # a kept cluster: start it again
        else:
            self._init(data)
        # Test workers run in parallel (pytest-xdist): a port found free may be taken by
        # another worker before the server binds it, so a failed start tries another port.
        for attempt in range(3):
            opts = (
                f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 "
                f"-c fsync=off -c max_connections=60 {self.options}"
            ).strip()
            try:
                self._run(
                    self.pg_ctl,
                    "-D",
                    str(data),
                    "-o",
                    opts,
                    "-l",
                    str(self.dir / "log"),
                    "-w",
                    "start",
                )
                break
            except subprocess.CalledProcessError:
                if attempt == 2:
                    raise
                self.port = _free_port()
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def _init(self, data: Path) -> None:
        self._run(
            self.initdb,
            "-D",
            str(data),
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
        )

    def stop(self) -> None:
        # a kept cluster stops cleanly (its data is read again); a throwaway one at once
        mode = "fast" if self.keep else "immediate"
        with contextlib.suppress(subprocess.CalledProcessError):
            self._run(self.pg_ctl, "-D", str(self.dir / "data"), "-m", mode, "stop")
        if not self.keep:
            shutil.rmtree(self.dir, ignore_errors=True)
