"""Strict YAML: duplicate keys and aliases are refused with their position, for the policy
files and for the front matter of uploaded documents alike."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from review.core.errors import InputError, PolicyFileError
from review.core.taxonomy import Taxonomy
from review.core.yamlstrict import load_yaml_text
from review.corpus import corpus
from tests.helpers.corpus import GOOD


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("a: &x [*x]\n", "line 1, column 8"),  # a list that contains itself
        ("a: &x 1\nb: *x\n", "line 2, column 4"),
        ("a: &a [1, 2]\nb: [*a, *a, *a]\n", "line 2, column 5"),  # the start of a "laughs" bomb
    ],
)
def test_aliases_are_refused_with_their_position(text: str, where: str) -> None:
    with pytest.raises(PolicyFileError, match=f"f.yaml: {where}: aliases"):
        load_yaml_text(text, "f.yaml")


def test_duplicate_keys_are_refused() -> None:
    with pytest.raises(PolicyFileError, match="duplicate key 'a' \\(first defined on line 1\\)"):
        load_yaml_text("a: 1\na: 2\n", "f.yaml")


def test_a_document_whose_front_matter_refers_to_itself_is_refused(tax: Taxonomy) -> None:
    bad = GOOD.replace("doc_id: POL-REFUND", "doc_id: &a [*a]")
    with pytest.raises(InputError, match=r"doc\.md: line 2, column 1[0-9]: aliases"):
        corpus.parse_upload("doc.md", bad, tax)


def test_nesting_deeper_than_the_limit_is_refused_with_its_position() -> None:
    from review.core.yamlstrict import MAX_DEPTH

    ok = "a: " + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + "\n"
    assert load_yaml_text(ok, "f.yaml")["a"] is not None
    deep = "a: " + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "\n"
    with pytest.raises(
        PolicyFileError,
        match=rf"f.yaml: line 1, column {MAX_DEPTH + 3}: .*"
        rf"nested more than {MAX_DEPTH} levels deep",
    ):
        load_yaml_text(deep, "f.yaml")
    # flow mappings inside lists (each an implicit key) hit the same limit, not RecursionError
    with pytest.raises(PolicyFileError, match="nested more than"):
        load_yaml_text("a: " + "[b: " * 5000 + "]" * 5000, "f.yaml")
    blocks = "".join(" " * i + f"k{i}:\n" for i in range(30)) + " " * 30 + "v: 1\n"
    with pytest.raises(PolicyFileError, match=r"line 2[0-9], column .*nested more than"):
        load_yaml_text(blocks, "f.yaml")


@pytest.mark.parametrize("value", ["9" * 5000, ":".join(["1"] * 250) + ".5", "-" + "9" * 5000])
def test_numbers_python_cannot_hold_are_refused_with_their_line(value: str) -> None:
    with pytest.raises(PolicyFileError, match=r"f\.yaml: line 2, column 4: a number too large"):
        load_yaml_text(f"a: 1\nb: {value}\n", "f.yaml")


def test_a_yaml_text_longer_than_the_limit_is_refused_before_parsing() -> None:
    with pytest.raises(PolicyFileError, match=r"f\.yaml: line 1: the YAML text is longer than 10"):
        load_yaml_text("a: 1\n" * 10, "f.yaml", max_chars=10)


@pytest.mark.parametrize(
    ("meta", "message"),
    [
        ("x: " + "[" * 100 + "]" * 100, r"line 11, column 2[0-9]: .*nested more than 20"),
        ("x: " + ":".join(["1"] * 250) + ".5", r"line 11, column 4: a number too large"),
        ("title: " + "t" * 30_000, r"line 2: front matter: longer than 20,000 characters"),
        ("x: &a [1]\ny: [*a, *a, *a, *a, *a, *a, *a, *a, *a]", r"line 12, column 5: aliases"),
    ],
)
def test_hostile_front_matter_is_refused_with_its_line(
    tax: Taxonomy, meta: str, message: str
) -> None:
    text = GOOD.replace("jurisdiction: EU\n", f"jurisdiction: EU\n{meta}\n")
    with pytest.raises(InputError, match=rf"doc\.md: {message}"):
        corpus.parse_upload("doc.md", text, tax)


def test_the_fast_loader_reads_every_shipped_file_as_the_python_one_does() -> None:
    """With libyaml's scanner and parser (when PyYAML has them) every shipped YAML file reads
    to the same values as with PyYAML's own, and malformed text is still a PolicyFileError
    naming the file and the line (the wording of a syntax problem is libyaml's)."""
    import yaml

    from review.core.yamlstrict import load_yaml_text
    from tests.helpers.paths import ROOT

    def dates_as_text(value: Any) -> Any:  # the strict loader keeps dates as written
        if isinstance(value, dict):
            return {k: dates_as_text(v) for k, v in value.items()}
        if isinstance(value, list):
            return [dates_as_text(v) for v in value]
        return value.isoformat() if isinstance(value, dt.date) else value

    for path in sorted((ROOT / "policies").glob("*.yaml")):
        text = path.read_text(encoding="utf-8")
        expected = dates_as_text(yaml.safe_load(text))
        assert load_yaml_text(text, path.name) == expected, path.name
    for bad, line in (("a: [1, 2\n", 2), ("a: b: c\n", 1), ("a:\n\t- 1\n", 2), ("- a\nb: 1\n", 2)):
        with pytest.raises(PolicyFileError, match=rf"^f\.yaml: line {line}, column \d+: "):
            load_yaml_text(bad, "f.yaml")
