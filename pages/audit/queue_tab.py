"""The My queue tab: the reviewer's progress on the batch, the next trace to judge (reserved for
them), the verdict form with its claim review, the verdicts on the trace once theirs is saved,
promotion to an evaluation case, and their verdict history."""

from __future__ import annotations

import streamlit as st
from sqlalchemy import Engine
from sqlalchemy.orm import Session
from streamlit.delta_generator import DeltaGenerator

from pages import keyboard, ui
from pages.audit.item_view import (
    chunks_panel,
    claim_editor,
    claims_key,
    drop_claims_draft,
    show_item,
    start_claims,
    wording_check,
)
from review.audits import display, forms, items, promote, queue, verdicts, vocabulary
from review.audits.plans import PlanView
from review.core import readable
from review.core.errors import WorkbenchError
from review.core.identity import Actor, Permission
from review.core.taxonomy import Taxonomy
from review.core.terms import PlanStatus


def item_key(plan: PlanView) -> str:
    return f"aud_item_{plan.id}"


def skipped_key(plan: PlanView) -> str:
    return f"aud_skipped_{plan.id}"


def load_next(engine: Engine, actor: Actor, plan: PlanView, release: int | None = None) -> None:
    """Reserve the next trace for the reviewer (not one they skipped) and link to it; with
    ``release``, the item skipped is given back in the same transaction."""
    skipped = list(st.session_state[skipped_key(plan)])

    def work(s: Session) -> int | None:
        if release is not None:
            queue.release_item(s, actor, release)
        return queue.next_item(s, actor, plan.id, exclude=skipped)

    nxt = ui.transact(work, prefix="")
    st.session_state[item_key(plan)] = nxt
    if nxt is None:
        st.query_params.pop("item", None)
    else:
        st.query_params["item"] = str(nxt)


def render(engine: Engine, actor: Actor, tax: Taxonomy, plan: PlanView | None) -> None:
    """The whole tab; ``plan`` is the batch selected above the tabs."""
    if not actor.can(Permission.audit):
        st.info("Auditing is for reviewers. Your roles do not include it.")
    elif plan is None:
        st.info("No audit batch yet: create and draw a plan on the Plans tab.")
    elif plan.status == PlanStatus.planned:
        st.info("This plan is not drawn yet: draw the sample on the Plans tab.")
    else:
        queue_of(engine, actor, tax, plan)


def queue_of(engine: Engine, actor: Actor, tax: Taxonomy, plan: PlanView) -> None:
    """Progress, then the trace in hand (or the button that fetches the next one)."""
    keyboard.install()
    prog = queue.progress(engine, actor, plan.id)
    c1, c2, c3 = st.columns(3)
    c1.metric("Judged by me", prog.mine)
    c2.metric(
        f"Traces with {readable.count(prog.overlap, 'verdict')}", f"{prog.complete} / {prog.items}"
    )
    c2.progress(prog.complete / prog.items if prog.items else 0.0)
    c3.metric("Verdicts in all", prog.verdicts)
    if prog.waiting_for_clearance:
        st.caption(
            f"{readable.count(prog.waiting_for_clearance, 'restricted trace')} "
            f"{readable.plural(prog.waiting_for_clearance, 'waits', 'wait')} for a reviewer with "
            "clearance."
        )
    st.session_state.setdefault(skipped_key(plan), [])
    item_id = st.session_state.get(item_key(plan))
    if plan.status != PlanStatus.open:
        st.info(f"This batch is {ui.plain(plan.status)}: no more verdicts are taken.")
    if item_id is None:
        if plan.status == PlanStatus.open and st.button(
            "Next trace", type="primary", key="aud_next0", shortcut="n"
        ):
            load_next(engine, actor, plan)
            st.rerun()
        if st.session_state[skipped_key(plan)] and st.button("Bring skipped traces back"):
            st.session_state[skipped_key(plan)] = []
            st.rerun()
        if prog.complete >= prog.items and prog.items:
            st.success("Every trace of this batch has its verdicts.")
        return
    view: items.ItemView | None
    try:
        view = items.get_item(engine, actor, int(item_id))
    except WorkbenchError as exc:
        ui.show_error(exc)
        view = None
    if view is not None and view.plan_id != plan.id:
        view = None
    if view is None:
        st.session_state[item_key(plan)] = None
        if st.button("Next trace", key="aud_next_missing", shortcut="n"):
            load_next(engine, actor, plan)
            st.rerun()
    else:
        show_item(view, plan.items)
        left, right = st.columns([1, 1], gap="large")
        with left:
            chunks_panel(view)
        with right:
            wording_check(engine, actor, view)
            verdict_form(engine, actor, tax, plan, view)


def verdict_form(
    engine: Engine, actor: Actor, tax: Taxonomy, plan: PlanView, view: items.ItemView
) -> None:
    """The reviewer's verdict (new or edited) with stages, notes and the claim review; after
    it is saved, the verdicts on the trace, promotion and the reviewer's history."""
    mine = verdicts.my_verdict(engine, actor, view.id)
    st.divider()
    st.subheader("Your verdict" + (" (edit)" if mine else ""))
    verdict_opts = list(vocabulary.VERDICTS)
    with keyboard.options(list(forms.VERDICT_KEYS.values()), "verdict"):
        verdict = st.radio(
            "Verdict",
            verdict_opts,
            index=verdict_opts.index(mine.verdict) if mine else None,
            format_func=lambda v: ui.plain(
                keyboard.option_label(forms.VERDICT_KEYS[v], vocabulary.VERDICTS[v])
            ),
            key=f"aud_verdict_{view.id}",
        )
    with keyboard.options(list(forms.STAGE_KEYS.values()), "stages"):
        stages = st.pills(
            "Where it failed (stage)",
            list(vocabulary.STAGES),
            selection_mode="multi",
            default=list(mine.stages) if mine else None,
            format_func=lambda s: ui.plain(
                keyboard.option_label(forms.STAGE_KEYS[s], vocabulary.STAGES[s])
            ),
            key=f"aud_stages_{view.id}",
            help="Required for a false refusal, an unsupported or a partially "
            "supported answer; empty for a correct refusal or a supported answer.",
        )
    notes = st.text_area(
        "Notes",
        mine.notes if mine else "",
        key=f"aud_notes_{view.id}",
        height=80,
        help="Required for a leak or a wording violation; never paste restricted text.",
    )
    has_answer = bool(view.answer_text.strip())
    review_claims = st.checkbox(
        "Review the answer claim by claim",
        value=forms.review_claims_by_default(view, mine),
        key=f"aud_claimreview_{view.id}",
        disabled=not has_answer,
    )
    drafts: list[items.ClaimDraft] = []
    if review_claims and has_answer:
        if claims_key(view.id) not in st.session_state:
            start_claims(view, mine)
        drafts = claim_editor(view)
    # never disabled: a disabled button's key would be dropped in silence; a save that cannot
    # be taken says why, here
    with st.container(horizontal=True, gap="small", vertical_alignment="center"):
        save = st.button(
            "Save verdict [Ctrl+Enter]",
            type="primary",
            shortcut="ctrl+enter",
            key=f"aud_save_{view.id}",
        )
        skip = st.button("Skip", key=f"aud_skip_{view.id}", shortcut="s")
        if keyboard.help_button("audit"):
            keys_dialog()
    if skip:
        st.session_state[skipped_key(plan)].append(view.id)
        load_next(engine, actor, plan, release=view.id)
        st.rerun()
    here = st.container()  # what the save said, right under the button
    if save:
        save_verdict(actor, plan, view, mine, (verdict, tuple(stages or ()), notes, drafts), here)
    message = st.session_state.pop(message_key(view.id), None)
    if message:
        here.success(ui.plain(message))
    if mine is not None:
        after_verdict(engine, actor, tax, plan, view, mine)
    elif view.blind:
        st.caption("Blind review: other verdicts appear after you save yours.")


def message_key(item_id: int) -> str:
    return f"aud_msg_{item_id}"


@st.dialog("Keys of the audit queue", width="large")
def keys_dialog() -> None:
    keyboard.key_list([keyboard.Shown(k, d) for k, d in forms.audit_key_lines()])


def save_verdict(
    actor: Actor,
    plan: PlanView,
    view: items.ItemView,
    mine: verdicts.VerdictView | None,
    form: tuple[str | None, tuple[str, ...], str, list[items.ClaimDraft]],
    here: DeltaGenerator,
) -> None:
    """Save the form's verdict, or say at the button why nothing was saved."""
    verdict, stages, notes, drafts = form
    if plan.status != PlanStatus.open:
        ui.error(f"This batch is {plan.status}: nothing was saved.", where=here)
        return
    if verdict is None:
        first, *_, last = forms.VERDICT_KEYS.values()
        letters = f"{first.upper()}–{last.upper()}"
        ui.error(f"Pick a verdict first (keys {letters}); nothing was saved.", where=here)
        return
    saved = ui.transact(
        lambda s: verdicts.submit_verdict(
            s,
            actor,
            view.id,
            verdicts.VerdictIn(verdict, stages, notes, tuple(drafts)),
            mine.id if mine else None,
        ),
        where=here,
    )
    if saved is not None:
        drop_claims_draft(actor, view.id)
        st.session_state[message_key(view.id)] = f"Saved your verdict on {view.trace_id}."
        st.rerun()


def after_verdict(
    engine: Engine,
    actor: Actor,
    tax: Taxonomy,
    plan: PlanView,
    view: items.ItemView,
    mine: verdicts.VerdictView,
) -> None:
    """Once the reviewer has a verdict: the way on, every current verdict on the trace,
    promotion to a case and the reviewer's own history."""
    if plan.status == PlanStatus.open and st.button(
        "Next trace", type="primary", key="aud_next", shortcut="n"
    ):
        load_next(engine, actor, plan)
        st.rerun()
    others = verdicts.item_verdicts(engine, actor, view.id) or []
    st.caption("Current verdicts on this trace")
    st.dataframe(display.verdicts_frame(others), hide_index=True, width="stretch")
    with st.expander("Turn this trace into an evaluation case"):
        promotion(engine, actor, tax, view, mine)
    with st.expander("My verdict history on this trace"):
        history = verdicts.verdict_history(engine, actor, view.id)
        st.dataframe(display.history_frame(history, actor.email), hide_index=True, width="stretch")


def promotion(
    engine: Engine,
    actor: Actor,
    tax: Taxonomy,
    view: items.ItemView,
    mine: verdicts.VerdictView,
) -> None:
    """The case this verdict became, or the button that makes a draft case of it; what the
    button did is said here, where it was pressed."""
    done = st.session_state.pop(f"aud_promoted_{view.id}", None)
    if done:
        st.success(ui.plain(done))
    if mine.promoted_case_id:
        st.markdown(
            f"Promoted to [case {mine.promoted_case_id:d}]"
            f"({ui.link('cases', case=mine.promoted_case_id)})."
        )
    elif not actor.can(Permission.edit_cases):
        st.caption("Creating cases needs a role that edits cases.")
    else:
        st.caption(
            "A draft case: the query as the question, the retrieved documents found in the "
            "corpus as evidence (forbidden where authorization filtered them), your verdict as "
            "the suggested expected decision."
        )
        split = st.selectbox("Split", list(tax.splits), index=1, key=f"aud_split_{view.id}")
        if st.button("Promote to a case", key=f"aud_promote_{view.id}"):
            cid = ui.transact(
                lambda s: promote.promote_to_case(s, actor, view.id, tax, split=str(split)),
                prefix="",
            )
            if cid is not None:
                st.session_state[f"aud_promoted_{view.id}"] = (
                    f"Draft case {cid} created from {view.trace_id}."
                )
                st.rerun()
