"""JSON Schemas for the files people edit by hand, so editors can validate them as they type, and
for the contract a team's own system implements (docs/http_target.md)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from eval_pipeline.core.inputs.banks import AlwaysBank, PatternBank, PatternRules, SemanticBank, StateBank
from eval_pipeline.core.inputs.contract import SystemAnswer, SystemRequest
from eval_pipeline.core.inputs.history_file import HistoryFile
from eval_pipeline.core.inputs.kb import Entity, KnowledgeBase

SCHEMA_MODELS: dict[str, type[BaseModel]] = {
    "kb_entity": Entity,
    "kb_single_file": KnowledgeBase,
    "semantic_bank": SemanticBank,
    "state_bank": StateBank,
    "pattern_bank": PatternBank,
    "pattern_rules": PatternRules,
    "always_bank": AlwaysBank,
    "expectation_history": HistoryFile,
    "system_request": SystemRequest,
    "system_answer": SystemAnswer,
}


def json_schemas() -> dict[str, dict[str, Any]]:
    """File name (without `.schema.json`) -> JSON Schema (draft 2020-12)."""
    draft = "https://json-schema.org/draft/2020-12/schema"
    return {
        name: {**model.model_json_schema(), "$schema": draft, "$id": f"eval_pipeline/{name}.schema.json"}
        for name, model in SCHEMA_MODELS.items()
    }
