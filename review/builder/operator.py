"""What every edit operator shares: the plain data it returns (spans, results, suggestions),
frozen params validated on construction, splicing with whitespace tidied, the operator base
class and span helpers."""

from __future__ import annotations

import dataclasses
import types
import typing
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, Generic, TypeVar

from review.core import readable
from review.core.errors import InputError

ParamValue = str | int | bool | None

__all__ = [
    "OPERATOR_NAMES",
    "EditResult",
    "ExtraDocument",
    "Operator",
    "ParamField",
    "ParamValue",
    "Params",
    "Replacement",
    "Span",
    "Suggestion",
    "common_ends",
    "expand_ws",
    "find_span",
    "operator_label",
    "span_at",
    "spans_from",
    "splice",
]


# ------------------------------------------------------------------------------------------
# Display names: what people read for each operator in pickers, tables and history (the key
# stays what is stored and replayed)

OPERATOR_NAMES: dict[str, str] = {
    "replace_tier": "Replace the product tier",
    "change_unit": "Change the unit",
    "change_number": "Change the number",
    "drop_exception": "Drop the exception",
    "swap_year": "Swap the year",
    "move_jurisdiction": "Move to another jurisdiction",
    "remove_answer": "Remove the answer",
    "relocate_answer": "Move the answer to a restricted document",
    "insert_instruction": "Insert an instruction (prompt injection)",
}


def operator_label(name: str | None) -> str:
    """An operator as people read it: its display name; an unknown key humanised, none "—"."""
    if not name:
        return "—"
    return OPERATOR_NAMES.get(name) or readable.humanize(name)


# ------------------------------------------------------------------------------------------
# Plain data returned by the operators


@dataclass(frozen=True)
class Span:
    """A half-open character range ``[start, end)`` of a document body and its text."""

    start: int
    end: int
    text: str
    kind: str = "selection"


@dataclass(frozen=True)
class ExtraDocument:
    """A new document body an edit produces besides the edited text (relocate_answer)."""

    title: str
    body: str
    access_scope: str
    note: str = ""


@dataclass(frozen=True)
class EditResult:
    """The edited text; ``[start, end)`` is the span of the *source* that became ``after``."""

    text: str
    start: int
    end: int
    before: str
    after: str
    metadata: Mapping[str, str] = field(default_factory=dict)
    extra_documents: tuple[ExtraDocument, ...] = ()

    def narrowed(self) -> tuple[int, int, str, str]:
        """The change without the unchanged prefix/suffix: (start, end, before, after)."""
        b, a = self.before, self.after
        p, q = common_ends(b, a)
        return self.start + p, self.end - q, b[p : len(b) - q], a[p : len(a) - q]


def common_ends(a: Sequence[object], b: Sequence[object]) -> tuple[int, int]:
    """Lengths of the common start and the common end of two sequences (strings, token
    lists), never overlapping: what an edit or a diff can set aside as unchanged."""
    p = 0
    limit = min(len(a), len(b))
    while p < limit and a[p] == b[p]:
        p += 1
    q = 0
    while q < limit - p and a[len(a) - 1 - q] == b[len(b) - 1 - q]:
        q += 1
    return p, q


# Decisive documents may back each other up (each states the whole answer) or each hold one
# step of a multi-step question; the workbench cannot tell which, so it says both.
PART_ONLY: Final = (
    "That holds when each of them states the whole answer on its own. If each decisive "
    "document holds only one part of it (one step of a multi-step question), this edit "
    "already leaves the question unanswerable: choose Abstain or Partial answer yourself."
)


@dataclass(frozen=True)
class Suggestion:
    """What an operator's edit usually implies; an expert confirms it. Never a label."""

    decision: str | None  # None: the base case's decision stays as it is
    reason_codes: tuple[str, ...]
    slices: tuple[str, ...] = ()
    category: str | None = None
    evidence_state: str | None = None
    note: str = ""

    def kept_by(self, refs: Sequence[str]) -> Suggestion:
        """The suggestion when other visible decisive documents (``refs``) still carry the
        answer: an edit that takes the answer out of one document leaves the evidence in the
        others, so the base case's decision stays (nothing is claimed gone)."""
        if not refs or (self.decision is None and self.evidence_state is None):
            return self
        names = ", ".join(refs)
        verb = "carries" if len(refs) == 1 else "carry"
        return Suggestion(
            None,
            (),
            self.slices,
            None,
            None,
            f"{names} still {verb} the answer (decisive and visible), so the evidence is not "
            "gone: the base case's decision stays. Edit those documents too for a variant "
            f"without the answer. {PART_ONLY}",
        )


@dataclass(frozen=True)
class ParamField:
    """One parameter of an operator, described for building a form."""

    name: str
    type: str  # "str", "int", "bool", "str | None", ...
    required: bool
    default: ParamValue
    help: str
    choices: tuple[str, ...] = ()


# ------------------------------------------------------------------------------------------
# Params: frozen dataclasses validated on construction and from JSON-able dicts


@dataclass(frozen=True)
class Params:
    """Base of every operator's parameters."""

    operator: ClassVar[str] = ""

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """Raise InputError naming the field when a value is not allowed."""

    def fail(self, fld: str, problem: str) -> InputError:
        return InputError(f"{operator_label(self.operator)}: parameter {fld}: {problem}")

    def to_dict(self) -> dict[str, ParamValue]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


def _type_name(hint: Any) -> str:
    if isinstance(hint, type):
        return hint.__name__
    return str(hint).replace("NoneType", "None")


def _accepts(hint: Any, value: object) -> bool:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_accepts(arg, value) for arg in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(hint, type):
        return isinstance(value, hint)
    return False  # pragma: no cover - only simple types are used


P = TypeVar("P", bound=Params)


def _parse_params(cls: type[P], data: Mapping[str, object]) -> P:
    name = operator_label(cls.operator)
    if not isinstance(data, Mapping):
        raise InputError(f"{name}: parameters must be a mapping of names to values")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise InputError(
            f"{name}: unknown parameter {unknown[0]!r}; expected: {', '.join(fields) or 'none'}"
        )
    kwargs: dict[str, Any] = {}
    for fname, f in fields.items():
        if fname not in data:
            if f.default is dataclasses.MISSING:
                raise InputError(f"{name}: parameter {fname}: required but missing")
            continue
        value = data[fname]
        if not _accepts(hints[fname], value):
            raise InputError(
                f"{name}: parameter {fname}: expected {_type_name(hints[fname])}, "
                f"got {type(value).__name__} {value!r}"
            )
        kwargs[fname] = value
    return cls(**kwargs)


# ------------------------------------------------------------------------------------------
# Splicing with whitespace tidied where text was removed

Replacement = tuple[int, int, str]  # replace text[a:b] by the string


def _desired_ws(run: str, left: str | None, right: str | None, newlines: int) -> str:
    """The whitespace to leave where text was removed: ``newlines`` line breaks (at most a
    blank line), else one space or none before punctuation."""
    if left is None or right is None:
        return ""
    if "\n" in run:
        return "\n" * min(newlines, 2) + run[run.rfind("\n") + 1 :]
    if right in ".,;:!?)]" or left in "([":
        return ""
    return " "


def _tidy(prefix: str, seg: str, suffix: str, j: int) -> str:
    a = j
    while a > 0 and seg[a - 1].isspace():
        a -= 1
    b = j
    while b < len(seg) and seg[b].isspace():
        b += 1
    out_l = prefix[len(prefix.rstrip()) :] if a == 0 else ""
    out_r = suffix[: len(suffix) - len(suffix.lstrip())] if b == len(seg) else ""
    run = out_l + seg[a:b] + out_r
    if a > 0:
        left: str | None = seg[a - 1]
    else:
        rest = prefix[: len(prefix) - len(out_l)]
        left = rest[-1] if rest else None
    if b < len(seg):
        right: str | None = seg[b]
    else:
        rest = suffix[len(out_r) :]
        right = rest[0] if rest else None
    # the breaks on either side of the removed text were one separation, not two: a line
    # removed from a list or a paragraph leaves one line break, a paragraph one blank line
    newlines = max((out_l + seg[a:j]).count("\n"), (seg[j:b] + out_r).count("\n"))
    want = _desired_ws(run, left, right, newlines)
    # Only the part inside the span may change: add what the outside does not already provide.
    if "\n" in want:
        need = max(0, want.count("\n") - out_l.count("\n") - out_r.count("\n"))
        indent = want[want.rfind("\n") + 1 :] if need and not out_r else ""
        inside = "\n" * need + indent
    else:
        inside = want if not out_l and not out_r else ""
    return seg[:a] + inside + seg[b:]


def _merge(text: str, ops: list[Replacement]) -> list[Replacement]:
    """Sort ops; join deletions separated only by whitespace (the whitespace goes too)."""
    out: list[Replacement] = []
    for a, b, r in sorted(ops):
        if out:
            pa, pb, pr = out[-1]
            if a < pb:
                raise AssertionError("overlapping edits")  # pragma: no cover - internal bug
            if not pr and not r and not text[pb:a].strip():
                out[-1] = (pa, b, "")
                continue
        out.append((a, b, r))
    return out


def splice(text: str, s: int, e: int, ops: list[Replacement]) -> str:
    """The new text of ``[s, e)`` after ``ops``; whitespace at removals is normalised."""
    pieces: list[str] = []
    junctions: list[int] = []
    pos, size = s, 0
    for a, b, r in _merge(text, ops):
        if a < s or b > e:
            raise _outside(text, s, e, a, b)
        pieces.append(text[pos:a])
        size += a - pos
        if r:
            pieces.append(r)
            size += len(r)
        else:
            junctions.append(size)
        pos = b
    pieces.append(text[pos:e])
    seg = "".join(pieces)
    prefix, suffix = text[:s], text[e:]
    for j in reversed(junctions):
        seg = _tidy(prefix, seg, suffix, j)
    return seg


def _outside(text: str, s: int, e: int, a: int, b: int) -> InputError:
    piece = text[a:b].strip()
    if len(piece) > 80:
        piece = piece[:77] + "..."
    return InputError(
        f"the edit needs characters {a}-{b} ({piece!r}) but the span is {s}-{e}; "
        "widen the span to include them"
    )


def expand_ws(text: str, a: int, b: int) -> tuple[int, int]:
    while a > 0 and text[a - 1] in " \t\n":
        a -= 1
    while b < len(text) and text[b] in " \t\n":
        b += 1
    return a, b


# ------------------------------------------------------------------------------------------
# The operator base class


class Operator(ABC, Generic[P]):
    """A pure, recorded edit. Subclasses set name, description, params_type and suggestion."""

    name: ClassVar[str]
    description: ClassVar[str]
    #: what its candidates are, for "finds no ... in the document" ("a year (1900-2099)")
    finds: ClassVar[str] = "place to edit"
    suggestion: ClassVar[Suggestion]
    params_type: type[P]

    @property
    def label(self) -> str:
        """The display name people read (OPERATOR_NAMES)."""
        return operator_label(self.name)

    @abstractmethod
    def candidates(self, text: str) -> list[Span]:
        """Spans of ``text`` this operator can act on, in document order."""

    @abstractmethod
    def example_params(self, text: str, span: Span) -> P:
        """A params value that changes ``span`` (a sensible default for a form)."""

    @abstractmethod
    def _apply(self, text: str, span: Span, params: P) -> EditResult: ...

    def apply(self, text: str, span: Span, params: P) -> EditResult:
        """Apply the edit inside ``span``; InputError when it cannot or would change nothing."""
        if not isinstance(params, self.params_type):
            raise InputError(
                f"{self.label}: expected {self.params_type.__name__}, got {type(params).__name__}"
            )
        _check_span(text, span, self.label)
        result = self._apply(text, span, params)
        if result.after == result.before and not result.metadata and not result.extra_documents:
            raise InputError(f"{self.label}: the edit would change nothing in the span")
        return result

    def apply_dict(self, text: str, span: Span, params: Mapping[str, object]) -> EditResult:
        return self.apply(text, span, self.parse_params(params))

    def parse_params(self, data: Mapping[str, object]) -> P:
        """Params from a JSON-able dict; unknown, missing or mistyped keys raise InputError."""
        return _parse_params(self.params_type, data)

    def param_fields(self) -> list[ParamField]:
        hints = typing.get_type_hints(self.params_type)
        out: list[ParamField] = []
        for f in dataclasses.fields(self.params_type):
            required = f.default is dataclasses.MISSING
            default = None if required else f.default
            out.append(
                ParamField(
                    name=f.name,
                    type=_type_name(hints[f.name]),
                    required=required,
                    default=typing.cast(ParamValue, default),
                    help=str(f.metadata.get("help", "")),
                    choices=tuple(f.metadata.get("choices", ())),
                )
            )
        return out

    # helpers for subclasses
    def _result(
        self,
        text: str,
        span: Span,
        after: str,
        metadata: Mapping[str, str] | None = None,
        extra: tuple[ExtraDocument, ...] = (),
    ) -> EditResult:
        return EditResult(
            text=text[: span.start] + after + text[span.end :],
            start=span.start,
            end=span.end,
            before=span.text,
            after=after,
            metadata=dict(metadata or {}),
            extra_documents=extra,
        )

    def _missing(self, what: str, span: Span) -> InputError:
        shown = span.text if len(span.text) <= 60 else span.text[:57] + "..."
        return InputError(
            f"{self.label}: no {what} in the span {span.start}-{span.end} ({shown!r})"
        )


def _check_span(text: str, span: Span, name: str) -> None:
    if not (0 <= span.start <= span.end <= len(text)):
        raise InputError(
            f"{name}: span {span.start}-{span.end} is out of range "
            f"(the text has {len(text)} characters)"
        )
    if text[span.start : span.end] != span.text:
        raise InputError(
            f"{name}: the text at {span.start}-{span.end} does not match the span's text; "
            "the document has changed since the span was chosen"
        )


def span_at(text: str, start: int, end: int, kind: str = "selection") -> Span:
    """A span of ``text`` from offsets (e.g. a selection in a form); InputError if invalid."""
    if not (0 <= start <= end <= len(text)):
        raise InputError(
            f"span {start}-{end} is out of range (the text has {len(text)} characters)"
        )
    return Span(start, end, text[start:end], kind)


def find_span(text: str, passage: str, kind: str = "passage") -> Span:
    """The span of ``passage`` in ``text``; it must occur exactly once."""
    if not passage.strip():
        raise InputError("the passage is empty")
    first = text.find(passage)
    if first < 0:
        shown = passage if len(passage) <= 60 else passage[:57] + "..."
        raise InputError(f"the passage {shown!r} does not occur in the document")
    if text.find(passage, first + 1) >= 0:
        raise InputError(
            f"the passage occurs {text.count(passage)} times in the document; "
            "select a longer passage so that it is unique"
        )
    return Span(first, first + len(passage), passage, kind)


def spans_from(text: str, ranges: Iterable[tuple[int, int]], kind: str) -> list[Span]:
    seen: set[tuple[int, int]] = set()
    out: list[Span] = []
    for a, b in sorted(ranges):
        if (a, b) not in seen:
            seen.add((a, b))
            out.append(Span(a, b, text[a:b], kind))
    return out
