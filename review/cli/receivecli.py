"""The ``workbench receive`` command: an OTLP/HTTP trace receiver for OpenTelemetry exporters.

A plain click command; ``review.cli.main`` registers it on the ``workbench`` group with
``main.add_command(...)``. It works on ``WORKBENCH_DATABASE_URL`` as the command-line user.
"""

from __future__ import annotations

import logging
import os
import tomllib
from pathlib import Path

import click
from sqlalchemy import Engine

from review.cli.common import WorkbenchCommand, cli_actor, open_engine
from review.core.errors import InputError
from review.core.identity import Actor
from review.traces.live import sources
from review.traces.live.receiver import Receiver, ReceiverConfig

__all__ = ["read_token", "receive_cmd"]

SECRETS = Path(".streamlit") / "secrets.toml"


def read_token(name: str, secrets: Path = SECRETS) -> str:
    """The bearer token named ``name``: the environment variable, else the top-level key of
    ``.streamlit/secrets.toml``; InputError when neither holds a non-empty text (the receiver
    does not start open when a token was asked for). The token itself is never shown."""
    value = os.environ.get(name)
    if value is None and secrets.is_file():
        try:
            data = tomllib.loads(secrets.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise InputError(f"{secrets}: cannot be read as TOML ({exc})") from None
        found = data.get(name)
        value = found if isinstance(found, str) else None
    if value is None or not value.strip():
        raise InputError(
            f"no token named {name}: set the environment variable {name} or the key {name} "
            f"in {secrets}"
        )
    return value.strip()


def _otlp_source(engine: Engine, actor: Actor, name: str, token_env: str | None) -> int:
    """The id of the otlp source ``name``, added when missing; a source of that name of
    another kind is an error."""
    for src in sources.list_sources(engine):
        if src.name == name:
            if src.kind != "otlp":
                raise InputError(f"the source {name!r} is a {src.kind} source, not otlp")
            return src.id
    return sources.add_source(
        engine, actor, "otlp", name, url=None, project=None, secret_name=token_env
    ).id


@click.command("receive", cls=WorkbenchCommand)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    default=4318,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Port to listen on (4318 is OTLP/HTTP's; 0 picks a free one).",
)
@click.option(
    "--token-env",
    default=None,
    metavar="NAME",
    help="Require 'Authorization: Bearer <token>', the token read from the environment "
    "variable NAME or the key NAME of .streamlit/secrets.toml.",
)
@click.option(
    "--source",
    "source_name",
    default="otlp",
    show_default=True,
    help="The otlp trace source the spans belong to (created when missing).",
)
@click.option(
    "--grace",
    default=None,
    type=click.FloatRange(0, 86_400),
    metavar="SECONDS",
    help="Import a trace once its root arrived and no span came for this long "
    "(default: the staging default).",
)
def receive_cmd(
    host: str, port: int, token_env: str | None, source_name: str, grace: float | None
) -> None:
    """Receive OpenTelemetry traces over OTLP/HTTP (POST /v1/traces, protobuf or JSON,
    gzip) and import them like the OTLP file import.

    Point an exporter at http://HOST:PORT/v1/traces (for the OpenTelemetry SDKs:
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT). A request is answered 200 only once its spans are
    stored; a trace is imported once its root span arrived and the grace period passed.
    Stop with Ctrl-C."""
    token = read_token(token_env) if token_env else None
    engine = open_engine()
    actor = cli_actor()
    source_id = _otlp_source(engine, actor, source_name, token_env)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    receiver = Receiver(
        engine,
        actor,
        source_id,
        ReceiverConfig(host=host, port=port, token=token, grace_seconds=grace),
    )

    def ready(bound: int) -> None:
        shown = f"[{host}]" if ":" in host else host
        click.echo(
            f"receiving OTLP/HTTP traces on http://{shown}:{bound}/v1/traces for source "
            f"{source_name!r} ({'bearer token required' if token else 'no token'}); "
            "Ctrl-C stops",
            err=True,
        )

    receiver.serve(ready=ready)
