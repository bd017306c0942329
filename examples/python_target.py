"""A minimal system under test, as a Python entry point. In models.yaml:

    system: {kind: python, entrypoint: "examples.python_target:TinyRetriever"}

Replace the method bodies with calls into your own retrieval code. Each method receives the
request (attributes `mechanism`, `message`, `user_type`, `user_state`, `top_k_candidates`,
`top_k`; see docs/http_target.md) and returns a dict with the answer part its mechanism needs.
Methods may be `async def` too. This one is deliberately naive and needs only the standard
library and PyYAML: it reads a single-file KB (`TINY_KB`, default `kb.yaml`) and the pattern
rules (`TINY_RULES`, default `test_banks/pattern/pattern_rules.json`).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import yaml

Answer = dict[str, Any]


def _holds(value: Any, condition: dict[str, Any]) -> bool:
    """A KB state condition ({op: expected}, ops eq, in, gte, lte) on one user-state value."""
    for op, expected in condition.items():
        if op == "eq":
            ok = value == expected
        elif op == "in":
            ok = value is not None and value in expected
        else:
            number = isinstance(value, int | float) and not isinstance(value, bool)
            ok = number and (value >= expected if op == "gte" else value <= expected)
        if not ok:
            return False
    return True


class TinyRetriever:
    """One method per mechanism; eval-pipeline instantiates it without arguments."""

    def __init__(self) -> None:
        kb = yaml.safe_load(Path(os.environ.get("TINY_KB", "kb.yaml")).read_text())
        self.entities: list[dict[str, Any]] = kb["entities"]
        rules_path = Path(os.environ.get("TINY_RULES", "test_banks/pattern/pattern_rules.json"))
        self.rules = json.loads(rules_path.read_text())

    def semantic(self, request: Any) -> Answer:
        """Word overlap between the message and each entity's title and summary."""
        words = set(re.findall(r"\w+", request.message.lower()))
        scored = sorted(
            (
                (len(words & set(re.findall(r"\w+", f"{e['title']} {e['summary']}".lower()))), e["entity_id"])
                for e in self.entities
                if e["load_mode"] == "SEMANTIC"
            ),
            reverse=True,
        )[: request.top_k_candidates]
        return {
            "candidates": [{"entity_id": e, "score": float(s)} for s, e in scored],
            "selections": [{"entity_id": e} for _, e in scored[: request.top_k]],
        }

    def state(self, request: Any) -> Answer:
        fired = [
            e["entity_id"]
            for e in self.entities
            if e["load_mode"] == "STATE"
            and e.get("state_conditions")
            and all(_holds(request.user_state.get(f), c) for f, c in e["state_conditions"].items())
        ]
        return {"triggered_handlers": fired}

    def pattern(self, request: Any) -> Answer:
        matches = [
            {"entity_id": entity, "kind": "crisis", "pattern": rule["pattern"]}
            for rule in self.rules["crisis_patterns"]
            if re.search(rule["pattern"], request.message, re.IGNORECASE)
            for entity in rule["entities"]
        ]
        for boost in self.rules["keyword_boosts"]:
            hits = [k for k in boost["keywords"] if re.search(rf"\b{re.escape(k)}\b", request.message, re.I)]
            if hits:
                matches.append({"entity_id": boost["entity"], "kind": "keyword", "matched_text": hits[0]})
        return {"pattern_matches": matches}

    def always(self, request: Any) -> Answer:
        loaded = [
            e["entity_id"]
            for e in self.entities
            if e["load_mode"] == "ALWAYS"
            and (not e.get("user_types") or request.user_type in e["user_types"])
        ]
        return {"always_loaded": loaded}
