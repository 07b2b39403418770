"""Sections of the Cases page (pages/cases_page.py): the case list with its filters, one case
(?case=ID) and its edit, the create/edit form and the split assignment. Plain modules of
functions, not pages: Streamlit runs only the ``*_page.py`` files that app.py registers, and
what these sections compute comes from review/cases."""
