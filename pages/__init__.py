"""Streamlit pages (thin) and the one UI helper module, ``pages.ui``."""
