"""The browser benchmark's reference: the least a Streamlit page can be (a title and a button),
served and timed the same way as the workbench (benchmarks/browser.py)."""

import streamlit as st

st.title("Reference")
st.button("Rerun")
