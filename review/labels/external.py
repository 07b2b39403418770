"""Labels made in another labeling tool (Label Studio, Argilla), as their exports say them.

A tool's reader (:mod:`review.labels.labelstudio`, :mod:`review.labels.argilla_io`) turns its
export into :class:`ExternalLabel` records, one per submitted annotation, and nothing else: a
cancelled or skipped annotation, a draft, a model prediction or a suggestion is not a label and
is not yielded (a reader counts what it passed over in :class:`Skipped`). The import
(:mod:`review.labels.imports`) checks every record against the database and the taxonomy and
writes all of them or none.

``where`` names the record in the file for an error ("task 12, annotation 31"); ``ref`` is the
tool's own stable id of the annotation, so that importing the same export again adds nothing,
and an annotation changed in the tool since (same ``ref``, other content) becomes a new label
that replaces the one imported before.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import dataclass, field

__all__ = ["TOOLS", "ExternalLabel", "Skipped"]

#: the tools whose exports are read, by the name stored as a label's source
TOOLS: tuple[str, ...] = ("label-studio", "argilla")


@dataclass(frozen=True)
class ExternalLabel:
    """One submitted annotation of one case, as the tool's export has it."""

    tool: str
    #: where in the file, for errors: "task 12, annotation 31"
    where: str
    #: the tool's stable id of this annotation (Label Studio: the annotation id; Argilla: the
    #: record id and the user id), unique within one tool
    ref: str
    #: the case key the exported task or record carries
    case_key: str
    #: the tool's user as the export names them: an e-mail, or the tool's user id as text
    user: str
    decision: str
    reason_codes: tuple[str, ...] = ()
    note: str = ""
    #: when the annotation was made (or last changed) in the tool, UTC, if the export says
    labeled_at: dt.datetime | None = None
    #: seconds the annotator spent on it, if the export says (Label Studio's lead_time)
    lead_seconds: float | None = None

    def digest(self) -> str:
        """What the label says, hashed: the same annotation exported again has the same
        digest; a changed decision, reason codes or note changes it."""
        body = json.dumps(
            [self.case_key, self.decision, sorted(self.reason_codes), self.note.strip()],
            ensure_ascii=False,
        )
        return hashlib.blake2b(body.encode("utf-8"), digest_size=16).hexdigest()


@dataclass
class Skipped:
    """What a reader passed over, by why: ``{"cancelled": 3, "draft": 1, "prediction": 7}``."""

    counts: dict[str, int] = field(default_factory=dict)

    def add(self, why: str, n: int = 1) -> None:
        self.counts[why] = self.counts.get(why, 0) + n
