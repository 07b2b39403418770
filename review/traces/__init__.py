"""Traces: production traces in one canonical model with a parser per export format, the
idempotent importer with redaction, browsing, retention, the daily rollup and monitoring.

May use: core."""
