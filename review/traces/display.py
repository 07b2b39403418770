"""What the Traces page shows, as plain data: the tables of one trace (citations, chunks,
signals, versions, redactions), the traces list and the recent imports, and the labels and
notes around them. Text from production stays in table cells (never Markdown); the page only
lays these out."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

import pandas as pd

from review.core import readable
from review.core.taxonomy import Taxonomy
from review.traces.browse import TraceListRow, TraceView
from review.traces.chunks import ChunkView
from review.traces.importer import ImportRow
from review.traces.model import feedback_label
from review.traces.retention import Retention

__all__ = [
    "NONE",
    "chunk_label",
    "chunks_frame",
    "citations_frame",
    "decision_label",
    "hidden_chunks_note",
    "import_progress",
    "imports_frame",
    "listing_frame",
    "no_chunks_text",
    "reason_line",
    "redactions_frame",
    "retention_caption",
    "score_text",
    "signals_frame",
    "value_frame",
    "yes_no",
]

#: Shown for a value that was not logged.
NONE = "—"


def yes_no(value: bool | None) -> str:
    """A logged flag: "yes", "no", or "—" when it was not logged."""
    return NONE if value is None else ("yes" if value else "no")


def value_frame(rows: Iterable[tuple[str, object]]) -> pd.DataFrame:
    """Name/value pairs as a two-column table (values as text, "—" when not logged)."""
    return pd.DataFrame(
        [(k, NONE if v is None else str(v)) for k, v in rows], columns=["", "value"]
    )


def score_text(score: float | None) -> str:
    return NONE if score is None else f"{score:.3f}"


def decision_label(decision: str | None, tax: Taxonomy) -> str:
    """The taxonomy's label of a logged decision; the raw value when the taxonomy does not
    know it, "not logged" when there is none."""
    return tax.label("decisions", decision, missing="not logged")


def reason_line(reason_code: str | None, tax: Taxonomy) -> str:
    """The logged reason code with its definition, or "(none logged)"."""
    if not reason_code:
        return "(none logged)"
    return f"{reason_code}: {tax.definition('reason_codes', reason_code)}"


def citations_frame(view: TraceView) -> pd.DataFrame:
    """Each claim of the answer, the chunks it cites and whether the citation holds."""
    return pd.DataFrame(
        [
            {
                "claim": c.claim,
                "cites": ", ".join(c.chunk_ids) or "(nothing)",
                "valid": c.valid,
                "problems": "; ".join(c.problems),
            }
            for c in view.citations
        ]
    )


def chunks_frame(view: TraceView) -> pd.DataFrame:
    """The retrieved chunks the viewer may see, in rank order."""
    return pd.DataFrame(
        [
            {
                "rank": c.rank,
                "score": c.score,
                "chunk": c.chunk_id,
                "document": c.doc_id,
                "version": c.doc_version,
                "effective": c.effective_date.isoformat() if c.effective_date else None,
                "filtered by authorization": c.filtered,
                "in context": yes_no(c.in_context),
                "cited": c.cited,
                "text": c.text,
            }
            for c in view.chunks
        ]
    )


def chunk_label(chunk: ChunkView) -> str:
    """The heading of a chunk's full text: its rank, and whether authorization filtered it."""
    flag = " (filtered by authorization)" if chunk.filtered else ""
    return f"#{chunk.rank or '?'}{flag}"


def no_chunks_text(view: TraceView) -> str:
    """What stands in for the chunk table when the viewer sees no chunk."""
    return "(no chunks retrieved)" if not view.hidden_chunks else "(no chunks you may see)"


def hidden_chunks_note(view: TraceView) -> str | None:
    """Why some chunks are missing (None when none is hidden from the viewer)."""
    if not view.hidden_chunks:
        return None
    return (
        f"{readable.count(view.hidden_chunks, 'chunk')} removed by the authorization filter "
        f"{readable.plural(view.hidden_chunks, 'is', 'are')} hidden: "
        "they are shown only to users with clearance."
    )


def signals_frame(view: TraceView) -> pd.DataFrame:
    """The signals the decision gate saw."""
    return value_frame(
        [
            ("ranking mode", view.ranking_mode),
            ("hits after filtering", view.hits_after_filter),
            ("top score", view.top_score),
            ("answerable (model)", yes_no(view.answerable)),
            ("ambiguous (model)", yes_no(view.ambiguous)),
            ("ungrounded (groundedness check)", yes_no(view.ungrounded)),
            (
                "topics (topic classifier)",
                None if view.topics is None else ", ".join(view.topics) or "none",
            ),
            ("feedback", view.feedback),
            ("user reformulated right after", yes_no(view.reformulated)),
            ("user opened a cited source", yes_no(view.citation_opened)),
            ("user role", view.user_role),
            ("identity scopes", ", ".join(view.identity_scopes) or None),
        ]
    )


def redactions_frame(view: TraceView) -> pd.DataFrame:
    """What was redacted on import (one "nothing" row when nothing was)."""
    return value_frame(sorted(view.redactions.items()) or [("nothing", None)])


def imports_frame(
    rows: Sequence[ImportRow], names: Mapping[str, str] | None = None
) -> pd.DataFrame:
    """The recent imports: source, outcome counts, what was redacted, who (by name when
    ``names`` is given) and when."""
    return pd.DataFrame(
        [
            {
                "id": r.id,
                "source": r.source,
                "format": r.format,
                "status": r.status,
                "added": r.added,
                "skipped": r.skipped,
                "rejected": r.rejected,
                "redacted": ", ".join(f"{v} {k}" for k, v in sorted(r.redactions.items()) if v),
                "by": r.actor if names is None else readable.person(r.actor, names),
                "started": r.started_at.strftime("%Y-%m-%d %H:%M"),
            }
            for r in rows
        ]
    )


def listing_frame(
    rows: Sequence[TraceListRow], link: Callable[[int], str], tax: Taxonomy | None = None
) -> pd.DataFrame:
    """One page of the traces list; ``link`` makes the address that opens a trace. With
    ``tax`` the logged decision and reason read as their taxonomy labels."""

    def term(section: str, key: str | None, missing: str) -> str:
        if tax is None:
            return key or missing
        return readable.term(tax, section, key, missing)

    return pd.DataFrame(
        [
            {
                "open": link(r.id),
                "time (UTC)": r.at.strftime("%Y-%m-%d %H:%M"),
                "question": r.query,
                "decision": term("decisions", r.decision, "(not logged)"),
                "reason": term("reason_codes", r.reason_code, ""),
                "top score": r.top_score,
                "mode": r.ranking_mode if tax is None else readable.humanize(r.ranking_mode, ""),
                "hits": r.hits_after_filter,
                "feedback": feedback_label(r.feedback),
                "policy (as logged)": r.policy_version,
                "restricted": r.restricted,
            }
            for r in rows
        ]
    )


def import_progress(phase: str, done: int, total: int | None) -> tuple[float, str] | None:
    """The progress bar of an import (fraction, text) after an importer callback; None when
    the bar stays as it is (writing with no known total)."""
    if phase == "checking":
        return 0.0, f"Checking the file… {readable.count(done, 'trace')} read"
    if total:
        return min(1.0, done / total), f"Writing… {done:,} of {total:,}"
    return None


def retention_caption(rule: Retention) -> str:
    """The retention rule in force, in a sentence."""
    if rule.days is None:
        return "No retention rule is set: traces are kept until someone purges them."
    return (
        f"Traces older than {readable.count(rule.days, 'day')} are deleted when a purge runs "
        f"(set by {rule.updated_by or NONE})."
    )
