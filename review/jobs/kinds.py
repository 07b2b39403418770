"""The kinds of background work: what a job of each kind runs and who may start it.

A kind's module defines its ``run(ctx) -> dict`` and its ``summarise(result) -> str`` (the
result in words, for the pages: never the stored JSON) and registers them here at import;
:mod:`review.jobs.catalog` imports every kind's module, so the worker and the pages see the
same registry. The kind's permission is needed to start a job of it, to see the job and its
result, and to cancel it (admins, who manage users, see and cancel every job).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from review.core.errors import InputError
from review.core.identity import Actor, Permission


@dataclass(frozen=True)
class Kind:
    name: str
    #: what people read ("Trace import")
    title: str
    permission: Permission
    #: ``run(ctx)`` with a :class:`review.jobs.context.JobContext` (typed Any here: the
    #: context module imports this one)
    run: Callable[[Any], dict[str, Any]]
    #: ``summarise(result)``: a finished job's result in a sentence or a few, as people read
    #: it (plain text: the pages show it through their escaper)
    summarise: Callable[[Mapping[str, Any]], str]
    #: attempts before it fails for good: a worker that died or a retryable error counts one
    max_attempts: int = 3


REGISTRY: dict[str, Kind] = {}


def register(kind: Kind) -> Kind:
    """Add ``kind`` to the registry (once per name: a second kind of the same name is a bug)."""
    known = REGISTRY.get(kind.name)
    if known is not None and known is not kind:
        raise ValueError(f"job kind {kind.name!r} is registered twice")
    if not 1 <= kind.max_attempts <= 20:
        raise ValueError(f"job kind {kind.name!r}: max_attempts must be 1 to 20")
    REGISTRY[kind.name] = kind
    return kind


_TYPE_WORDS = {
    bool: "true or false",
    int: "a whole number",
    str: "a text",
    dict: "a mapping",
    list: "a list",
    type(None): "empty",
}


def expect(params: Mapping[str, Any], spec: Mapping[str, tuple[type, ...]]) -> dict[str, Any]:
    """``params`` checked against ``spec`` (each name and the types its value may have): a
    job runs only on the parameters its kind knows, each of its type; a missing, unknown or
    mistyped one fails the job with an error naming it (never a guess)."""
    unknown = sorted(set(params) - set(spec))
    if unknown:
        raise InputError(f"the job has an unknown parameter {unknown[0]!r}")
    out: dict[str, Any] = {}
    for name, types in spec.items():
        if name not in params:
            if type(None) in types:
                out[name] = None
                continue
            raise InputError(f"the job's parameter {name!r} is missing")
        value = params[name]
        if type(value) not in types:  # exactly: True is no whole number, 1 no "true"
            words = " or ".join(_TYPE_WORDS.get(t, t.__name__) for t in types)
            raise InputError(f"the job's parameter {name!r} must be {words}")
        out[name] = value
    return out


#: what a result reads when its kind cannot read it (a job of an older release, a kind no
#: longer known): said so, never the stored data
UNREADABLE = "Its result cannot be read as this kind's result."


def stored_text(result: Mapping[str, Any], name: str = "summary") -> str | None:
    """The text ``result`` holds under ``name`` (a kind's own words, written when it finished),
    or None when there is none."""
    value = result.get(name)
    return value.strip() if isinstance(value, str) and value.strip() else None


def stored_count(result: Mapping[str, Any], name: str) -> int | None:
    """The whole number ``result`` holds under ``name`` (never a true/false), or None."""
    value = result.get(name)
    return value if type(value) is int and value >= 0 else None


def summary_of(kind: str, result: Mapping[str, Any]) -> str:
    """A finished job's ``result`` in words, by its kind's ``summarise``; a kind no longer
    registered, a result that is no mapping or one the kind cannot read says so."""
    known = REGISTRY.get(kind)
    if known is None:
        return f"A job of a kind this workbench no longer knows ({kind!r}). {UNREADABLE}"
    if not isinstance(result, Mapping):
        return UNREADABLE
    try:
        text = known.summarise(result)
    except (KeyError, TypeError, ValueError):
        return UNREADABLE
    return text or UNREADABLE


def get_kind(name: str) -> Kind:
    kind = REGISTRY.get(name)
    if kind is None:
        raise InputError(f"unknown kind of job {name!r}")
    return kind


def sees_all(actor: Actor) -> bool:
    """Admins see and cancel every job."""
    return actor.can(Permission.manage_users)


def visible_kinds(actor: Actor) -> list[str]:
    """The kinds whose jobs ``actor`` may see."""
    return sorted(k.name for k in REGISTRY.values() if sees_all(actor) or actor.can(k.permission))
