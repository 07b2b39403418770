"""The browser benchmark's reference: the least a Streamlit page can be (a title and a button),
in a menu of two such pages as the workbench's pages are in its sidebar, served and timed the
same way as the workbench (benchmarks/browser.py)."""

import streamlit as st


def reference() -> None:
    st.title("Reference")
    st.button("Rerun")


def other() -> None:
    st.title("Other")
    st.button("Rerun")


st.navigation(
    [st.Page(reference, title="Reference", default=True), st.Page(other, title="Other")],
    expanded=True,
).run()
