"""The tabs of the Audit page (pages/audit_page.py, the one registered page): the plans with the
new-plan form, the reviewer's queue with the verdict form and claim review, the estimates and
the export. Each module draws one part of the page from the engine, the signed-in user and the
selected batch it is given; what is not layout (parsing, tables, formatting) lives in
review/audits (forms, display), where it is unit-tested."""
