"""Taxonomy: the shipped file is valid; malformed files are refused naming file, key, problem."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from review.core.errors import PolicyFileError
from review.core.taxonomy import CORE_DECISIONS, Taxonomy, load_taxonomy
from tests.helpers.paths import ROOT

GOOD = (ROOT / "policies" / "taxonomy.yaml").read_text(encoding="utf-8")


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "taxonomy.yaml"
    p.write_text(text, encoding="utf-8")
    return p


def test_shipped_taxonomy_has_the_domain_vocabulary(tax: Taxonomy) -> None:
    assert set(CORE_DECISIONS) <= set(tax.decisions)
    assert len(tax.reason_codes) == 10
    # signal_missing is the gate's own code (an input it did not get), not a case's property
    assert "signal_missing" in tax.reason_codes
    assert set(tax.case_reason_codes()) == set(tax.reason_codes) - {"signal_missing"}
    assert {
        "empty_retrieval",
        "near_neighbour_distractor",
        "temporal_mismatch",
        "entity_collision",
        "compound_insufficiency",
        "access_filtered_answer",
        "adversarial_instruction",
    } == set(tax.slices)
    assert tax.categories["ambiguous"].default_decision == "clarify"
    assert tax.categories["restricted_topic"].default_decision == "escalate"
    assert tax.categories["false_premise"].default_decision == "answer"
    assert tax.answering_decisions() == {"answer", "partial"}
    for section in ("decisions", "reason_codes", "categories", "slices"):
        for term in getattr(tax, section).values():
            assert len(term.definition) > 10


def test_duplicate_key_is_refused_with_its_line(tmp_path: Path) -> None:
    text = GOOD.replace(
        "  abstain:\n",
        "  answer:\n    label: Again\n    definition: Dup entry.\n    answers: true\n  abstain:\n",
        1,
    )
    with pytest.raises(PolicyFileError) as info:
        load_taxonomy(write(tmp_path, text))
    msg = str(info.value)
    assert "taxonomy.yaml" in msg and "duplicate key 'answer'" in msg and "line" in msg


def test_unknown_key_is_refused(tmp_path: Path) -> None:
    data = yaml.safe_load(GOOD)
    data["slices"]["empty_retrieval"]["colour"] = "red"
    with pytest.raises(PolicyFileError) as info:
        load_taxonomy(write(tmp_path, yaml.safe_dump(data)))
    assert "slices.empty_retrieval.colour: unknown key" in str(info.value)


def test_unknown_top_level_section_is_refused(tmp_path: Path) -> None:
    data = yaml.safe_load(GOOD)
    data["decisons"] = {}
    with pytest.raises(PolicyFileError, match="decisons: unknown key"):
        load_taxonomy(write(tmp_path, yaml.safe_dump(data)))


def test_wrong_type_is_refused(tmp_path: Path) -> None:
    data = yaml.safe_load(GOOD)
    data["decisions"]["answer"]["answers"] = "yes"
    with pytest.raises(PolicyFileError) as info:
        load_taxonomy(write(tmp_path, yaml.safe_dump(data)))
    assert "decisions.answer.answers" in str(info.value)


def test_unknown_reference_is_refused(tmp_path: Path) -> None:
    data = yaml.safe_load(GOOD)
    data["categories"]["ambiguous"]["default_decision"] = "clarfy"
    with pytest.raises(PolicyFileError) as info:
        load_taxonomy(write(tmp_path, yaml.safe_dump(data)))
    assert "categories.ambiguous.default_decision: 'clarfy' is not defined under decisions" in str(
        info.value
    )


def test_missing_core_decision_and_missing_key(tmp_path: Path) -> None:
    data = yaml.safe_load(GOOD)
    del data["decisions"]["escalate"]
    data["categories"]["restricted_topic"]["default_decision"] = "abstain"
    with pytest.raises(PolicyFileError, match="core decisions escalate are missing"):
        load_taxonomy(write(tmp_path, yaml.safe_dump(data)))
    data = yaml.safe_load(GOOD)
    del data["reason_codes"]["false_premise"]["definition"]
    with pytest.raises(PolicyFileError, match=r"reason_codes\.false_premise\.definition: required"):
        load_taxonomy(write(tmp_path, yaml.safe_dump(data)))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "expected a mapping"),
        ("- a\n- b\n", "expected a mapping"),
        ("decisions: [unclosed\n", "line"),
        ("version: 1\n\tdecisions: {}\n", "line"),
        ("!!python/object:os.system {}\n", "line"),
    ],
)
def test_malformed_yaml_is_refused(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(PolicyFileError) as info:
        load_taxonomy(write(tmp_path, text))
    assert "taxonomy.yaml" in str(info.value) and expected in str(info.value)


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(PolicyFileError, match="cannot be read"):
        load_taxonomy(tmp_path / "nope.yaml")
