"""What the Thresholds page shows, as plain data: where calibration outcomes come from and
which split is reported, the range of the proposed-threshold slider, the summaries of an
analysis (operating points, targets, flips, audited replay), who may sign a proposal, and the
history's tables, rollback choices and stored snapshots."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import pandas as pd
import yaml

from review.core import readable
from review.policy import signoff
from review.policy.display import in_force_caption, signature_line, status_text
from review.policy.policy import ModeThresholds, NoAnswerPolicy
from review.policy.signoff import signing_roles
from review.thresholds.headline import METRIC_LABELS
from review.thresholds.thresholds import Analysis

__all__ = [
    "AUDITED",
    "GATE_BASIS",
    "OP_COLUMNS",
    "SNAPSHOT_CHARS",
    "SNAPSHOT_KEYS",
    "SPLITS",
    "SliderRange",
    "analysis_caption",
    "audit_modes",
    "audited_effects",
    "caveat_start",
    "chain_message",
    "changes_frame",
    "coverage_points",
    "figures_table",
    "flip_counts",
    "gate_basis",
    "history_frame",
    "in_force_caption",
    "is_change",
    "not_pending_message",
    "override_message",
    "report_split_for",
    "rollback_choices",
    "signature_caption",
    "signing_roles",
    "slider_range",
    "snapshot_json",
    "targets_verdict",
]

#: The outcome source that is not an evaluation run.
AUDITED: Final = "Audited production traces"

#: The splits a run's thresholds may be tuned on, in the picker's order.
SPLITS: Final = ("validation", "train", "test")

#: The operating-point metrics shown for the current and the proposed threshold.
OP_COLUMNS: Final = (
    "coverage",
    "selective_risk",
    "false_refusal_rate",
    "unsupported_answer_rate",
    "abstention_recall",
    "expected_cost",
)

#: The parts of a signature's metrics snapshot shown in the history.
SNAPSHOT_KEYS: Final = (
    "mode",
    "tuned_on",
    "report_on",
    "aurc",
    "points",
    "operating_points",
    "targets",
)

#: Characters of a snapshot shown at most.
SNAPSHOT_CHARS: Final = 3000


# ---------------------------------------------------------------------------------------
# Calibrate


def audit_modes(policy: NoAnswerPolicy) -> list[str]:
    """The ranking modes audited traces can be calibrated in: every mode of the policy but
    hybrid (fused scores are not thresholded), vector first, then by name."""
    return sorted(
        (m for m in policy.ranking_modes if m != "hybrid"), key=lambda m: (m != "vector", m)
    )


def report_split_for(tuned_on: str) -> str:
    """The split a proposal is reported on: test, unless it was tuned on test."""
    return "test" if tuned_on != "test" else "validation"


@dataclass(frozen=True)
class SliderRange:
    min_value: float
    max_value: float
    value: float


def slider_range(frame: pd.DataFrame, current: float | None) -> SliderRange:
    """The proposed-threshold slider: the raw scores of ``frame`` with a margin, wide enough
    to hold the current threshold, starting at it (at the lowest score when there is none)."""
    lo, hi = float(frame["raw_score"].min()), float(frame["raw_score"].max())
    start = float(current) if current is not None else lo
    return SliderRange(
        round(min(lo, start) - 0.01, 3), round(max(hi, start) + 0.01, 3), round(start, 3)
    )


def caveat_range(
    bounds: SliderRange, th: ModeThresholds, proposed: float
) -> tuple[float, float, float]:
    """(min, max, start) of the caveat slider: on the better side of the proposed refuse
    threshold (higher scores when higher is better), starting at the caveat in force."""
    start = caveat_start(th, proposed)
    if th.higher_is_better:
        return proposed, max(bounds.max_value, start), start
    return min(bounds.min_value, start), proposed, start


def no_caveat_room(mode: str, proposed: float) -> str:
    """What the page says instead of a caveat slider when the proposed refuse_below is at the
    end of the score range, so no answer can fall between the two thresholds."""
    return (
        f"Proposed Caveat below for {mode}: {proposed:g}, the same as the proposed "
        "Refuse below, which is at the end of the score range: no answer would carry the caveat."
    )


def analysis_caption(a: Analysis) -> str:
    return (
        f"{readable.count(a.n_tuning, 'outcome')} on {a.tuned_on}, {a.n_report} on {a.report_on} · "
        f"AURC on {a.tuned_on}: {a.aurc:.3f} · an outcome is acceptable to answer "
        "when its gold decision answers"
    )


def coverage_points(a: Analysis) -> dict[str, tuple[float, float]]:
    """(coverage, selective risk) of the current and the proposed threshold on the tuning
    split: the marked points of the risk-coverage chart."""
    ops = a.ops.set_index(["policy", "split"])
    return {
        name: (
            float(ops.loc[(name, a.tuned_on), "coverage"]),
            float(ops.loc[(name, a.tuned_on), "selective_risk"]),
        )
        for name in ("current", "proposed")
    }


def targets_verdict(targets: pd.DataFrame) -> tuple[bool, str]:
    """Whether every release target passes, and the sentence saying so."""
    failed = int((~targets["passed"]).sum())
    if failed:
        return False, f"{failed} of {readable.count(len(targets), 'target')} fail."
    return True, "Every target passes."


#: Columns of the figures tables whose cells are metric or target names.
_NAMED_CELLS: Final = ("metric", "target", "name")


def _words(key: object) -> object:
    """A metric, target or threshold name as people read it ("False-refusal rate",
    "Max false refusal rate", "Refuse below"); anything else as it is."""
    if not isinstance(key, str) or "_" not in key:
        return key
    return METRIC_LABELS.get(key) or readable.humanize(key)


def figures_table(frame: pd.DataFrame) -> pd.DataFrame:
    """A table of operating points, targets, sweeps or caveat bands as shown: every column
    headed in words (``false_refusal_rate`` -> "False-refusal rate", ``caveat_below (raw)``
    -> "Caveat below (raw)") and metric and target names in words, never as stored keys."""
    out = frame.copy()
    for column in _NAMED_CELLS:
        if column in out.columns:
            out[column] = out[column].map(_words)
    return out.rename(columns=lambda c: _words(c) if isinstance(c, str) else c)


def flip_counts(flips: pd.DataFrame) -> str:
    """How many flips each effect has ("fixes a false refusal: 3, ..."), most first."""
    return ", ".join(f"{k}: {v}" for k, v in flips["effect"].value_counts().items())


def audited_effects(audited: pd.DataFrame) -> str:
    """What the replayed change does to the audited traces among the flips."""
    effect = audited.groupby("effect")["traces"].sum()
    return (
        "Audited traces among the flips, by their verdict: "
        f"{int(effect.get('fixes', 0))} fixed, "
        f"{int(effect.get('breaks', 0))} broken, "
        f"{int(effect.get('neutral', 0))} neutral"
    )


def caveat_start(th: ModeThresholds, proposed: float) -> float:
    """The caveat threshold the proposal form starts with: the current one (or the proposed
    refuse threshold when there is none), never on the worse side of the proposed refuse
    threshold."""
    default = th.caveat_below if th.caveat_below is not None else proposed
    return float(max(default, proposed) if th.higher_is_better else min(default, proposed))


# ---------------------------------------------------------------------------------------
# Sign-off and history


def override_message(version: signoff.VersionView) -> str:
    """Why a proposal tuned on the data it is reported on is flagged."""
    return f"Tuned on the {version.tuned_on_split} data it is reported on." + (
        " Override note on the record:"
        if version.override_note
        else " No override note: it cannot be approved."
    )


def _reason(s: signoff.Signature) -> str:
    """A signature's note, marked when it is the reason for approving a change that failed
    release targets (review/thresholds/signing.py stores that in the snapshot)."""
    despite = s.metrics_snapshot.get("approved_despite")
    mark = " (approved although it failed release targets)" if despite else ""
    return f"{readable.humanize(s.role)}: {s.note}{mark}"


def history_frame(
    versions: Sequence[signoff.VersionView],
    in_force_id: int | None,
    names: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """Every policy version: where it stands (``status_text``), author and signers by name
    (``names``: e-mail -> name), dates, digest, reasons."""
    return pd.DataFrame(
        [
            {
                "version": v.number,
                "status": status_text(v, in_force_id, versions),
                "author": readable.person(v.author, names or {}),
                "created": v.created_at,
                "approved": v.approved_on,
                "tuned on": v.tuned_on_split or "",
                "sha256": v.sha256[:16],
                "signatures": "; ".join(signature_line(s, names) for s in v.signatures),
                "reasons": "; ".join(_reason(s) for s in v.signatures if s.note),
            }
            for v in versions
        ]
    )


def rollback_choices(
    versions: Sequence[signoff.VersionView], in_force_number: int | None
) -> list[int]:
    """Versions a rollback may go back to: every approved one but the one in force."""
    return [v.number for v in versions if v.approved_on is not None and v.number != in_force_number]


def chain_message(problems: Sequence[str]) -> str:
    """The verdict on the sign-off chain (an error when ``problems`` is not empty)."""
    return "Sign-off chain: " + (
        "; ".join(problems) if problems else "intact (every signature hash verifies)"
    )


def signature_caption(version: signoff.VersionView, s: signoff.Signature) -> str:
    return (
        f"Version {version.number}, {s.role} {s.meaning} by {s.signer}: "
        f"data fingerprint {s.data_fingerprint[:16] or '—'}"
    )


def snapshot_json(s: signoff.Signature) -> str:
    """The main parts of what the signer saw (:data:`SNAPSHOT_KEYS`), as JSON cut to
    :data:`SNAPSHOT_CHARS` characters."""
    shown = {k: s.metrics_snapshot.get(k) for k in SNAPSHOT_KEYS}
    return json.dumps(shown, default=str, indent=1)[:SNAPSHOT_CHARS]


def not_pending_message(
    number: int, asked: signoff.VersionView | None, in_force: signoff.VersionView | None
) -> str:
    """What a link to a version that waits for no signature finds."""
    if asked is None:
        return f"There is no version {number} of the policy."
    if in_force is not None and in_force.id == asked.id:
        return f"Version {number} is approved: it is the policy in force."
    return f"Version {number} no longer waits for sign-off: it is {asked.status}."


def is_change(th: ModeThresholds, bounds: SliderRange, proposed: float, caveat: float) -> bool:
    """Whether the sliders propose anything: a refuse or caveat threshold other than the one
    they start from (the thresholds in force)."""
    start_caveat = caveat_start(th, bounds.value)
    return not (
        math.isclose(proposed, bounds.value, abs_tol=1e-9)
        and math.isclose(caveat, start_caveat, abs_tol=1e-9)
    )


#: What the Thresholds page's targets are computed on, in one sentence beside them.
GATE_BASIS: Final = (
    "Release targets on decisions re-made from scores at these thresholds: each outcome's "
    "score against the thresholds in force and proposed, not the decision the pipeline logged."
)


def gate_basis(source: dict[str, object], newest_run_id: int | None) -> str:
    """The sentence beside the targets of a threshold change on ``source`` (a calibration
    source: :func:`review.thresholds.evidence.run_source` or ``audit_source``), naming the
    Monthly review's release gate when it gates the same run (the newest run) on the logged
    decisions."""
    if source.get("kind") == "audit":
        return GATE_BASIS.replace("each outcome's score", "each audited trace's logged score")
    out = GATE_BASIS
    if newest_run_id is not None and source.get("run_id") == newest_run_id:
        out += (
            f" The Monthly review's release gate of this run, {source.get('run_name')}, is on "
            "the decisions the pipeline logged, so the two can differ."
        )
    return out


# --- what changed between two versions ---------------------------------------------------

#: A value that is a stored key ("low_score_refuse", "legal_dispute"): it reads humanised.
_KEY_VALUE = re.compile(r"[a-z]+(?:_[a-z]+)+")

#: The part of the file that records who changed what: its new entries read as sentences.
_CHANGE_RECORD = "change_record"


def _value_words(value: object, names: Mapping[str, str]) -> str:
    """A setting's value as people read it: numbers without float noise, keys in words, a
    list as its items, a value the version does not set as "—"."""
    if value is None:
        return readable.UNDEFINED
    if isinstance(value, bool | int | float):
        return readable.number(value, decimals=4)
    if isinstance(value, str):
        return readable.humanize(value) if _KEY_VALUE.fullmatch(value) else value
    if isinstance(value, list):
        return ", ".join(_value_words(v, names) for v in value) or "none"
    if isinstance(value, dict):
        return "; ".join(f"{_words(k)}: {_value_words(v, names)}" for k, v in value.items())
    return str(value)


def _flat(node: object, path: tuple[str, ...] = ()) -> dict[tuple[str, ...], object]:
    """Every setting of a policy file by its path (lists are one setting)."""
    if isinstance(node, dict):
        out: dict[tuple[str, ...], object] = {}
        for key, value in node.items():
            out |= _flat(value, (*path, str(key)))
        return out
    return {path: node}


def _setting_words(part: str) -> str:
    """One step of a setting's path in words ("Refuse below", "Vector"; "bm25" as it is)."""
    if any(ch.isdigit() for ch in part):
        return part
    return METRIC_LABELS.get(part) or readable.humanize(part)


def _record_entry(entry: object, names: Mapping[str, str]) -> str:
    if not isinstance(entry, dict):
        return str(entry)
    who = readable.person(entry.get("author"), names)
    return f"version {entry.get('version')}, {entry.get('date')}, {who}: {entry.get('summary')}"


def changes_frame(
    old_text: str, new_text: str, names: Mapping[str, str] | None = None
) -> pd.DataFrame:
    """What differs between two policy files, one setting per row, as people read it:
    "Ranking modes › Vector › Refuse below", its value before and after ("0.55", "0.6"),
    stored keys in words, the new change-record entries with their authors by name. The
    file's own text (for programs and for the record) is the diff beside it."""
    people = names or {}
    columns = ["setting", "before", "after"]
    try:
        old, new = yaml.safe_load(old_text) or {}, yaml.safe_load(new_text) or {}
    except yaml.YAMLError:
        return pd.DataFrame(columns=columns)
    if not isinstance(old, dict) or not isinstance(new, dict):
        return pd.DataFrame(columns=columns)
    rows = []
    old_records, new_records = old.pop(_CHANGE_RECORD, None), new.pop(_CHANGE_RECORD, None)
    a, b = _flat(old), _flat(new)
    for path in [*b, *(p for p in a if p not in b)]:  # in the newer file's order
        before, after = a.get(path), b.get(path)
        if before == after:
            continue
        setting = " › ".join(_setting_words(part) for part in path)
        rows.append(
            {
                "setting": setting,
                "before": _value_words(before, people),
                "after": _value_words(after, people),
            }
        )
    seen = old_records if isinstance(old_records, list) else []
    for entry in new_records if isinstance(new_records, list) else []:
        if entry not in seen:
            rows.append(
                {
                    "setting": "Change record",
                    "before": readable.UNDEFINED,
                    "after": _record_entry(entry, people),
                }
            )
    return pd.DataFrame(rows, columns=columns)
