"""The refusal wording file, pure (no database, no Streamlit).

``policies/refusal-wording.yaml`` holds the customer-facing texts the assistant uses when it
does not simply answer: R1 nothing found in what the person can access, R2 sources found but
they do not answer, R3 answer blocked as ungrounded, C1 caveat, F1 follow-up question, E1
escalation (plus any custom keys). ``load_wording``/``parse_wording`` validate it strictly and
``render`` fills its ``{placeholders}``."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator

from review.core.errors import InputError
from review.core.taxonomy import policies_dir
from review.core.yamlstrict import load_model, load_yaml_text, validate

__all__ = [
    "COMPLIANCE_KEYS",
    "EXAMPLE_VALUES",
    "REQUIRED_KEYS",
    "REQUIRED_KEY_MEANING",
    "Message",
    "WordingSet",
    "load_wording",
    "needs_compliance",
    "parse_wording",
    "placeholders_in",
    "preview",
    "render",
    "signoff_roles",
    "wording_path",
]


# ---------------------------------------------------------------------------------------------
# The wording file
# ---------------------------------------------------------------------------------------------

REQUIRED_KEYS: tuple[str, ...] = ("R1", "R2", "R3", "C1", "F1", "E1")


REQUIRED_KEY_MEANING: Mapping[str, str] = {
    "R1": "nothing found in what the person can access",
    "R2": "sources found, but they do not answer",
    "R3": "answer blocked as ungrounded",
    "C1": "caveat shown with an answer",
    "F1": "follow-up question",
    "E1": "escalation to a role or process",
}


COMPLIANCE_KEYS: frozenset[str] = frozenset({"R3", "E1"})


MESSAGE_KEY_RE = re.compile(r"^[A-Z][A-Z0-9_]*$")


PLACEHOLDER_NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")


PLACEHOLDER_RE = re.compile(r"\{([a-z][a-z0-9_]*)\}")


LOCALE_RE = re.compile(r"^[a-z]{2,3}(?:-[A-Za-z0-9]{2,8})*$")


#: Values used to preview a message before sign-off (``preview``).
EXAMPLE_VALUES: Mapping[str, str] = {
    "missing_item": "the contract name",
    "role": "the Legal team",
    "topic": "refunds for annual plans",
    "document": "your order form",
    "process": "a support ticket",
    "plan": "the Team plan",
    "region": "the EU region",
    "date": "1 March 2025",
    "jurisdiction": "Germany",
    "contact": "the Support team",
}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Message(_Strict):
    """One customer-facing message: its text, declared placeholders, locale and purpose."""

    text: Annotated[str, Field(min_length=1, max_length=2000)]
    placeholders: list[str] = Field(default_factory=list)
    locale: str | None = None
    description: Annotated[str, Field(min_length=3, max_length=300)]


class WordingSet(_Strict):
    """The refusal wording file (policies/refusal-wording.yaml), validated."""

    version: int = Field(ge=1)
    locale: str
    allowed_contacts: list[str]
    restricted_titles: list[str] = Field(default_factory=list)
    #: The deployment's own names (company, brand) the wording lint treats like "we".
    company_names: list[str] = Field(default_factory=list)
    messages: dict[str, Message]

    @model_validator(mode="after")
    def _checks(self) -> WordingSet:
        problems: list[str] = []
        if not LOCALE_RE.match(self.locale):
            problems.append(f"locale: {self.locale!r} is not a locale such as 'en-GB'")
        problems += _list_problems("allowed_contacts", self.allowed_contacts, required=True)
        problems += _list_problems("restricted_titles", self.restricted_titles, required=False)
        problems += _list_problems("company_names", self.company_names, required=False)
        for key in REQUIRED_KEYS:
            if key not in self.messages:
                problems.append(
                    f"messages.{key}: required message is missing ({REQUIRED_KEY_MEANING[key]})"
                )
        for key, msg in self.messages.items():
            where = f"messages.{key}"
            if not MESSAGE_KEY_RE.match(key):
                problems.append(
                    f"{where}: message keys use capital letters, digits and _, starting with a "
                    "letter (like R1 or R2_BILLING)"
                )
            if msg.locale is not None and not LOCALE_RE.match(msg.locale):
                problems.append(f"{where}.locale: {msg.locale!r} is not a locale such as 'en-GB'")
            if not msg.text.strip():
                problems.append(f"{where}.text: must not be blank")
            problems += _placeholder_problems(where, msg)
        if problems:
            raise ValueError("\n".join(problems))
        return self

    def message(self, key: str) -> Message:
        """The message for ``key``; an unknown key is an InputError naming the known ones."""
        try:
            return self.messages[key]
        except KeyError:
            known = ", ".join(sorted(self.messages))
            raise InputError(f"unknown message key {key!r} (known: {known})") from None

    def locale_for(self, key: str) -> str:
        """The message's own locale, or the file's default."""
        return self.message(key).locale or self.locale


def _list_problems(field: str, items: Sequence[str], *, required: bool) -> list[str]:
    problems: list[str] = []
    if required and not items:
        problems.append(f"{field}: list at least one role, team, process, URL or email address")
    seen: dict[str, int] = {}
    for i, item in enumerate(items):
        if not item.strip():
            problems.append(f"{field}.{i}: must not be blank")
            continue
        folded = " ".join(item.split()).casefold()
        if folded in seen:
            problems.append(f"{field}.{i}: {item!r} is listed twice (first at {seen[folded]})")
        seen.setdefault(folded, i)
    return problems


def _placeholder_problems(where: str, msg: Message) -> list[str]:
    problems: list[str] = []
    declared: list[str] = []
    for i, name in enumerate(msg.placeholders):
        if not PLACEHOLDER_NAME_RE.match(name):
            problems.append(
                f"{where}.placeholders.{i}: {name!r} is not a placeholder name (use lower-case "
                "letters, digits and _, like missing_item)"
            )
        elif name in declared:
            problems.append(f"{where}.placeholders.{i}: {name!r} is declared twice")
        else:
            declared.append(name)
    used = placeholders_in(msg.text)
    for name in used:
        if name not in declared:
            problems.append(
                f"{where}.text: placeholder {{{name}}} is used but not declared in "
                f"{where}.placeholders"
            )
    for name in declared:
        if name not in used:
            problems.append(
                f"{where}.placeholders: {name!r} is declared but {{{name}}} never appears in "
                "the text"
            )
    stray = PLACEHOLDER_RE.sub("", msg.text)
    if "{" in stray or "}" in stray:
        problems.append(
            f"{where}.text: has a brace that is not part of a placeholder such as "
            "{missing_item} (names use lower-case letters, digits and _)"
        )
    return problems


def placeholders_in(text: str) -> list[str]:
    """Placeholder names used in ``text``, in order of first use."""
    return list(dict.fromkeys(PLACEHOLDER_RE.findall(text)))


def wording_path() -> Path:
    """Where the wording file in force lives."""
    return policies_dir() / "refusal-wording.yaml"


def parse_wording(text: str, source: str = "refusal-wording.yaml") -> WordingSet:
    """Validate wording YAML given as text (e.g. an edited draft); errors name ``source``."""
    return validate(WordingSet, load_yaml_text(text, source), source)


def load_wording(path: Path | None = None) -> WordingSet:
    """Read and validate a wording file (default: the one in force)."""
    return load_model(WordingSet, path or wording_path())


def render(message: Message | str, values: Mapping[str, object]) -> str:
    """Fill the ``{placeholders}`` of a message (or template text) from ``values``.

    Every placeholder needs a non-blank value, else InputError naming the missing ones; extra
    values are ignored. Values are inserted literally (a ``{`` inside a value is not expanded).
    """
    text = message.text if isinstance(message, Message) else message
    names = placeholders_in(text)
    if isinstance(message, Message):
        names = list(dict.fromkeys([*message.placeholders, *names]))
    filled: dict[str, str] = {}
    missing: list[str] = []
    for name in names:
        value = values.get(name)
        rendered = "" if value is None else str(value)
        if not rendered.strip():
            missing.append(name)
        filled[name] = rendered
    if missing:
        listed = ", ".join("{" + n + "}" for n in missing)
        raise InputError(f"a value is needed for {listed} before this message can be shown")
    return PLACEHOLDER_RE.sub(lambda m: filled[m.group(1)], text)


def preview(message: Message | str, values: Mapping[str, object] | None = None) -> str:
    """Render with ``EXAMPLE_VALUES`` (overridden by ``values``); unknown names show [name]."""
    text = message.text if isinstance(message, Message) else message
    merged: dict[str, object] = {n: f"[{n.replace('_', ' ')}]" for n in placeholders_in(text)}
    merged.update({n: v for n, v in EXAMPLE_VALUES.items() if n in merged})
    merged.update(values or {})
    return render(text, merged)


def needs_compliance(key: str) -> bool:
    """True when compliance must sign the message as well as the product owner (R3, E1)."""
    return key in COMPLIANCE_KEYS


def signoff_roles(key: str) -> tuple[str, ...]:
    """The roles (review.core.identity.Role values) whose sign-off the message needs."""
    return ("product_owner", "compliance") if needs_compliance(key) else ("product_owner",)
