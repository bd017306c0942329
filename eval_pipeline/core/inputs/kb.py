"""The knowledge-base model: entities, their load modes, and the KB's content hash; and the text
fields every input file shares."""

from __future__ import annotations

import hashlib
import json
from enum import StrEnum
from functools import cached_property
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, StringConstraints

from eval_pipeline.core.inputs.frozen import FrozenModel


def _not_blank(value: str) -> str:
    """Text that is only whitespace says nothing (an embedder would index an empty string, a
    reranker would judge nothing)."""
    if not value.strip():
        raise ValueError("is blank (empty or only whitespace)")
    return value


# Text fields are bounded: one of megabytes costs money on every call.
# A user message to the assistant; ample for a long chat turn or a BEIR query.
Prompt = Annotated[str, Field(min_length=1, max_length=10_000), AfterValidator(_not_blank)]
# An entity's title and one-line summary, shown to rerankers in every call.
Title = Annotated[str, Field(min_length=1, max_length=300), AfterValidator(_not_blank)]
Summary = Annotated[str, Field(min_length=1, max_length=2_000), AfterValidator(_not_blank)]
# Who made a human decision and why, recorded in the history.
Note = Annotated[str, Field(min_length=1, max_length=10_000), AfterValidator(_not_blank)]
# An entity's content: embedded and shown to calibrators; a book chapter, not a book.
Content = Annotated[str, Field(min_length=1, max_length=200_000), AfterValidator(_not_blank)]

EntityId = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*$", max_length=120)]


class EntityType(StrEnum):
    KNOWLEDGE = "KNOWLEDGE"
    SCRIPT = "SCRIPT"
    HANDLER = "HANDLER"
    PERSONA = "PERSONA"
    GUARDRAIL = "GUARDRAIL"
    RULE = "RULE"
    CONTEXT = "CONTEXT"


class LoadMode(StrEnum):
    SEMANTIC = "SEMANTIC"
    STATE = "STATE"
    PATTERN = "PATTERN"
    ALWAYS = "ALWAYS"


# The data's own vocabulary (user types, categories, topics): free strings checked for shape
# only — no surrounding whitespace, no control characters — unless the manifest declares a list.
_LABEL_SHAPE = r"^[^\s\x00-\x1f](?:[^\x00-\x1f]*[^\s\x00-\x1f])?$"
Label = Annotated[str, StringConstraints(min_length=1, max_length=80, pattern=_LABEL_SHAPE)]
UserType = Label


class Vocabulary(FrozenModel):
    """Optional closed lists a KB declares; a value outside a declared list is an input error."""

    user_types: list[Label] | None = None
    categories: list[Label] | None = None
    topics: list[Label] | None = None


ConditionOp = Literal["eq", "gte", "lte", "in"]
# One field's constraint, e.g. {"gte": 7}; several ops on one field must all hold.
FieldCondition = dict[ConditionOp, Any]


def canonical_json(value: Any) -> str:
    """Stable JSON text used for every content hash in the product."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class Entity(FrozenModel):
    """One KB entity, as authored in `kb/entities/<entity_id>.yaml`."""

    entity_id: EntityId
    entity_type: EntityType
    load_mode: LoadMode
    title: Title
    summary: Summary = Field(description="One line, shown to rerankers")
    content: Content
    topics: list[Label] = Field(default_factory=list)
    user_types: list[UserType] = Field(
        default_factory=list, description="ALWAYS entities: who gets them; empty means everyone"
    )
    state_conditions: dict[str, FieldCondition] = Field(
        default_factory=dict, description="STATE handlers: field -> {op: value}"
    )
    source_id: str | None = Field(default=None, description="The document's id in an imported collection")

    @cached_property
    def content_hash(self) -> str:
        """Hash of everything an embedder or reranker could see or a matcher could use."""
        # An entity without a source id hashes as it did before the field existed.
        dumped = self.model_dump(mode="json", exclude={"source_id"} if self.source_id is None else None)
        return sha256_text(canonical_json(dumped))

    def embedding_text(self) -> str:
        """The text a document embedder indexes for this entity."""
        return f"{self.title}\n{self.summary}\n{self.content}"


class KnowledgeBase(FrozenModel):
    kb_version: str = Field(min_length=1, description="Human label; results also carry the hash")
    name: str | None = Field(
        default=None, min_length=1, description="The project's declared name: what makes it this project"
    )
    vocabulary: Vocabulary = Field(default_factory=Vocabulary)
    entities: list[Entity]

    @cached_property
    def by_id(self) -> dict[str, Entity]:
        return {e.entity_id: e for e in self.entities}

    @cached_property
    def content_hash(self) -> str:
        """Order-independent hash of the entities (the label is not part of it)."""
        return sha256_text(canonical_json(sorted(e.content_hash for e in self.entities)))

    def with_mode(self, mode: LoadMode) -> list[Entity]:
        return [e for e in self.entities if e.load_mode is mode]
