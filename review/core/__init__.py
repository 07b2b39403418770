"""Core: what every area shares. Errors meant for the user (WorkbenchError), who is acting and
what their role allows, the taxonomy, the fixed terms (statuses, claim verdicts), strict YAML,
one reader of JSON-lines records, text the database can store, the one Markdown escaper
(pages and exports) and the one CSV writer (safe to open in a spreadsheet), upload limits,
opening the database, and the sampling and interval maths shared by splits, audits and metrics.

May use: storage. Used by every other area."""
