"""What the calibrator model reads: the instructions and output schema, the whole KB as one cached
prefix (identical for every test), and per test the user message and today's expectations."""

from __future__ import annotations

import json
from typing import Any

from eval_pipeline.core.expectations.resolution import ResolvedExpectation, source_kind
from eval_pipeline.core.inputs.banks import SemanticTest
from eval_pipeline.core.inputs.kb import KnowledgeBase
from eval_pipeline.core.inputs.stage_depths import SELECTION_K

PROMPT_VERSION = "calibrate-v1"

LISTS = ("expected_primary", "expected_secondary", "not_expected")

SYSTEM_INSTRUCTIONS = f"""\
You calibrate the expected results of retrieval tests for a conversational assistant. The \
assistant answers users with the help of a knowledge base (KB); for each user message a retrieval \
system loads at most {SELECTION_K} KB entities into the assistant's context. A test states which \
entities that retrieval should and should not load for one user message.

The full KB follows. Each request then gives you one test: its user message, its category and \
topics, and the expectations currently recorded for it. Judge from the KB content which entities a \
good retrieval must load for that message and propose the test's expectations:
- expected_primary: the entities the answer cannot do without (usually one, rarely more than two).
- expected_secondary: entities that clearly help but are not essential.
- not_expected: entities that would be wrong or harmful to load for this message and that a \
retriever might plausibly pick (for example crisis content for an ordinary complaint).
- rank_check: pairs where `higher` should rank above `lower` when both are loaded; both must be in \
expected_primary or expected_secondary. Use an empty list when order does not matter.
- reasoning: two or three sentences on what you kept, what you changed and why.

Rules:
- Name only entities whose load_mode is SEMANTIC, copying each entity id exactly.
- An entity may appear in only one of expected_primary, expected_secondary and not_expected.
- expected_primary and expected_secondary together should fit in {SELECTION_K} entities.
- Keep the current expectations where they are still right; change them only where the KB now \
supports a better answer.
- Answer with the JSON object only.
"""

# Relevance a calibration leaves as judged: never shown to, nor proposed by, the model.
NOT_CALIBRATED = frozenset({"expected_any", "relevant"})
_ID_LIST: dict[str, Any] = {"type": "array", "items": {"type": "string"}}

# Structured output (output_config.format). Reasoning comes first so the lists follow from it.
OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "reasoning": {"type": "string"},
        "expected_primary": _ID_LIST,
        "expected_secondary": _ID_LIST,
        "not_expected": _ID_LIST,
        "rank_check": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"higher": {"type": "string"}, "lower": {"type": "string"}},
                "required": ["higher", "lower"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["reasoning", *LISTS, "rank_check"],
    "additionalProperties": False,
}


def kb_text(kb: KnowledgeBase) -> str:
    """Every entity, sorted by id so the cached prefix does not depend on file order."""
    parts = [f'<knowledge_base version="{kb.kb_version}" entities="{len(kb.entities)}">']
    for e in sorted(kb.entities, key=lambda e: e.entity_id):
        parts.append(
            f'<entity id="{e.entity_id}" type="{e.entity_type.value}" load_mode="{e.load_mode.value}">\n'
            f"<title>{e.title}</title>\n<summary>{e.summary}</summary>\n"
            f"<content>\n{e.content.strip()}\n</content>\n</entity>"
        )
    parts.append("</knowledge_base>")
    return "\n".join(parts)


def user_turn(test: SemanticTest, current: ResolvedExpectation) -> str:
    """The per-test user turn: after the cache breakpoint, so it never invalidates the KB prefix."""
    state = (
        f"\n<user_state>{json.dumps(test.user_state, sort_keys=True)}</user_state>" if test.user_state else ""
    )
    # Calibration never sees a test stating any-of or graded relevance (calibration/scope.py), so
    # the prompt shows the lists it proposes, as it did before those fields existed.
    expectations = current.expectations.model_dump_json(exclude=set(NOT_CALIBRATED))
    return (
        f'<test id="{test.test_id}" category="{test.category}" topics="{", ".join(test.topics)}">\n'
        f"<user_message>\n{test.prompt}\n</user_message>{state}\n"
        f'<current_expectations source="{source_kind(current.source)}">\n{expectations}\n'
        "</current_expectations>\n</test>\n"
        "Propose this test's expectations."
    )
