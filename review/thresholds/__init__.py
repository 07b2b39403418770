"""Thresholds: calibrate the no-answer policy on run outcomes, propose a change, replay it
on production traces, gate a release, and sign the change off.

May use: evaluation, audits, traces, wording, charts, cases, corpus, policy, core."""
