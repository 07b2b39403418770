"""Core: what every area shares. Errors meant for the user, who is acting and what their
role allows, the taxonomy, strict YAML, text the database can store, JSON lines read with a
clear error, upload limits, opening the database, and the sampling and interval maths shared
by splits, audits and metrics.

May use: storage. Used by every other area."""
