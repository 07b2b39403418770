"""Audits: sampling plans over production traces, the review queue, verdicts checked claim by
claim, estimates weighted back to the population, promotion to cases, and export.

May use: cases, traces, corpus, core."""
