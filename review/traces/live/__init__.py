"""Live traces: sources that send traces while the workbench runs (a Phoenix it syncs from,
the OTLP/HTTP receiver), the spans they send held until their trace is complete, and audit
verdicts pushed back to Phoenix (``push``)."""
