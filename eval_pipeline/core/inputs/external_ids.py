"""Ids of an imported collection (BEIR, TREC) as KB entity ids and test ids, and back.

A collection's ids may hold any characters (`<ns:Some_Page>`, `a/b`, `12345`), but an entity id is
snake_case (it names a file) and a test id a short token. An id that fits and holds no `__` is
kept; any other becomes a readable slug, `__` and a hash of the original: deterministic, and two
originals never share one. The original stays in the entity's or test's `source_id`, which every
exported file uses. An id holding whitespace or a control character is refused, not mapped: TREC
columns are whitespace-separated, and a mapped id would come back out of an export as something
the user never wrote.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable

from pydantic import Field

from eval_pipeline.core.inputs.banks import SemanticTest
from eval_pipeline.core.inputs.frozen import FrozenModel
from eval_pipeline.core.inputs.kb import Entity

ENTITY_ID_MAX = 120
TEST_ID_MAX = 80
_ENTITY_ID = re.compile(r"[a-z][a-z0-9_]*")
_TEST_ID = re.compile(r"[A-Za-z0-9_.-]+")
SEPARATOR = "__"
_SLUG_CHARS = 40
_HASH_CHARS = 12  # 48 bits: a clash needs the same slug and the same hash prefix


def carriage_problem(original: str) -> str | None:
    """Why `original` cannot travel through TREC files unchanged, or None when it can."""
    if not original:
        return "is empty"
    if any(ch.isspace() for ch in original):
        return f"'{original}' holds whitespace, which TREC files cannot carry"
    if not original.isprintable():
        return f"{original!r} holds a control character, which TREC files cannot carry"
    return None


def _digest(original: str) -> str:
    return hashlib.sha256(original.encode("utf-8")).hexdigest()[:_HASH_CHARS]


def _ascii(original: str) -> str:
    return unicodedata.normalize("NFKD", original).encode("ascii", "ignore").decode("ascii")


def mapped_entity_id(original: str) -> str:
    """The KB entity id (`^[a-z][a-z0-9_]*$`, at most 120 characters) standing for `original`."""
    if _ENTITY_ID.fullmatch(original) and len(original) <= ENTITY_ID_MAX and SEPARATOR not in original:
        return original
    slug = re.sub(r"[^a-z0-9]+", "_", _ascii(original).lower())[:_SLUG_CHARS].strip("_")
    if not slug[:1].isalpha():
        slug = f"id_{slug}".rstrip("_")
    return f"{slug}{SEPARATOR}{_digest(original)}"


def mapped_test_id(original: str) -> str:
    """The test id (`^[A-Za-z0-9_.-]+$`, at most 80 characters) standing for `original`."""
    if _TEST_ID.fullmatch(original) and len(original) <= TEST_ID_MAX and SEPARATOR not in original:
        return original
    slug = re.sub(r"[^A-Za-z0-9.-]+", "_", _ascii(original))[:_SLUG_CHARS].strip("_") or "q"
    return f"{slug}{SEPARATOR}{_digest(original)}"


class OriginalIds(FrozenModel):
    """An imported collection's own ids, as a results document records them: entity id -> the
    document's id, test id -> the query's id. An id not listed is its own original."""

    documents: dict[str, str] = Field(default_factory=dict)
    queries: dict[str, str] = Field(default_factory=dict)

    def document(self, entity_id: str) -> str:
        return self.documents.get(entity_id, entity_id)

    def query(self, test_id: str) -> str:
        return self.queries.get(test_id, test_id)

    def naming(self, entity_ids: set[str]) -> OriginalIds | None:
        """These ids with only the documents among `entity_ids`; None when nothing is left."""
        documents = {e: source for e, source in self.documents.items() if e in entity_ids}
        kept = OriginalIds(documents=documents, queries=self.queries)
        return kept if documents or self.queries else None


def recorded_original_ids(entities: Iterable[Entity], tests: Iterable[SemanticTest]) -> OriginalIds | None:
    """The original ids of the semantic tests and of every entity, where they differ from ours;
    None when none does. A run's document keeps only the entities it names (`OriginalIds.naming`):
    an imported collection can hold 100,000 passages."""
    ids = OriginalIds(
        documents={e.entity_id: e.source_id for e in entities if e.source_id and e.source_id != e.entity_id},
        queries={t.test_id: t.source_id for t in tests if t.source_id and t.source_id != t.test_id},
    )
    return ids if ids.documents or ids.queries else None
