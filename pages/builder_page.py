"""Case builder: controlled edits of a base case's documents saved as family variants, and the
family view (?family=KEY) with consistency checks, suggestions to confirm and required claims.

This file routes by query parameters; the views are in pages/builder/ and what they compute
(parsed inputs, labels, tables) in review/builder. Document text is untrusted: it is shown
with st.code and dataframe cells only; diffs are escaped before their changes are marked with
[-removed-] and {+added+}.
"""

from __future__ import annotations

import streamlit as st

from pages import ui
from pages.builder.base_case import builder_view
from pages.builder.family import family_view
from pages.builder.landing import landing
from pages.builder.nav import go


def main() -> None:
    engine = ui.engine()
    actor = ui.actor()
    tax = ui.tax()
    st.title("Case builder")
    family_param = st.query_params.get("family")
    case_param = ui.query_case()
    if (family_param or case_param is not None) and st.button(
        "← All base cases and families", key="bld_back"
    ):
        go()
    if family_param:
        family_view(engine, actor, tax, family_param)
    elif case_param is not None:
        builder_view(engine, actor, tax, case_param)
    else:
        landing(engine, actor, tax)


if __name__ == "__main__":
    main()
