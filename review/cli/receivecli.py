"""The ``workbench receive`` command: an OTLP/HTTP trace receiver for OpenTelemetry exporters.

A plain click command; ``review.cli.main`` registers it on the ``workbench`` group with
``main.add_command(...)``. It works on ``WORKBENCH_DATABASE_URL`` as the command-line user.
"""

from __future__ import annotations

import ipaddress
import logging

import click

from review.cli.common import WorkbenchCommand, cli_actor, open_engine
from review.traces.live import sources
from review.traces.live.receiver import Receiver, ReceiverConfig

__all__ = ["receive_cmd"]


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host == "localhost"


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
    default="OTLP receiver",
    show_default=True,
    help="The otlp trace source the spans belong to (added when missing).",
)
@click.option(
    "--grace",
    default=None,
    type=click.FloatRange(0, 86_400),
    metavar="SECONDS",
    help="Import a trace once its root arrived and no span came for this long "
    "(default: the source's grace period, 30 s for a new one).",
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
    token = sources.secret_value(token_env)
    if token is None and not _loopback(host):
        click.echo(
            f"warning: listening on {host} without a token: anyone who reaches this address "
            "can add traces (use --token-env)",
            err=True,
        )
    engine = open_engine()
    actor = cli_actor()
    source = sources.ensure_source(
        engine, actor, kind="otlp", name=source_name, secret_name=token_env, grace_seconds=grace
    )
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    receiver = Receiver(
        engine,
        actor,
        source.id,
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
