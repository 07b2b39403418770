"""Corpus: versioned documents (import, versions, search, access checks, the one writer of a
document version) and their bodies (Markdown or text with YAML front matter, JSON lines, and
the one Markdown block reader the corpus view and the edit operators share), and the rule
that says which production traces are restricted, kept in step with every document version.

May use: core."""
