"""Parts of the Runs page (pages/runs_page.py): see forms."""
