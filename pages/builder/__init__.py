"""Sections of the Case builder page (pages/builder_page.py): the landing lists, the base-case
view with its edit, evidence-state and decisive-passage tabs, the edit preview and the family
view. Plain modules of functions, not pages: Streamlit runs only the ``*_page.py`` files that
app.py registers, and what these sections compute comes from review/builder."""
