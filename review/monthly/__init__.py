"""Monthly: the monthly review record (signals, audit, findings, decisions) and the
overview of work waiting for each role.

May use: thresholds, audits, wording, evaluation, traces, labels, charts, admin, cases, policy,
core."""
