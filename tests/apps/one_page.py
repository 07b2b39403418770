"""A minimal router for testing one page in AppTest before (or apart from) app.py.

The page path and the acting user come from the environment (see tests/pagetest.py).
"""

from __future__ import annotations

import os

import streamlit as st

from pages import ui
from review.admin import users

engine = ui.engine()
row = users.get_by_email(engine, os.environ["WB_TEST_USER"])
if row is None:
    st.error("unknown test user")
    st.stop()
st.session_state[ui.ACTOR_KEY] = users.to_actor(row)
st.navigation([st.Page(os.environ["WB_TEST_PAGE"], default=True)]).run()
