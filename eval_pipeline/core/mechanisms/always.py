"""Always mechanism: the entities loaded for every conversation of a user type."""

from __future__ import annotations

from collections.abc import Sequence

from eval_pipeline.core.inputs.kb import Entity, LoadMode, UserType


def always_loaded(user_type: UserType, entities: Sequence[Entity]) -> list[str]:
    """ALWAYS entities whose `user_types` is empty (everyone) or names this user type."""
    return [
        e.entity_id
        for e in entities
        if e.load_mode is LoadMode.ALWAYS and (not e.user_types or user_type in e.user_types)
    ]
