"""The tabs of the Wording page (pages/wording_page.py, the one registered page): the editor
with live preview and lint, the draft and its proposal, sign-off, comparing versions, the
history and the production check. Each module draws one tab from the page's context (engine,
signed-in user, wording in force, corpus terms, the draft); what is not layout (the draft's
rules, labels, tables, who may sign) lives in review/wording (editing, display), where it is
unit-tested."""
