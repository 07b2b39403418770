"""Sphinx configuration of the documentation site (``make docs``; built strictly, every warning
an error, by tests/test_docs.py). The pages are Markdown, read by MyST."""

project = "Abstention Workbench"
author = "The Abstention Workbench authors"
copyright = "2026, The Abstention Workbench authors"

extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]

html_theme = "furo"
html_title = "Abstention Workbench"

myst_enable_extensions = ["colon_fence"]
# a link to a heading (page.md#heading) is checked, as a link to a page is
myst_heading_anchors = 4
