"""Lossless conversion between per-test models and tables: a few flat columns for people browsing
the Parquet files or the UI, and a `record` column holding the whole model as JSON to read back."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import pandas as pd
from pydantic import BaseModel

from eval_pipeline.core.mechanisms.retrieval import SemanticRetrieval
from eval_pipeline.core.scoring.results import ResultBase

M = TypeVar("M", bound=BaseModel)
RECORD = "record"


def to_frame(rows: Sequence[M], columns: Callable[[M], dict[str, Any]]) -> pd.DataFrame:
    records = [{**columns(r), RECORD: r.model_dump_json()} for r in rows]
    return pd.DataFrame.from_records(records, columns=[*records[0]] if records else None)


def from_frame(frame: pd.DataFrame, model: type[M]) -> list[M]:
    if frame.empty:
        return []
    return [model.model_validate_json(text) for text in frame[RECORD]]


def result_columns(r: ResultBase) -> dict[str, Any]:
    return {
        "test_id": r.test_id,
        "name": r.name,
        "status": r.status.value,
        "score": r.score,
        "label": r.outcome.label if r.outcome else None,
        "hard_fail": r.hard_fail,
        "error": r.error,
    }


def retrieval_columns(r: SemanticRetrieval) -> dict[str, Any]:
    return {
        "test_id": r.test_id,
        "model": r.model,
        "trial": r.trial,
        "status": r.status,
        "selected": ", ".join(r.selected_ids),
        "error": r.error,
        "cost_usd": r.cost_usd,
        "latency_ms": r.latency_ms,
        "api_calls": r.api_calls,
        "cache_hits": r.cache_hits,
    }
