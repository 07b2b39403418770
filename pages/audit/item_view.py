"""One audit item on the My queue tab: the trace as the reviewer reads it (query, answer,
signals), its retrieved chunks in full in a scrolling panel beside the verdict form, the
wording rules a refusal breaks, and the claim editor that cuts the answer into claims, each
citing chunks picked from the trace's own (keys 1–4 judge the claim in hand). Edited claims
are the reviewer's draft, saved in the database at each edit (another server shows them when
the trace opens there) until the verdict is saved."""

from __future__ import annotations

from typing import Any

import streamlit as st
from sqlalchemy import Engine

from pages import ui
from review.audits import display, forms, items, verdicts
from review.core import readable, userdrafts
from review.core.identity import Actor
from review.wording import production
from review.wording.findings import RULE_TITLES


def next_uid() -> int:
    """A widget-key id for a claim row that stays unique across reruns of this session."""
    st.session_state["aud_uid"] = int(st.session_state.get("aud_uid", 0)) + 1
    return int(st.session_state["aud_uid"])


def show_item(view: items.ItemView, plan_items: int | None) -> None:
    """The trace: where it sits, what was asked and said, and its signals."""
    st.subheader(f"Trace {ui.plain(view.trace_id)}")
    st.caption(ui.plain(display.item_caption(view, plan_items, ui.tax())))
    ui.text(view.query, label="Query")
    if view.rewritten_query:
        ui.text(view.rewritten_query, label="Rewritten query")
    ui.text(view.answer_text or "(no text)", label="What the assistant said")
    signals = display.signals_frame(view)
    st.dataframe(
        signals,
        hide_index=True,
        width="stretch",
        height=ui.table_height(len(signals), 8),
    )


def chunks_panel(view: items.ItemView) -> None:
    """Every retrieved chunk in full, in rank order, in a panel that scrolls on its own."""
    st.caption(f"Retrieved chunks ({len(view.chunks)}; {len(view.context_ids)} reached the model)")
    if not view.chunks:
        st.info("Retrieval returned nothing for this request.")
        return
    with st.container(height=640, key=f"aud_chunks_{view.id}"):
        for c in view.chunks:
            with st.container(border=True):
                rank = f"#{c.rank:d}" if c.rank is not None else "#?"
                doc = f"{c.doc_id}@{c.doc_version}" if c.doc_id else "no document"
                st.caption(
                    ui.plain(f"{rank} · {doc} · score {readable.number(c.score)} · {c.chunk_id}")
                )
                if c.filtered:
                    st.warning("Not in the context: the authorization filter removed it.")
                ui.document_body(c.text)


def wording_check(engine: Engine, actor: Actor, view: items.ItemView) -> None:
    """The wording rules the trace's final text breaks (nothing when it breaks none)."""
    wording = production.trace_findings(engine, actor, view.trace_pk)
    if not wording.findings:
        return
    with st.container(border=True):
        st.markdown("**Refusal wording check** (the wording in force)")
        st.caption(
            "The final text breaks these wording rules; if they hold, the verdict is a wording "
            "violation."
        )
        st.dataframe(
            display.findings_frame(wording.findings, RULE_TITLES), hide_index=True, width="stretch"
        )


def claims_key(item_id: int) -> str:
    return f"aud_claims_{item_id}"


def at_key(item_id: int) -> str:
    """Where the claim in hand (0-based) is kept: the one the verdict keys judge."""
    return f"aud_claim_at_{item_id}"


def _judge(item_id: int, rows: list[dict[str, Any]], verdict: str) -> None:
    """A verdict key: give the claim in hand ``verdict`` and take the next claim (a button
    callback, so it runs before the claim's widgets are drawn)."""
    at = int(st.session_state.get(at_key(item_id), 0))
    if not 0 <= at < len(rows):
        return
    row = rows[at]
    row["verdict"] = verdict
    st.session_state[f"aud_cv_{item_id}_{row['uid']}"] = verdict
    st.session_state[at_key(item_id)] = min(at + 1, len(rows) - 1)


def _move(item_id: int, step: int, count: int) -> None:
    at = int(st.session_state.get(at_key(item_id), 0)) + step
    st.session_state[at_key(item_id)] = max(0, min(at, count - 1))


def claim_keys(view: items.ItemView, rows: list[dict[str, Any]]) -> int:
    """The verdict keys of the claim in hand (1–4; J and K move between claims);
    returns the claim in hand (0-based)."""
    key = at_key(view.id)
    at = max(0, min(int(st.session_state.get(key, 0)), len(rows) - 1))
    st.session_state[key] = at
    if not rows:
        return at
    st.caption(f"Keys judge claim {at + 1:d} of {len(rows):d} (▶) and move to the next one.")
    cols = [c for _ in range(3) for c in st.columns(2)]  # two a row: the labels read whole
    for col, (verdict, letter) in zip(cols, forms.CLAIM_KEYS.items(), strict=False):
        col.button(
            ui.plain(forms.claim_verdict_label(verdict)),
            key=f"aud_key_{verdict}_{view.id}",
            shortcut=letter,
            on_click=_judge,
            args=(view.id, rows, str(verdict)),
            width="stretch",
        )
    cols[-2].button(
        "Previous claim",
        key=f"aud_prevclaim_{view.id}",
        shortcut="k",
        on_click=_move,
        args=(view.id, -1, len(rows)),
        disabled=at == 0,
        width="stretch",
    )
    cols[-1].button(
        "Next claim",
        key=f"aud_nextclaim_{view.id}",
        shortcut="j",
        on_click=_move,
        args=(view.id, 1, len(rows)),
        disabled=at >= len(rows) - 1,
        width="stretch",
    )
    return at


def draft_key(item_id: int) -> str:
    """The key of the claims being edited in the database (userdrafts)."""
    return f"audit.claims.{item_id}"


def _kept(item_id: int) -> str:
    """Where the session keeps the claims as last saved: (base verdict, start, saved, version)."""
    return f"aud_claims_kept_{item_id}"


def _payload(base: int | None, rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "base": base,
        "rows": [
            {"text": str(r["text"]), "cited": str(r["cited"]), "verdict": r["verdict"]}
            for r in rows
        ],
    }


def _rows_of(payload: dict[str, Any]) -> list[dict[str, Any]] | None:
    rows = payload.get("rows")
    if not isinstance(rows, list):
        return None
    out: list[dict[str, Any]] = []
    for r in rows:
        if not (
            isinstance(r, dict)
            and isinstance(r.get("text"), str)
            and isinstance(r.get("cited"), str)
            and (r.get("verdict") is None or isinstance(r.get("verdict"), str))
        ):
            return None
        out.append(
            {"uid": next_uid(), "text": r["text"], "cited": r["cited"], "verdict": r["verdict"]}
        )
    return out


def start_claims(view: items.ItemView, mine: verdicts.VerdictView | None) -> None:
    """Fill the claim editor: the reviewer's draft of these claims saved in the database (on
    any server), else their saved claims, else the answer split into claims."""
    base = mine.id if mine else None
    start = forms.claim_rows(view, mine, next_uid)
    saved = userdrafts.load_draft(ui.engine(), ui.actor(), draft_key(view.id))
    rows = _rows_of(saved.payload) if saved else None
    if saved is not None and rows is not None and saved.payload.get("base") != base:
        st.warning(
            "Your claim draft on this trace was started before your last saved verdict: "
            "check it against that verdict before you save."
        )
    st.session_state[claims_key(view.id)] = rows if rows is not None else start
    st.session_state[_kept(view.id)] = (
        base,
        _payload(base, start),
        saved.payload if saved else None,
        saved.version if saved else None,
    )


def keep_claims(view: items.ItemView, rows: list[dict[str, Any]]) -> None:
    """Save the claims as the reviewer's draft when they changed (dropped when they are back
    to where they started); a draft saved meanwhile in another tab is not overwritten."""
    base, start, saved, version = st.session_state[_kept(view.id)]
    now = _payload(base, rows)
    target = None if now == start else now
    if target == saved:
        return
    actor, key = ui.actor(), draft_key(view.id)
    if target is None:
        done: object = ui.transact(
            lambda s: userdrafts.discard_draft(s, actor, key, version),
            "Your claim draft was not dropped. ",
        )
        if done is not None:
            st.session_state[_kept(view.id)] = (base, start, None, None)
        return
    new = ui.transact(
        lambda s: userdrafts.save_draft(s, actor, key, target, version),
        "Your last claim edit was not saved as a draft (it is still here). ",
    )
    if new is not None:
        st.session_state[_kept(view.id)] = (base, start, target, new)
        return
    newer = userdrafts.load_draft(ui.engine(), actor, key)
    if (newer.version if newer else None) != version and st.button(
        "Save these claims over the draft of the other tab", key=f"aud_claims_over_{view.id}"
    ):
        st.session_state[_kept(view.id)] = (
            base,
            start,
            newer.payload if newer else None,
            newer.version if newer else None,
        )
        st.rerun()


def drop_claims_draft(actor: Actor, item_id: int) -> None:
    """The verdict was saved: its claims are no draft any more (one saved in another tab
    since is kept, and said)."""
    kept = st.session_state.pop(_kept(item_id), None)
    st.session_state.pop(claims_key(item_id), None)
    version = kept[3] if kept else None
    if version is not None:
        ui.transact(
            lambda s: userdrafts.discard_draft(s, actor, draft_key(item_id), version),
            "Your claim draft was kept. ",
        )


def claim_editor(view: items.ItemView) -> list[items.ClaimDraft]:
    """The claims of the answer, editable, with the check of their citations; returns them."""
    key = claims_key(view.id)
    rows: list[dict[str, Any]] = st.session_state[key]
    st.caption(
        "Each claim with the chunks it cites, picked from the trace's chunks. The answer passes "
        "only if every claim is supported by a chunk that was in the context."
    )
    by_id = {c.chunk_id: c for c in view.chunks}
    at = claim_keys(view, rows)
    drafts: list[items.ClaimDraft] = []
    remove: int | None = None
    for n, row in enumerate(rows, start=1):
        uid = row["uid"]
        here = "▶ " if n - 1 == at else ""
        row["text"] = st.text_area(
            f"{here}Claim {n:d}", row["text"], key=f"aud_ct_{view.id}_{uid}", height=68
        )
        cited = forms.parse_cited(str(row["cited"]))
        picked = st.multiselect(
            f"Cites (claim {n:d})",
            forms.cited_options(view, cited),
            default=[c for c in cited if c],
            format_func=lambda cid: display.chunk_label(by_id.get(cid), cid),
            key=f"aud_cc_{view.id}_{uid}",
            placeholder="Pick the chunks it cites",
        )
        row["cited"] = ", ".join(picked)
        c3, c4 = st.columns([5, 1], vertical_alignment="bottom")
        vkey = f"aud_cv_{view.id}_{uid}"
        options = forms.claim_verdict_options()
        if vkey not in st.session_state:  # the row's verdict; the keys set it the same way
            st.session_state[vkey] = options[forms.claim_verdict_index(row["verdict"])]
        chosen = c3.selectbox(
            f"Verdict (claim {n:d})", options, format_func=forms.claim_verdict_label, key=vkey
        )
        row["verdict"] = forms.verdict_of_choice(chosen)
        if c4.button("✕", key=f"aud_cr_{view.id}_{uid}", help=f"Remove claim {n:d}"):
            remove = uid
        drafts.append(forms.draft_of_row(row))
    if remove is not None:
        st.session_state[key] = [r for r in rows if r["uid"] != remove]
        st.rerun()
    # a row that sizes each button to its label: fixed column fractions cut the labels
    # ("Add…", "Spli…") when the claims sit in the narrow half of the page at 1280 px
    with st.container(horizontal=True, gap="small"):
        add = st.button("Add a claim", key=f"aud_add_{view.id}")
        resplit = st.button("Split the answer again", key=f"aud_resplit_{view.id}")
    if add:
        rows.append(forms.claim_row(next_uid()))
        st.rerun()
    if resplit:
        st.session_state[key] = forms.claim_rows(view, None, next_uid)
        st.rerun()
    if drafts and all(d.text.strip() for d in drafts):
        report = items.check_claims(drafts, view.context_ids)
        frame = report.to_frame()
        st.dataframe(
            frame, hide_index=True, width="stretch", height=ui.table_height(len(frame), 10)
        )
        st.caption(ui.plain(display.claims_summary(report)))
    keep_claims(view, rows)
    return drafts
