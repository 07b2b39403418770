"""Corpus: versioned documents (import, versions, search, access checks) and parsing of
document bodies (Markdown or text with YAML front matter, JSON lines, block structure).

May use: core."""
