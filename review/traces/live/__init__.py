"""Live traces: sources that send or serve spans while the workbench runs (a Phoenix project
it syncs from, the OTLP/HTTP receiver), the spans they hold until their trace is complete, and
verdicts written back. Spans become traces through the same OTLP mapping and importer as a
file (:mod:`review.traces.formats.otlp`, :mod:`review.traces.importer`)."""
