"""Strict YAML: duplicate keys and aliases are refused with their position, for the policy
files and for the front matter of uploaded documents alike."""

from __future__ import annotations

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
