"""Helpers shared by the tests, in one place: no test module imports another.

paths (the project root and test data), actors, databases (copies of the template databases),
pages (AppTest of the router or of one page), browser (streamlit run and chromium), corpus,
traces and audits (hand-made and realistic data), pgserver (a throwaway PostgreSQL), and the
concurrency worker run as its own process, transact (a Session-taking service in a write
transaction of its own). Fixtures live in tests/conftest.py."""
