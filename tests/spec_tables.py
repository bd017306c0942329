"""Tables copied from the specification that tests pin the product to."""

from __future__ import annotations

from typing import Any

# Specification §6.2: the state conditions of each handler.
SPEC_HANDLER_CONDITIONS: dict[str, dict[str, dict[str, Any]]] = {
    "handler_first_conversation": {"is_first_conversation": {"eq": True}},
    "handler_returning_user": {"is_first_conversation": {"eq": False}, "days_since_last": {"gte": 7}},
    "handler_post_escalation": {"is_first_conversation": {"eq": False}, "last_rating": {"lte": 2}},
    "handler_celebrating_wins": {"is_first_conversation": {"eq": False}, "last_rating": {"gte": 4}},
    "handler_clinician_mode": {"user_type": {"in": ["CLINICIAN", "PROFESSIONAL"]}},
    "handler_interaction_debrief": {
        "is_first_conversation": {"eq": False},
        "has_pending_debrief": {"eq": True},
    },
}
