"""The "Edit and propose" tab, top half: pick a message (or add a custom key), edit its text
and description with a live preview and lint. Each edit is kept in the person's draft and saved
in the database (pages/wording/common.py), so it survives switching keys, a reload and a
server going down; the draft itself is shown and proposed by pages/wording/proposal.py."""

from __future__ import annotations

import streamlit as st

from pages import ui
from pages.wording.common import BASE, WordingContext, keep_draft, show_findings
from pages.wording.proposal import draft_section
from review.core import clearance
from review.core.errors import WorkbenchError
from review.wording import editing
from review.wording.messages import Message, placeholders_in, preview


def _rebase_warning(ctx: WordingContext) -> None:
    current = ctx.current
    if ctx.draft and st.session_state.get(BASE) != current.version_id:
        st.warning(
            f"The wording in force changed while you were drafting ({ui.plain(current.label)} is "
            "in force now). Check your edits against it, then rebase the draft to propose it."
        )
        if st.button("Rebase my draft onto the wording in force", key="wd_rebase"):
            st.session_state[BASE] = current.version_id
            st.rerun()


def _add_key(ctx: WordingContext, keys: list[str]) -> None:
    with st.expander("Add a custom message key"):
        new_key = st.text_input(
            "New key", key="wd_new_key", help="Capital letters, digits and _, like R2_BILLING"
        )
        if st.button("Add message", key="wd_add"):
            candidate = new_key.strip()
            problem = editing.new_key_problem(candidate, keys)
            if problem:
                ui.error(problem)
            else:
                ctx.draft[candidate] = {"text": "", "description": ""}
                st.session_state["wd_select"] = candidate
                st.rerun()


def _pick_key(ctx: WordingContext) -> str:
    """The message picker (a key just added is selected); returns the chosen key."""
    pending_key = st.session_state.pop("wd_select", None)
    keys = editing.message_keys(ctx.current.wording, ctx.draft)
    if pending_key in keys:
        st.session_state["wd_key"] = pending_key
    key = st.selectbox(
        "Message",
        keys,
        key="wd_key",
        format_func=lambda k: f"{k} · {editing.key_meaning(k)}",
    )
    if ctx.draft:
        st.caption("Edited in your draft: " + ui.plain(", ".join(ctx.draft)))
    _add_key(ctx, keys)
    return key


def _edit_fields(ctx: WordingContext, key: str, base_msg: Message | None) -> str:
    """The text and description of ``key``, recorded in the draft; returns the text."""
    tkey, dkey = f"wd_text_{key}", f"wd_desc_{key}"
    start_text, start_description = editing.start_values(ctx.draft, key, base_msg)
    if tkey not in st.session_state:
        st.session_state[tkey] = start_text
    if dkey not in st.session_state:
        st.session_state[dkey] = start_description
    text = st.text_area(
        "Text",
        key=tkey,
        height=130,
        help="Placeholders such as {missing_item} or {role} are filled when the message is "
        "shown; they are declared from the text.",
    )
    description = st.text_input("When it is used (description)", key=dkey)
    editing.record_edit(ctx.draft, key, text, description, base_msg)
    keep_draft(ctx.engine, ctx.actor, ctx.current.version_id)
    return text


def _example_values(text: str) -> dict[str, str]:
    """A field per placeholder of ``text``, filled with an example value."""
    names = placeholders_in(text)
    values: dict[str, str] = {}
    if names:
        st.caption("Example values for the preview (edit them to try other wording)")
        cols = st.columns(min(3, len(names)))
        for i, name in enumerate(names):
            values[name] = cols[i % len(cols)].text_input(
                ui.plain("{" + name + "}"),
                value=editing.example_value(name),
                key=f"wd_val_{name}",
            )
    return values


def _preview_and_lint(ctx: WordingContext, key: str, text: str) -> None:
    values = _example_values(text)
    rendered: str | None
    try:
        rendered = preview(text, values) if text.strip() else None
    except WorkbenchError as exc:
        ui.show_error(exc)
        rendered = None
    if rendered is not None:
        ui.text(rendered, label="Preview: what the customer reads")
    template_findings = ctx.live.lint(text, key)
    show_findings(text, template_findings, "template")
    if not clearance.cleared(ctx.actor):
        st.caption(
            "Titles of restricted documents are checked when you submit the draft (checking "
            "them live needs clearance)."
        )
    if rendered is not None:
        new_rules = editing.preview_only_findings(template_findings, ctx.live.lint(rendered, key))
        if new_rules:
            st.caption("The preview with these values trips more rules:")
            show_findings(rendered, new_rules, "preview")


def edit_tab(ctx: WordingContext) -> None:
    _rebase_warning(ctx)
    key = _pick_key(ctx)
    text = _edit_fields(ctx, key, ctx.current.wording.messages.get(key))
    _preview_and_lint(ctx, key, text)
    draft_section(ctx)
