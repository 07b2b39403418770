"""The tabs of the Thresholds page (pages/thresholds_page.py, the one registered page):
calibrating a ranking mode's refuse threshold with its charts, replaying and proposing the
change, signing proposals off, and the history with rollback. Each module draws its part from
the engine, the signed-in user, the taxonomy and the policy in force it is given; what is not
layout (ranges, summaries, tables, the sign-off evidence, chart downloads) lives in
review/thresholds (display, evidence) and review/charts (downloads), where it is unit-tested."""
