"""Strict YAML loading for the files people edit and sign.

``safe_load`` semantics, plus: duplicate keys are refused (PyYAML silently keeps the last),
aliases are refused (they can make a structure refer to itself or grow exponentially), nesting
deeper than :data:`MAX_DEPTH` and texts longer than the caller's limit are refused before
parsing goes further, numbers Python cannot hold are refused with their line, and
validation errors from pydantic are turned into one message naming the file, the key path and
the problem.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node, ScalarNode

from review.core.errors import PolicyFileError

M = TypeVar("M", bound=BaseModel)

#: Lists and mappings nested deeper than this are refused (the deepest file shipped nests 5);
#: without a limit the composer recurses until Python's recursion limit.
MAX_DEPTH = 20

#: The longest YAML text read by default: 10 times the largest policy file shipped (under 10 kB);
#: the pure-Python parser reads 100-200 kB a second, so this bounds a load to under a second.
MAX_YAML_CHARS = 100_000


class _StrictLoader(yaml.SafeLoader):
    _depth = 0

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        # An alias (*name) can make a structure refer to itself or grow exponentially; the
        # files people write here never need one, so it is refused with its position.
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise ComposerError(
                None, None, "aliases (*name) are not allowed in this file", event.start_mark
            )
        nests = self.check_event(yaml.SequenceStartEvent, yaml.MappingStartEvent)
        if nests:
            if self._depth >= MAX_DEPTH:
                event = self.peek_event()  # type: ignore[no-untyped-call]
                raise ComposerError(
                    None,
                    None,
                    f"lists and mappings are nested more than {MAX_DEPTH} levels deep",
                    event.start_mark,
                )
            self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            if nests:
                self._depth -= 1

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, Node] = {}
        for key_node, _value in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                first = seen[key].start_mark.line + 1
                raise ConstructorError(
                    None,
                    None,
                    f"duplicate key {key!r} (first defined on line {first})",
                    key_node.start_mark,
                )
            seen[key] = key_node
        return super().construct_mapping(node, deep=deep)


# Dates stay strings here: the schema parses them, so an impossible date ("2025-13-45") is a
# field error naming the key instead of a crash inside the YAML library.
def _timestamp_as_text(loader: _StrictLoader, node: Node) -> str:
    assert isinstance(node, ScalarNode)
    return str(loader.construct_scalar(node))


_StrictLoader.add_constructor("tag:yaml.org,2002:timestamp", _timestamp_as_text)


# A number of more digits than Python converts (ValueError) or a sexagesimal float beyond
# the float range (OverflowError) is refused at its position, like any other YAML problem.
def _number(
    construct: Callable[[yaml.SafeLoader, ScalarNode], Any],
) -> Callable[[_StrictLoader, Node], Any]:
    def build(loader: _StrictLoader, node: Node) -> Any:
        assert isinstance(node, ScalarNode)
        try:
            return construct(loader, node)
        except (ValueError, OverflowError):
            raise ConstructorError(
                None, None, "a number too large to read", node.start_mark
            ) from None

    return build


_StrictLoader.add_constructor("tag:yaml.org,2002:int", _number(yaml.SafeLoader.construct_yaml_int))
_StrictLoader.add_constructor(
    "tag:yaml.org,2002:float", _number(yaml.SafeLoader.construct_yaml_float)
)


def _loader() -> type[_StrictLoader]:
    """The strict loader with libyaml's scanner and parser when PyYAML has them (seven times
    faster: the pages' integrity check parses every stored policy version on a server's first
    view), its own otherwise. The composing and constructing stay the strict loader's own
    Python code, so aliases, depth and duplicate keys are refused as above."""
    try:
        from yaml._yaml import CParser
    except ImportError:  # PyYAML built without libyaml
        return _StrictLoader
    from yaml.composer import Composer
    from yaml.constructor import SafeConstructor
    from yaml.resolver import Resolver

    class Fast(CParser, _StrictLoader):
        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)
            Composer.__init__(self)

        # events from libyaml, nodes from the Python composer (CParser has its own)
        get_single_node = Composer.get_single_node
        compose_document = Composer.compose_document
        compose_node = _StrictLoader.compose_node
        compose_scalar_node = Composer.compose_scalar_node
        compose_sequence_node = Composer.compose_sequence_node
        compose_mapping_node = Composer.compose_mapping_node
        check_node = Composer.check_node
        get_node = Composer.get_node

    return Fast


_LOADER = _loader()


def load_yaml_text(text: str, source: str, max_chars: int = MAX_YAML_CHARS) -> Any:
    """Parse YAML text strictly; errors name ``source`` and the line. A text longer than
    ``max_chars`` is refused before it is parsed."""
    if len(text) > max_chars:
        raise PolicyFileError(
            f"{source}: line 1: the YAML text is longer than {max_chars:,} characters "
            f"({len(text):,}); nothing was read"
        )
    try:
        return yaml.load(text, Loader=_LOADER)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "unknown position"
        raise PolicyFileError(f"{source}: {where}: {exc.problem or exc}") from None
    except yaml.YAMLError as exc:
        raise PolicyFileError(f"{source}: not valid YAML: {exc}") from None
    except (ValueError, TypeError, RecursionError) as exc:
        raise PolicyFileError(f"{source}: not valid YAML: {exc}") from None


def format_validation_error(source: str, exc: ValidationError) -> str:
    lines: list[str] = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unknown key (not allowed here)"
        elif err["type"] == "missing":
            msg = "required key is missing"
        elif err["type"] == "value_error":
            msg = msg.removeprefix("Value error, ")
        if not err["loc"] and err["type"] == "value_error":
            # model-level checks already name the key path in each line
            lines.extend(f"{source}: {line}" for line in msg.splitlines())
            continue
        lines.append(f"{source}: {loc}: {msg}")
    return "\n".join(lines)


def validate(model: type[M], data: Any, source: str) -> M:
    if not isinstance(data, dict):
        raise PolicyFileError(f"{source}: (top level): expected a mapping of keys to values")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise PolicyFileError(format_validation_error(source, exc)) from None


def load_model(model: type[M], path: Path) -> M:
    """Read ``path`` and validate it against ``model``; every problem names the file by its
    name (the messages reach the pages, which never show a server path)."""
    source = path.name
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PolicyFileError(f"{source}: cannot be read: {exc.strerror}") from None
    return validate(model, load_yaml_text(text, source), source)
