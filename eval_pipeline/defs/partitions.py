"""Partitions: evaluation date (UTC, from `MAX_DAYS_BACK` days ago to today) and model (one key
per enabled or evaluated model)."""

from __future__ import annotations

from collections.abc import Iterable

import dagster as dg

from eval_pipeline.core.dates import first_evaluation_date

MODEL_DIM, DATE_DIM = "model", "date"

# The same window in every process, whatever the project: a date a command accepts is a
# partition of the code location any other process loads that day.
date_partitions = dg.DailyPartitionsDefinition(
    start_date=first_evaluation_date(), end_offset=1, timezone="UTC"
)
# Dynamic, so the asset definitions don't depend on the models file; keys are synced from it.
model_partitions = dg.DynamicPartitionsDefinition(name=MODEL_DIM)
model_date_partitions = dg.MultiPartitionsDefinition({MODEL_DIM: model_partitions, DATE_DIM: date_partitions})
# Date-only assets feed model x date assets: every model reads the same date partition.
DATE_OF_MODEL_DATE = dg.MultiToSingleDimensionPartitionMapping(partition_dimension_name=DATE_DIM)


def model_date_key(model: str, date: str) -> dg.MultiPartitionKey:
    return dg.MultiPartitionKey({MODEL_DIM: model, DATE_DIM: date})


def split_key(context: dg.AssetExecutionContext) -> tuple[str, str]:
    """(model, date) of a model x date asset's partition. A run launched with the standard
    `dagster/partition` tag alone (GraphQL `launchRun`) has its key as plain text
    ("2026-11-20|local-minilm"), without the per-dimension tags the UI's launcher adds."""
    return model_and_date(str(context.partition_key))


def model_and_date(key: str) -> tuple[str, str]:
    """(model, date) of a model x date partition key as stored or tagged."""
    dims = model_date_partitions.get_partition_key_from_str(key).keys_by_dimension
    return dims[MODEL_DIM], dims[DATE_DIM]


def sync_model_partitions(instance: dg.DagsterInstance, models: Iterable[str]) -> None:
    existing = set(instance.get_dynamic_partitions(MODEL_DIM))
    missing = [m for m in models if m not in existing]
    if missing:
        instance.add_dynamic_partitions(MODEL_DIM, missing)
