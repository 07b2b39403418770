"""Drafts: edited messages turned into a validated wording file, keeping the file's header and
changing only the lines of the edited messages."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from review.core.errors import InputError
from review.wording.messages import REQUIRED_KEYS, WordingSet, parse_wording, placeholders_in
from review.wording.versions import key_order

__all__ = ["MessageDraft", "draft_yaml", "dump_wording", "splice_wording"]


# ---------------------------------------------------------------------------------------------
# Drafts: edited messages -> a validated wording file
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MessageDraft:
    """An edited message. ``None`` fields keep the base message's value; placeholders are
    taken from the ``{names}`` in the text."""

    text: str
    description: str | None = None
    locale: str | None = None


class _Dumper(yaml.SafeDumper):
    """Block lists indented under their key, as in the shipped file."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        return super().increase_indent(flow, False)


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style: str | None = None
    if "\n" in value:
        style = "|"
    elif len(value) > 76 and value == value.strip() and "  " not in value:
        style = ">"
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


class _Flow(list[str]):
    """A short list written on one line, like ``placeholders: [topic, missing_item]``."""


def _represent_flow(dumper: yaml.SafeDumper, value: _Flow) -> yaml.SequenceNode:
    return dumper.represent_sequence("tag:yaml.org,2002:seq", list(value), flow_style=True)


_Dumper.add_representer(str, _represent_str)


_Dumper.add_representer(_Flow, _represent_flow)


def _header(text: str) -> str:
    """The comment block at the top of a wording file (kept when a draft is written)."""
    lines: list[str] = []
    for line in text.splitlines():
        if line.startswith("#") or (not line.strip() and lines):
            lines.append(line)
            continue
        break
    while lines and not lines[-1].strip():
        lines.pop()
    return "\n".join(lines) + "\n" if lines else ""


def _message_plain(ws: WordingSet, key: str) -> dict[str, Any]:
    msg = ws.messages[key]
    entry: dict[str, Any] = {"description": msg.description, "text": msg.text}
    entry["placeholders"] = _Flow(msg.placeholders)
    if msg.locale is not None:
        entry["locale"] = msg.locale
    return entry


def _plain(ws: WordingSet) -> dict[str, Any]:
    messages = {key: _message_plain(ws, key) for key in key_order(ws.messages)}
    data: dict[str, Any] = {
        "version": ws.version,
        "locale": ws.locale,
        "allowed_contacts": list(ws.allowed_contacts),
    }
    if ws.restricted_titles:
        data["restricted_titles"] = list(ws.restricted_titles)
    if ws.company_names:
        data["company_names"] = list(ws.company_names)
    data["messages"] = messages
    return data


def dump_wording(ws: WordingSet, header: str = "") -> str:
    """The wording as YAML in the shipped file's layout (long texts folded); round-trips."""
    data = _plain(ws)
    body = _yaml(data)
    if parse_wording(body, "draft") != ws:  # a text the folded style cannot carry exactly
        body = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=10_000)
    return header + ("\n" if header else "") + body


def _yaml(data: Mapping[str, Any]) -> str:
    return yaml.dump(
        dict(data), Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=92, indent=2
    )


def _block_lines(data: Mapping[str, Any], indent: int) -> list[str]:
    pad = " " * indent
    return [pad + line + "\n" if line else "\n" for line in _yaml(data).splitlines()]


def _block_end(lines: Sequence[str], start: int, limit: int) -> int:
    """End (exclusive) of the block starting at ``start`` and running at most to ``limit``,
    leaving out the blank and comment lines that lead into the next block."""
    end = limit
    while end > start + 1 and (not lines[end - 1].strip() or lines[end - 1].lstrip()[:1] == "#"):
        end -= 1
    return end


_Edit = tuple[int, int, list[str]]  # (start line, end line, replacement lines)


def splice_wording(base_text: str, new: WordingSet) -> str | None:
    """``base_text`` with only the parts that differ from ``new`` rewritten: comments, order
    and layout of everything else are kept, so the stored YAML diff shows just the change.
    ``None`` when the base file's layout does not allow it (then dump the whole file)."""
    try:
        base = parse_wording(base_text, "base wording")
        root = yaml.compose(base_text)
    except (InputError, yaml.YAMLError):
        return None
    if not isinstance(root, yaml.MappingNode) or root.flow_style:
        return None
    lines = base_text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    top = [(str(k.value), k.start_mark.line, v) for k, v in root.value]
    spans: dict[str, tuple[int, int, int]] = {}
    for i, (name, line, _v) in enumerate(top):
        limit = top[i + 1][1] if i + 1 < len(top) else len(lines)
        spans[name] = (line, _block_end(lines, line, limit), limit)
    plain = _plain(new)
    edits = _setting_edits(base, new, plain, spans)
    messages_node = next((v for name, _line, v in top if name == "messages"), None)
    if edits is None or not isinstance(messages_node, yaml.MappingNode):
        return None
    if messages_node.flow_style:
        return None
    edits += _message_edits(lines, messages_node, spans["messages"][1], base, new, plain)
    for start, end, replacement in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        lines[start:end] = replacement
    out = "".join(lines)
    try:
        if parse_wording(out, "draft") != new:
            return None
    except InputError:
        return None
    return out


def _setting_edits(
    base: WordingSet,
    new: WordingSet,
    plain: dict[str, Any],
    spans: Mapping[str, tuple[int, int, int]],
) -> list[_Edit] | None:
    """The top-level settings that changed, rewritten in place (a new one goes before the
    messages); None when one cannot be placed."""
    edits: list[_Edit] = []
    for name in ("version", "locale", "allowed_contacts", "restricted_titles", "company_names"):
        if getattr(base, name) == getattr(new, name):
            continue
        value = plain.get(name)
        if name in spans:
            start, end, _limit = spans[name]
            edits.append((start, end, _block_lines({name: value}, 0) if value else []))
        elif value and "messages" in spans:
            at = spans["messages"][0]
            edits.append((at, at, [*_block_lines({name: value}, 0), "\n"]))
        else:
            return None
    return edits


def _message_edits(
    lines: Sequence[str],
    messages_node: yaml.MappingNode,
    m_end: int,
    base: WordingSet,
    new: WordingSet,
    plain: dict[str, Any],
) -> list[_Edit]:
    """The messages removed (with the blank lines after them), changed (rewritten at their
    indent) and added (at the end of the messages block)."""
    edits: list[_Edit] = []
    entries = [(str(k.value), k.start_mark.line) for k, _v in messages_node.value]
    for i, (key, line) in enumerate(entries):
        limit = entries[i + 1][1] if i + 1 < len(entries) else m_end
        end = _block_end(lines, line, limit)
        if key not in new.messages:
            gap = end
            while gap < limit and not lines[gap].strip():
                gap += 1
            edits.append((line, gap, []))
        elif base.messages[key] != new.messages[key]:
            indent = len(lines[line]) - len(lines[line].lstrip())
            edits.append((line, end, _block_lines({key: plain["messages"][key]}, indent)))
    indent = len(lines[entries[0][1]]) - len(lines[entries[0][1]].lstrip()) if entries else 2
    added = [k for k in plain["messages"] if k not in base.messages]
    if added:
        block: list[str] = []
        for key in added:
            block += ["\n", *_block_lines({key: plain["messages"][key]}, indent)]
        edits.append((m_end, m_end, block))
    return edits


def draft_yaml(
    base_text: str,
    edits: Mapping[str, MessageDraft],
    *,
    remove: Iterable[str] = (),
    allowed_contacts: Sequence[str] | None = None,
    restricted_titles: Sequence[str] | None = None,
    version: int | None = None,
    source: str = "draft",
) -> str:
    """Apply edited messages (and optionally new contact / restricted-title lists) to a wording
    file and return the new file, validated: an error names the key and the problem."""
    base = parse_wording(base_text, "base wording")
    data = base.model_dump(mode="json")
    messages: dict[str, Any] = data["messages"]
    for key in remove:
        if key in REQUIRED_KEYS:
            raise InputError(f"messages.{key}: a required message cannot be removed")
        messages.pop(key, None)
    for key, d in edits.items():
        key = key.strip()
        old = messages.get(key)
        description = d.description if d.description is not None else (old or {}).get("description")
        if description is None:
            raise InputError(
                f"messages.{key}.description: a new message needs a description of when it is used"
            )
        messages[key] = {
            "text": d.text.strip(),
            "placeholders": placeholders_in(d.text),
            "locale": d.locale if d.locale is not None else (old or {}).get("locale"),
            "description": description.strip(),
        }
    if allowed_contacts is not None:
        data["allowed_contacts"] = [c.strip() for c in allowed_contacts if c.strip()]
    if restricted_titles is not None:
        data["restricted_titles"] = [t.strip() for t in restricted_titles if t.strip()]
    if version is not None:
        data["version"] = version
    for entry in messages.values():
        if entry.get("locale") is None:
            entry.pop("locale", None)
    raw = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=10_000)
    ws = parse_wording(raw, source)
    return splice_wording(base_text, ws) or dump_wording(ws, _header(base_text))
