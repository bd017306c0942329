"""The user's ids on every surface: an imported collection's documents and queries are shown by
the ids the user gave them, not the KB and test ids they were mapped to (inputs/external_ids.py).
Applied to the data before rendering (the renderers escape them as any data), never to stored
results: those keep the ids the KB holds."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel

from eval_pipeline.core.inputs.external_ids import OriginalIds
from eval_pipeline.core.report.reading import Reading, reading_of
from eval_pipeline.core.scoring.run_document import RunDocument

M = TypeVar("M", bound=BaseModel)
C = TypeVar("C", bound=BaseModel)


def with_original_ids(model: M, ids: OriginalIds | None) -> M:
    """`model` with every mapped id in it (a value, a key, or a word of a line of text) replaced
    by the original. A mapped id ends in `__` and a hash: it cannot be part of another id or of
    a word, so a plain replacement is exact."""
    table = {} if ids is None else {**ids.documents, **ids.queries}
    if not table:
        return model
    pattern = re.compile("|".join(re.escape(k) for k in sorted(table, key=len, reverse=True)))

    def swap(text: str) -> str:
        return pattern.sub(lambda m: table[m[0]], text) if "__" in text else text

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            return swap(value)
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, dict):
            return {swap(k) if isinstance(k, str) else k: walk(v) for k, v in value.items()}
        return value

    return type(model).model_validate(walk(model.model_dump(mode="json")))


def as_shown(doc: RunDocument) -> RunDocument:
    """A run's document as its reports show it: with the collection's own ids."""
    return with_original_ids(doc, doc.provenance.original_ids)


def shown_reading(reading: Reading) -> Reading:
    """A reading of the shown document (the reading itself when nothing is renamed)."""
    if reading.document.provenance.original_ids is None:
        return reading
    return reading_of(as_shown(reading.document), derived_here=reading.derived_here)


def shown_history(
    docs: Sequence[RunDocument], comparisons: Mapping[str, C]
) -> tuple[list[RunDocument], dict[str, C]]:
    """Evaluations and each model's latest comparison (the HTML report's inputs) as shown: each
    document with its own ids, a model's comparison with its latest document's."""
    latest = {
        d.provenance.model: d.provenance.original_ids for d in sorted(docs, key=lambda d: d.provenance.date)
    }
    return [as_shown(d) for d in docs], {
        m: with_original_ids(c, latest.get(m)) for m, c in comparisons.items()
    }
