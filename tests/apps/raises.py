"""An app whose run fails unexpectedly, quoting a server path: what does the browser show?"""

from __future__ import annotations

import streamlit as st

st.title("About to fail")
raise RuntimeError("cannot open /srv/workbench/secret-dir/workbench.db: disk I/O error")
