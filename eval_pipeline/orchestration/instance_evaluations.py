"""Whether the project instance already holds a full evaluation made from given inputs.

`run` tags each of its Dagster runs with the fingerprint of its inputs (code, KB, banks,
history, models, settings: core/report/rerun_rule.py). A later `run` with the same fingerprint
may stand on those runs instead of evaluating again when, for every asset of its stages:
- the latest materialisation of its partition came from a run with that fingerprint, and
- nothing materialised the asset since, in any partition (another date's report is a
  regression baseline, another model's a comparison input: either may change what this
  date's diffs would say), by a run with any other fingerprint, a UI launch or automation.
The run reports' recorded results-file hashes go back to `run`, which checks them against the
files it reads (cli/rerun_check.py). An evaluation that stands is recorded with a mark of the
instance's files (orchestration/recorded_evaluations.py), where the instance keeps them.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import dagster as dg

from eval_pipeline.defs.graph import COMPARISON, DATE_STAGE, PER_MODEL
from eval_pipeline.defs.partitions import model_date_key
from eval_pipeline.defs.reports import RESULTS_SHA256, run_report
from eval_pipeline.location import instance_home
from eval_pipeline.orchestration.recorded_evaluations import HISTORY_DIR
from eval_pipeline.runtime.dagster_private import SqliteEventLogStorage

FINGERPRINT_TAG = "eval_pipeline/inputs"
OTHER_RUN = "was last made by a run of other code, inputs, models or gates"


@dataclass(frozen=True)
class StoredEvaluation:
    run_ids: list[str]  # the runs that made it; empty when it cannot stand
    made_at: datetime | None = None  # when the last of its reports was written
    reason: str | None = None  # why it cannot stand
    # model -> the sha256 of the results.json its run wrote (checked against the file by `run`)
    results_sha256: dict[str, str] = field(default_factory=dict)

    @property
    def stands(self) -> bool:
        return self.reason is None


def _latest(
    instance: dg.DagsterInstance, key: dg.AssetKey, partition: str | None = None
) -> dg.EventLogRecord | None:
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=key, asset_partitions=None if partition is None else [partition]),
        limit=1,
    ).records
    return records[0] if records else None


def stored_evaluation(
    instance: dg.DagsterInstance,
    date: str,
    models: Sequence[str],
    fingerprint: str,
) -> StoredEvaluation:
    runs: dict[str, bool] = {}

    def tagged(record: dg.EventLogRecord) -> bool:
        if record.run_id not in runs:
            run = instance.get_run_by_id(record.run_id)
            runs[record.run_id] = run is not None and run.tags.get(FINGERPRINT_TAG) == fingerprint
        return runs[record.run_id]

    def not_standing(reason: str) -> StoredEvaluation:
        return StoredEvaluation([], reason=reason)

    for key in sorted(DATE_STAGE | COMPARISON | PER_MODEL):
        latest = _latest(instance, key)
        if latest is not None and not tagged(latest):
            return not_standing(f"{key.to_user_string()} {OTHER_RUN}")
    targets = [(key, date) for key in sorted(DATE_STAGE | COMPARISON)]
    targets += [(key, str(model_date_key(m, date))) for key in sorted(PER_MODEL) for m in models]
    for key, partition in targets:
        record = _latest(instance, key, partition)
        if record is None or not tagged(record):
            return not_standing(f"{key.to_user_string()} [{partition}] {OTHER_RUN}")
    made_at, written = None, {}
    for model in models:
        record = _latest(instance, run_report.key, str(model_date_key(model, date)))
        materialization = record.asset_materialization if record is not None else None
        entry = materialization.metadata.get(RESULTS_SHA256) if materialization is not None else None
        if record is None or entry is None:
            return not_standing(f"run_report [{model}] recorded no results file hash")
        written[model] = str(entry.value)
        stamp = datetime.fromtimestamp(record.timestamp, UTC)
        made_at = stamp if made_at is None else max(made_at, stamp)
    return StoredEvaluation(sorted(runs), made_at, results_sha256=written)


def history_in_home(instance: dg.DagsterInstance) -> bool:
    """Whether the instance keeps its events in SQLite files under its home's history folder,
    the files a recorded evaluation's mark covers (not so for a Postgres instance)."""
    events = instance.event_log_storage
    where = os.path.realpath(instance_home() / HISTORY_DIR / "runs")
    # _base_dir: where Dagster's SQLite event log keeps its files (no public accessor).
    return isinstance(events, SqliteEventLogStorage) and os.path.realpath(events._base_dir) == where
