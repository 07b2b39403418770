"""Traces: production traces in one canonical model with a parser per export format, the
idempotent importer with redaction, browsing, retention, the daily rollup and monitoring, and
who may see a trace (the restricted rule itself is the corpus's, which keeps it in step).

May use: charts, corpus, core."""
