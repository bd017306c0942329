"""The shipped sample data: sizes, references and the specification's handler table are pinned."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from eval_pipeline.core.inputs.banks import Mechanism
from eval_pipeline.core.inputs.kb import KnowledgeBase, LoadMode
from eval_pipeline.core.inputs.loading import Banks
from eval_pipeline.core.inputs.validation import load_validated
from tests.spec_tables import SPEC_HANDLER_CONDITIONS

REPO = Path(__file__).resolve().parents[1]

PLACEHOLDER = re.compile(r"\b(TODO|TBD|FIXME|lorem ipsum|placeholder)\b|\[[A-Z _]+\]", re.IGNORECASE)


@pytest.fixture(scope="module")
def data() -> tuple[KnowledgeBase, Banks]:
    return load_validated(REPO / "kb", REPO / "test_banks")  # raises on any problem


def test_bank_sizes_are_the_specifications(data: tuple[KnowledgeBase, Banks]) -> None:
    _, banks = data
    assert banks.counts() == {
        Mechanism.SEMANTIC: 94,
        Mechanism.STATE: 18,
        Mechanism.PATTERN: 28,
        Mechanism.ALWAYS: 7,
    }


def test_kb_has_at_least_70_entities_and_every_mode(data: tuple[KnowledgeBase, Banks]) -> None:
    kb, _ = data
    assert len(kb.entities) >= 70
    assert all(kb.with_mode(m) for m in LoadMode)


def test_handler_conditions_match_the_specification(data: tuple[KnowledgeBase, Banks]) -> None:
    kb, _ = data
    handlers = {e.entity_id: e.state_conditions for e in kb.with_mode(LoadMode.STATE)}
    assert handlers == SPEC_HANDLER_CONDITIONS


def test_every_semantic_entity_is_some_tests_primary(data: tuple[KnowledgeBase, Banks]) -> None:
    kb, banks = data
    assert banks.semantic is not None
    primaries = {e for t in banks.semantic.tests for e in t.expected_primary}
    assert {e.entity_id for e in kb.with_mode(LoadMode.SEMANTIC)} <= primaries


def test_semantic_bank_breadth(data: tuple[KnowledgeBase, Banks]) -> None:
    _, banks = data
    assert banks.semantic is not None
    assert len({t for test in banks.semantic.tests for t in test.topics}) >= 20
    assert len({test.category for test in banks.semantic.tests}) == 7


def test_no_entity_text_is_a_placeholder(data: tuple[KnowledgeBase, Banks]) -> None:
    kb, _ = data
    for e in kb.entities:
        for text in (e.title, e.summary, e.content):
            assert not PLACEHOLDER.search(text), f"{e.entity_id}: placeholder text"
        if e.load_mode is LoadMode.SEMANTIC:
            assert 80 <= len(e.content.split()) <= 250, e.entity_id
