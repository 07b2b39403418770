"""The one JSON-lines record reader: every importer refuses the same bad lines the same way,
naming the line and the field."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict

from review.core.errors import InputError
from review.core.records import json_lines, parse_json, read_record


class Rec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    n: int = 0


def test_blank_lines_are_skipped_and_a_bom_ignored() -> None:
    assert list(json_lines(["\ufeff{}\n", "  \n", '{"a": 1}\r\n'])) == [
        (1, "{}", "{}"),
        (3, '{"a": 1}', '{"a": 1}'),
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '{"name": "x"',
            r"f\.jsonl: line 4: not valid JSON \(Expecting ',' delimiter at column 13\)",
        ),
        ("[" * 100_000 + "]" * 100_000, r"line 4: not valid JSON \(nested too deeply\)"),
        ('{"name": "x", "n": ' + "9" * 5000 + "}", r"line 4: not valid JSON \(a number too long"),
        ("[1, 2]", r"line 4: expected a JSON object, got a list"),
        ('"name"', r"line 4: expected a JSON object, got text 'name'"),
        ('{"name": "a\\u0000b"}', r"line 4: field name: contains a NUL character"),
        ('{"name": "x", "extra\\u0000": 1}', r"line 4: field extra\x00: contains a NUL"),
        ('{"name": "x", "colour": "red"}', r"line 4: field colour: unknown field"),
        ('{"n": 1}', r"line 4: field name: required field is missing"),
        ('{"name": "x", "n": "many"}', r"line 4: field n: Input should be a valid integer"),
    ],
)
def test_a_bad_line_is_refused_with_its_line_and_field(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        read_record(text, Rec, "f.jsonl: line 4")


def test_a_good_line_is_the_model() -> None:
    assert read_record('{"name": "x", "n": 2}', Rec, "f: line 1") == Rec(name="x", n=2)
    assert parse_json("[1]") == [1]
