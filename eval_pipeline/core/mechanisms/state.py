"""State mechanism: which HANDLER entities a user state triggers (how a state test scores:
scoring/registry.py).

Conditions live in the KB's handler entities (`state_conditions`), so the KB is the single
source of truth; `tests/` pins them to the specification's table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from eval_pipeline.core.inputs.banks import UserState
from eval_pipeline.core.inputs.kb import Entity, FieldCondition, LoadMode


def _compare(op: str, value: Any, expected: Any) -> bool:
    if op == "eq":
        return bool(value == expected)
    if value is None:  # a missing or null field can't satisfy an ordering or membership test
        return False
    if op == "in":
        return value in expected
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    return bool(value >= expected) if op == "gte" else bool(value <= expected)


def triggers(state: UserState, conditions: Mapping[str, FieldCondition]) -> bool:
    """Every operator of every field's condition holds on the state's value of that field."""
    return all(_compare(op, state.get(f), want) for f, c in conditions.items() for op, want in c.items())


def triggered_handlers(state: UserState, handlers: Sequence[Entity]) -> list[str]:
    """Handlers whose conditions all hold, in KB order. Handlers without conditions never fire."""
    return [
        h.entity_id
        for h in handlers
        if h.load_mode is LoadMode.STATE and h.state_conditions and triggers(state, h.state_conditions)
    ]
