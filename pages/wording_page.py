"""Wording: edit refusal messages with live preview and lint, propose, sign off, compare
versions, history, and the production check of what the assistant actually said."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from pages import ui
from review.core.errors import (
    WorkbenchError,
)
from review.core.identity import Permission, Role
from review.policy import signoff
from review.wording import compare, drafts, production, signing, versions
from review.wording import terms as wording_terms
from review.wording.findings import RULES, Finding
from review.wording.lint import lint
from review.wording.messages import (
    EXAMPLE_VALUES,
    MESSAGE_KEY_RE,
    REQUIRED_KEY_MEANING,
    parse_wording,
    placeholders_in,
    preview,
)

engine = ui.engine()
actor = ui.actor()

DRAFT = "wd_draft"  # message key -> {"text": ..., "description": ...}
BASE = "wd_base"  # id of the version the draft started from (None: the shipped file)
PAGE_SIZE = 25
CARET_WIDTH = 72  # characters per line of the caret view
DIFF_LEGEND = "Word diff: [-removed-] {+added+}"
ASK_BEFORE = 20_000  # unchecked refusal texts above which the production check waits for a click

st.title("Wording")
try:
    current = versions.in_force(engine)
except WorkbenchError as exc:
    st.error("The refusal wording in force cannot be read.")
    st.code(str(exc), language=None)
    st.stop()
terms = wording_terms.corpus_terms(engine)
if current.version is None:
    st.warning(
        "No refusal wording has been signed in this workbench yet: the shipped file "
        "policies/refusal-wording.yaml is in force."
    )
else:
    v_in = current.version
    approved = f"{v_in.approved_on:%Y-%m-%d}" if v_in.approved_on else "?"
    st.caption(f"In force: version {v_in.number}, approved {approved} · sha256 {v_in.sha256[:12]}…")
flash = st.session_state.pop("wd_flash", None)
if flash:
    st.success(flash)

st.session_state.setdefault(DRAFT, {})
draft: dict[str, dict[str, str]] = st.session_state[DRAFT]
if not draft:
    st.session_state[BASE] = current.version_id
# Without clearance the live lint leaves out restricted titles and the ids of restricted
# documents: otherwise trying candidate titles would tell who exists. They are still checked
# when a proposal is stored and when it is signed.
if actor.clearance:
    titles = [*current.wording.restricted_titles, *terms.restricted_titles]
    doc_ids = list(terms.doc_ids)
else:
    titles = []
    doc_ids = [d for d in terms.doc_ids if d not in set(terms.restricted_doc_ids)]
contacts = list(current.wording.allowed_contacts)


def lint_text(text: str, key: str | None) -> list[Finding]:
    return lint(text, key=key, restricted_titles=titles, allowed_contacts=contacts, doc_ids=doc_ids)


def show_findings(text: str, findings: list[Finding], what: str) -> None:
    """Findings as a caret view (plain text) and a table; never HTML."""
    if not findings:
        st.success(f"Lint: no findings in the {what}.")
        return
    st.warning(f"Lint: {len(findings)} finding(s) in the {what}.")
    st.code(wording_terms.caret_lines(text, findings, width=CARET_WIDTH), language=None)
    st.dataframe(
        wording_terms.findings_frame(text, findings),
        hide_index=True,
        width="stretch",
        height=ui.table_height(len(findings)),
    )


def meaning(key: str) -> str:
    return REQUIRED_KEY_MEANING.get(key, "custom message")


def clear_draft() -> None:
    st.session_state[DRAFT] = {}
    for k in list(st.session_state):
        if str(k).startswith(("wd_text_", "wd_desc_")):
            del st.session_state[k]


tab_edit, tab_sign, tab_cmp, tab_hist, tab_prod = st.tabs(
    ["Edit and propose", "Sign-off", "Compare versions", "History", "Production check"]
)


# ---------------------------------------------------------------------------------------
def edit_tab() -> None:
    if draft and st.session_state.get(BASE) != current.version_id:
        st.warning(
            f"The wording in force changed while you were drafting ({current.label} is in "
            "force now). Check your edits against it, then rebase the draft to propose it."
        )
        if st.button("Rebase my draft onto the wording in force", key="wd_rebase"):
            st.session_state[BASE] = current.version_id
            st.rerun()
    pending_key = st.session_state.pop("wd_select", None)
    keys = list(current.wording.messages) + [k for k in draft if k not in current.wording.messages]
    if pending_key in keys:
        st.session_state["wd_key"] = pending_key
    key = st.selectbox(
        "Message",
        keys,
        key="wd_key",
        format_func=lambda k: f"{k} · {meaning(k)}",
    )
    if draft:
        st.caption("Edited in your draft: " + ", ".join(draft))
    with st.expander("Add a custom message key"):
        new_key = st.text_input(
            "New key", key="wd_new_key", help="Capital letters, digits and _, like R2_BILLING"
        )
        if st.button("Add message", key="wd_add"):
            candidate = new_key.strip()
            if not MESSAGE_KEY_RE.match(candidate):
                st.error(
                    "Message keys use capital letters, digits and _, starting with a letter "
                    "(like R2_BILLING)."
                )
            elif candidate in keys:
                st.error(f"{candidate} exists already: pick it in the list above.")
            else:
                draft[candidate] = {"text": "", "description": ""}
                st.session_state["wd_select"] = candidate
                st.rerun()
    base_msg = current.wording.messages.get(key)
    tkey, dkey = f"wd_text_{key}", f"wd_desc_{key}"
    if tkey not in st.session_state:
        st.session_state[tkey] = draft.get(key, {}).get("text", base_msg.text if base_msg else "")
    if dkey not in st.session_state:
        st.session_state[dkey] = draft.get(key, {}).get(
            "description", base_msg.description if base_msg else ""
        )
    text = st.text_area(
        "Text",
        key=tkey,
        height=130,
        help="Placeholders such as {missing_item} or {role} are filled when the message is "
        "shown; they are declared from the text.",
    )
    description = st.text_input("When it is used (description)", key=dkey)
    if base_msg is not None and text == base_msg.text and description == base_msg.description:
        draft.pop(key, None)
    else:
        draft[key] = {"text": text, "description": description}

    names = placeholders_in(text)
    values: dict[str, str] = {}
    if names:
        st.caption("Example values for the preview (edit them to try other wording)")
        cols = st.columns(min(3, len(names)))
        for i, name in enumerate(names):
            values[name] = cols[i % len(cols)].text_input(
                "{" + name + "}",
                value=EXAMPLE_VALUES.get(name, f"[{name.replace('_', ' ')}]"),
                key=f"wd_val_{name}",
            )
    rendered: str | None
    try:
        rendered = preview(text, values) if text.strip() else None
    except WorkbenchError as exc:
        st.error(ui.plain(exc))
        rendered = None
    if rendered is not None:
        ui.text(rendered, label="Preview: what the customer reads")
    template_findings = lint_text(text, key)
    show_findings(text, template_findings, "template")
    if not actor.clearance:
        st.caption(
            "Titles of restricted documents are checked when you submit the draft (checking "
            "them live needs clearance)."
        )
    if rendered is not None:
        template_rules = {f.rule for f in template_findings}
        new_rules = [f for f in lint_text(rendered, key) if f.rule not in template_rules]
        if new_rules:
            st.caption("The preview with these values trips more rules:")
            show_findings(rendered, new_rules, "preview")

    st.subheader("Your draft")
    if not draft:
        st.caption("No edits yet: change a message above. Edits are kept while you switch keys.")
        return
    edits = {
        k: drafts.MessageDraft(v["text"], v["description"] if v["description"].strip() else None)
        for k, v in draft.items()
    }
    try:
        draft_text = drafts.draft_yaml(current.text, edits, source="your draft")
    except WorkbenchError as exc:
        st.error("The draft is not valid yet:")
        st.code(str(exc), language=None)
        draft_text = None
    if draft_text is not None:
        new = parse_wording(draft_text)
        changes = [c for c in compare.compare(current.wording, new) if c.status != "unchanged"]
        lint_counts = wording_terms.lint_wording(new, terms)
        frame = compare.compare_frame(changes)
        frame["lint findings"] = [len(lint_counts.get(c.key, [])) for c in changes]
        st.dataframe(frame, hide_index=True, width="stretch")
        parent = current.wording if current.version is not None else None
        st.caption(versions.compliance_reason(parent, new))
        total = sum(len(v) for v in lint_counts.values())
        if total:
            st.warning(
                f"{total} lint finding(s) in the draft. You may still propose it: the findings "
                "are stored with the proposal and shown to the approvers, and approving needs a "
                "note saying why they are acceptable."
            )
    if st.button("Discard my draft", key="wd_discard"):
        clear_draft()
        st.rerun()
    if not actor.can(Permission.propose_policy):
        st.info(
            "Proposals come from product owners and compliance; you can still try wording and "
            "see the lint here."
        )
        return
    with st.form("wd_propose"):
        rationale = st.text_area(
            "Why this change (goes into the change record)", key="wd_rationale"
        )
        go = st.form_submit_button("Submit for approval", type="primary", key="wd_submit")
    if go:
        with ui.reported():
            vid = signing.propose_edits(
                engine, actor, edits, rationale, based_on=st.session_state.get(BASE)
            )
            v = signoff.get_version(engine, vid)
            clear_draft()
            st.session_state["wd_flash"] = (
                f"Proposed as version {v.number}. Needs: {', '.join(v.missing_roles)} (not you)."
            )
            st.rerun()


with tab_edit:
    edit_tab()


# ---------------------------------------------------------------------------------------
def sign_tab() -> None:
    pend = versions.pending(engine)
    if not pend:
        st.info("No wording change is waiting for sign-off.")
        return
    for v in pend:
        r = signing.review_version(engine, v.id, terms, reveal_restricted=actor.clearance)
        with st.container(border=True):
            st.subheader(f"Version {v.number}")
            st.caption(f"Proposed by {v.author} on {v.created_at:%Y-%m-%d %H:%M} UTC")
            ui.text(v.rationale, label="Rationale")
            st.caption(
                f"Compared with {r.parent_label}. {r.compliance_reason} Still needed: "
                f"{', '.join(v.missing_roles) or 'nothing'} · signatures so far: "
                + (", ".join(f"{s.role} {s.meaning} ({s.signer})" for s in v.signatures) or "none")
            )
            if r.stale_parent:
                st.error(r.stale_parent)
            st.caption(DIFF_LEGEND)
            for c in r.changes:
                if c.status == "unchanged":
                    continue
                st.caption(
                    f"{c.key} · {meaning(c.key)} · {c.status}"
                    + (f" ({', '.join(c.fields)})" if c.fields else "")
                    + (" · compliance signs this key" if c.needs_compliance else "")
                )
                st.code(c.diff or "(empty)", language=None, wrap_lines=True)
                if c.new_text:
                    with ui.reported():
                        ui.text(preview(c.new_text), label="Preview with example values")
            if r.settings:
                st.dataframe(
                    pd.DataFrame(r.settings, columns=["setting", "change"]),
                    hide_index=True,
                    width="stretch",
                )
            if r.lint_total:
                st.warning(
                    f"{r.lint_total} lint finding(s) in this version: approving needs a note "
                    "saying why they are acceptable."
                )
                for key, fs in r.findings.items():
                    if fs:
                        st.caption(f"{key}")
                        st.code(
                            wording_terms.caret_lines(
                                r.wording.messages[key].text, fs, width=CARET_WIDTH
                            ),
                            language=None,
                        )
                        st.dataframe(
                            wording_terms.findings_frame(r.wording.messages[key].text, fs),
                            hide_index=True,
                            width="stretch",
                        )
            else:
                st.success("Lint: no findings in any message of this version.")
            roles = [
                role
                for role in (Role.product_owner, Role.compliance)
                if role in actor.roles and role.value in v.missing_roles
            ]
            if actor.email == v.author:
                st.info("You proposed this change: someone else must sign it.")
            elif roles and actor.can(Permission.approve_policy):
                with st.form(f"wd_sign_{v.id}"):
                    role = st.selectbox("Sign as", [x.value for x in roles], key=f"wd_role_{v.id}")
                    note = st.text_area(
                        "Note (required to reject, and to approve wording with lint findings)",
                        key=f"wd_note_{v.id}",
                    )
                    c1, c2 = st.columns(2)
                    approve = c1.form_submit_button(
                        "Approve", type="primary", key=f"wd_approve_{v.id}"
                    )
                    reject = c2.form_submit_button("Reject", key=f"wd_reject_{v.id}")
                if approve or reject:
                    with ui.reported():
                        signing.sign_wording(
                            engine,
                            actor,
                            v.id,
                            "approve" if approve else "reject",
                            role=Role(role),
                            note=note,
                        )
                        st.session_state["wd_flash"] = (
                            f"Version {v.number} {'approved' if approve else 'rejected'} as {role}."
                        )
                        st.rerun()
            elif actor.can(Permission.approve_policy):
                st.caption(
                    "Your signature is not needed on this version: it needs "
                    f"{', '.join(v.missing_roles) or 'nothing more'}."
                )
            else:
                st.caption("Signatures come from product owners and compliance.")


with tab_sign:
    sign_tab()


# ---------------------------------------------------------------------------------------
def version_label(vid: int | None, views: dict[int, signoff.VersionView]) -> str:
    if vid is None:
        return "shipped file (policies/refusal-wording.yaml)"
    v = views[vid]
    return f"version {v.number} ({v.status})"


def compare_tab() -> None:
    allv = versions.versions(engine)
    views = {v.id: v for v in allv}
    options: list[int | None] = [None, *[v.id for v in reversed(allv)]]
    in_force_at = options.index(current.version_id)
    c1, c2 = st.columns(2)
    a = c1.selectbox(
        "Compare",
        options,
        index=in_force_at,
        key="wd_cmp_a",
        format_func=lambda x: version_label(x, views),
    )
    b = c2.selectbox(
        "with",
        options,
        index=len(options) - 1,
        key="wd_cmp_b",
        format_func=lambda x: version_label(x, views),
    )
    try:
        old, old_text = versions.wording_of(engine, a)
        new, new_text = versions.wording_of(engine, b)
    except WorkbenchError as exc:
        st.error(ui.plain(exc))
        return
    changes = compare.compare(old, new)
    changed = [c for c in changes if c.status != "unchanged"]
    if not changed and not compare.setting_changes(old, new):
        st.info("The two wordings say the same thing.")
    st.dataframe(compare.compare_frame(changes), hide_index=True, width="stretch")
    if changed:
        st.caption(DIFF_LEGEND)
    for c in changed:
        st.caption(f"{c.key} · {c.status}" + (f" ({', '.join(c.fields)})" if c.fields else ""))
        st.code(c.diff or "(empty)", language=None, wrap_lines=True)
    settings = compare.setting_changes(old, new, reveal_restricted=actor.clearance)
    if settings:
        st.dataframe(
            pd.DataFrame(settings, columns=["setting", "change"]), hide_index=True, width="stretch"
        )
    if actor.clearance:
        with st.expander("Line diff of the YAML files"):
            st.code(
                compare.yaml_diff(
                    old_text, new_text, version_label(a, views), version_label(b, views)
                )
                or "(identical)",
                language="diff",
            )
    else:
        st.caption(
            "The line diff of the YAML files lists the titles of restricted documents: it needs "
            "clearance. The message changes above are complete."
        )


with tab_cmp:
    compare_tab()


# ---------------------------------------------------------------------------------------
def history_tab() -> None:
    allv = versions.versions(engine)
    if not allv:
        st.info("No wording version has been proposed yet.")
        return
    st.dataframe(
        pd.DataFrame(
            [
                {
                    "version": v.number,
                    "status": v.status,
                    "author": v.author,
                    "created": v.created_at,
                    "approved": v.approved_on,
                    "changed keys": ", ".join((v.snapshot or {}).get("changed_keys", [])),
                    "lint findings": (v.snapshot or {}).get("lint_total"),
                    "sha256": v.sha256[:16],
                    "signatures": "; ".join(
                        f"{s.role}: {s.meaning} by {s.signer} at {s.at:%Y-%m-%d %H:%M}"
                        + (f" ({s.note})" if s.note else "")
                        for s in v.signatures
                    ),
                }
                for v in allv
            ]
        ),
        hide_index=True,
        width="stretch",
    )
    problems = signoff.verify_chain(engine)
    (st.error if problems else st.success)(
        "Sign-off chain: "
        + ("; ".join(problems) if problems else "intact (every signature hash verifies)")
    )
    if current.version is not None and not actor.clearance:
        st.caption(
            "The approved file lists titles of restricted documents: downloading it needs "
            "clearance."
        )
    elif current.version is not None:
        st.download_button(
            f"Download the approved wording (version {current.version.number}, YAML)",
            current.text,
            file_name="refusal-wording.yaml",
            mime="application/yaml",
            key="wd_download",
        )


with tab_hist:
    history_tab()


# ---------------------------------------------------------------------------------------
def production_tab() -> None:
    todo = production.unchecked_count(engine)
    if todo > ASK_BEFORE and not st.session_state.get("wd_prod_go"):
        st.info(
            f"{todo:,} refusal texts have not been checked with the wording in force yet. The "
            "first check lints them all (a few thousand a second); later checks only look at "
            "traces imported since."
        )
        if st.button("Check them now", key="wd_prod_run"):
            st.session_state["wd_prod_go"] = True
            st.rerun()
        return
    s = production.production_counts(engine, actor)
    if s.checked == 0 and s.hidden_restricted == 0:
        st.info(
            "No refusal texts to check yet: import production traces first. Refusals, "
            "follow-ups, escalations, partial answers and caveat answers are linted."
        )
        return
    version = f"version {s.wording_version}" if s.wording_version else "the shipped file"
    c1, c2, c3 = st.columns(3)
    c1.metric("Refusal texts checked", s.checked)
    c2.metric("With findings", s.offending)
    c3.metric("Share", f"{s.offending / s.checked:.1%}" if s.checked else "—")
    st.caption(
        f"Linted with the approved contacts of {version}, the restricted titles of the corpus "
        "and every document id."
        + (
            f" {s.hidden_restricted} offending restricted trace(s) are hidden: seeing them "
            "needs clearance."
            if s.hidden_restricted
            else ""
        )
    )
    st.dataframe(
        pd.DataFrame(
            [{"rule": r, "what it catches": RULES[r], "traces": n} for r, n in s.per_rule.items()]
        ),
        hide_index=True,
        width="stretch",
    )
    rule = st.selectbox(
        "Show traces tripping",
        ["", *RULES],
        key="wd_prod_rule",
        format_func=lambda r: "(any rule)" if r == "" else r,
    )
    total = s.per_rule[rule] if rule else s.offending
    if total == 0:
        st.info("No trace trips this rule.")
        return
    page = ui.paginate(total, "wd_prod", PAGE_SIZE)
    result = production.production_findings(engine, actor, page, PAGE_SIZE, rule=rule or None)
    st.dataframe(
        result.frame(),
        hide_index=True,
        width="stretch",
        height=ui.table_height(len(result.rows)),
    )
    if not result.rows:
        return
    by_id = {r.trace_id: r for r in result.rows}
    pick = st.selectbox("Open a trace of this page", list(by_id), key="wd_prod_trace")
    row = by_id[pick]
    st.text(  # the trace id comes from the imported file: text, not markdown
        f"{row.trace_id} · {row.at:%Y-%m-%d %H:%M} UTC · decision {row.decision or '—'}"
        + (f" ({row.reason_code})" if row.reason_code else "")
        + (f" · checked as {row.key}" if row.key else "")
        + (" · restricted trace" if row.restricted else "")
    )
    ui.text(row.text, label="Final text shown to the user")
    if row.masked:
        st.caption("Names of restricted documents are masked: seeing them needs clearance.")
    st.dataframe(
        pd.DataFrame(
            [{"rule": f.rule, "excerpt": f.excerpt, "why": f.explanation} for f in row.findings]
        ),
        hide_index=True,
        width="stretch",
    )


with tab_prod:
    production_tab()
