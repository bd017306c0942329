"""Does a model's stored evaluation of a date stand, so that `run` may answer from it?

It stands when its results could not differ: the same inputs (`ModelInputs`), a reproducible
model, the files its run wrote, no errored test and no unjudged bank (an outage may be over).
Runs are tagged with their models' input digests; the instance answers from the partition's
latest materialisations (not the regression diff's: made again, it compares the same report with
a newer baseline). What stood is recorded with a mark of the instance's files (configuration;
size, time and inode of its SQLite history): the same mark on a rerun means nothing was stored
since, and the record answers without Dagster. A past date stands only so: today's files describe
its snapshot of the inputs only while nothing was stored since.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from eval_pipeline.core.code_version import code_version
from eval_pipeline.core.dates import today_utc
from eval_pipeline.core.fileio import atomic_write_text
from eval_pipeline.core.inputs.frozen import FrozenModel
from eval_pipeline.core.inputs.kb import sha256_text
from eval_pipeline.core.scoring.results import RESULT_SCHEMA_VERSION
from eval_pipeline.core.scoring.run_document import (
    GATE_FILE,
    REPORT_FILE,
    RESULTS_FILE,
    DocumentError,
    parse_document,
)
from eval_pipeline.location import instance_home

if TYPE_CHECKING:
    import dagster as dg
    from upath import UPath

    from eval_pipeline.core.inputs.kb import KnowledgeBase
    from eval_pipeline.core.inputs.loading import Banks
    from eval_pipeline.core.verdicts.run_gate import Gates
    from eval_pipeline.orchestration.evaluation_route import EvaluationRequest
    from eval_pipeline.providers.models import ModelConfig

FINGERPRINT_TAG = "eval_pipeline/inputs"  # JSON: model -> ModelInputs.digests()
RECORDS_DIR = "recorded_evaluations"
HISTORY_DIR = "history"  # where the project's SQLite storage keeps runs and events
CONFIG_FILE = "dagster.yaml"
DIGEST_CHARS = 16
# What changed, as the user knows it, for each part of the inputs.
CHANGED = {
    "code": "the code changed",
    "kb": "the KB changed",
    "history": "the expectation history changed",
    "model": "the models file changed for {model}",
    "gates": "the gates changed",
    "location": "results/storage location changed",
    "calibration_cost_usd": "a calibration was logged for {date}",
    "date": "no stored evaluation for {model} on {date}",
}


class ModelInputs(FrozenModel):
    """Everything one model's evaluation of one date rests on."""

    code: str  # the package's code and result schema versions
    date: str
    kb: str  # version label and content hash
    banks: dict[str, str]  # bank name -> hash of its files
    history: str
    model: dict[str, Any]  # the models-file entry, as JSON
    gates: dict[str, Any]
    location: dict[str, str | None]  # where asset values and reports go
    calibration_cost_usd: float  # in every result, even when no expectation moved

    def digests(self) -> dict[str, str]:
        parts = {k: v for k, v in self.model_dump(mode="json").items() if k != "banks"}
        parts |= {f"bank:{name}": value for name, value in self.banks.items()}
        return {key: _digest(value) for key, value in sorted(parts.items())}


def _digest(value: object) -> str:
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:DIGEST_CHARS]


def model_inputs(
    kb: KnowledgeBase,
    banks: Banks,
    configs: Mapping[str, ModelConfig],
    date: str,
    gates: Gates,
    pass_threshold: int,
    location: Mapping[str, str | None],
    calibration_cost_usd: float,
) -> dict[str, ModelInputs]:
    """What each model's evaluation of `date` rests on, by model."""
    from eval_pipeline.core.inputs.loading import history_hash

    # A bank by its mechanism's name (the crisis rules go with the pattern bank).
    named = {rel: m.value for m, rel in banks.layout.banks().items()} | {banks.layout.rules: "pattern"}
    grouped: dict[str, list[str]] = {}
    for rel, file_hash in sorted(banks.file_hashes.items()):
        grouped.setdefault(named.get(rel, rel), []).append(f"{rel}:{file_hash}")
    common = {
        "code": f"{RESULT_SCHEMA_VERSION}:{code_version()}",
        "date": date,
        "kb": f"{kb.kb_version}:{kb.content_hash}",
        "banks": {name: _digest(files) for name, files in grouped.items()},
        "history": history_hash(banks.history),
        "gates": {"pass_threshold": pass_threshold, **gates.model_dump(mode="json")},
        "location": dict(location),
        "calibration_cost_usd": calibration_cost_usd,
    }
    return {m: ModelInputs(model=cfg.model_dump(mode="json"), **common) for m, cfg in configs.items()}


def standing_of(request: EvaluationRequest) -> Standing:
    """Which models' stored evaluations of the request's date may answer for it."""
    from eval_pipeline.core.scoring.points import DEFAULT_PASS_THRESHOLD
    from eval_pipeline.providers.object_store import output_location

    where, date, configs = request.location, request.date, request.configs
    location = {
        "storage": str(where.storage_dir.resolve()),
        "results": where.results_uri or str(where.results_dir.resolve()),
        "outputs": where.outputs_uri,
    }
    gates, cost = request.run_gates, request.calibration_cost_usd
    inputs = model_inputs(
        request.kb, request.banks, configs, date, gates, DEFAULT_PASS_THRESHOLD, location, cost
    )
    # --force, and --cache refresh/off, ask for answers computed afresh; a model that is not
    # reproducible (an API, the team's system) may answer otherwise today.
    fresh = request.force or request.cache_mode != "use"
    may_stand = [] if fresh else [m for m, cfg in configs.items() if cfg.reproducible]
    return Standing(inputs, output_location(where.results_root), may_stand)


def changes(before: Mapping[str, str], now: Mapping[str, str], model: str, date: str) -> str | None:
    """What differs between two models' inputs, in the user's terms; None when nothing does."""
    differ = sorted(k for k in before.keys() | now.keys() if before.get(k) != now.get(k))
    banks = [k.removeprefix("bank:") for k in differ if k.startswith("bank:")]
    said = [CHANGED[k].format(model=model, date=date) for k in differ if k in CHANGED]
    said += [f"test banks changed: {', '.join(banks)}"] if banks else []
    return "; ".join(said) if said else None


class Stood(FrozenModel):
    """A stored evaluation that stands: its inputs' digests, its runs, its results file's hash."""

    digests: dict[str, str]
    run_ids: list[str]
    made_at: datetime | None
    results_sha256: str


class _Record(FrozenModel):
    """A date's models whose evaluation the instance said stands, and the instance's mark then."""

    instance_mark: str
    models: dict[str, Stood]


def instance_mark(home: Path) -> str | None:
    """The mark of the instance's configuration and stored history; None when unreadable."""
    digest = hashlib.sha256()
    try:
        digest.update((home / CONFIG_FILE).read_bytes())
        # -shm files index a write-ahead log for readers; the log and databases hold the data.
        files = sorted(p for p in (home / HISTORY_DIR).rglob("*") if not p.name.endswith("-shm"))
        for path in files:
            st = path.stat()
            if path.is_file():
                name = path.relative_to(home).as_posix()
                digest.update(f"{name}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ino}\n".encode())
    except OSError:  # a file came or went while reading: no mark to compare
        return None
    return digest.hexdigest()


def _read_record(home: Path, date: str) -> _Record | None:
    try:
        return _Record.model_validate_json((home / RECORDS_DIR / f"{date}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, ValidationError):  # none, or not one this code wrote: ask the instance
        return None


class Standing:
    """Which of a command's models stand on their stored evaluation of its date (each said)."""

    def __init__(
        self, inputs: Mapping[str, ModelInputs], results: Path | UPath, may_stand: Iterable[str]
    ) -> None:
        self.inputs = dict(inputs)
        self.date = next(iter(inputs.values())).date
        self.results = results
        self.may_stand = set(may_stand)  # reproducible models, and no --force or --cache refresh/off
        self.home = instance_home()

    def tags(self, models: Sequence[str]) -> dict[str, str]:
        """The tag of the runs that evaluate `models`."""
        digests = {m: self.inputs[m].digests() for m in models}
        return {FINGERPRINT_TAG: json.dumps(digests, sort_keys=True, separators=(",", ":"))}

    def as_recorded(self) -> list[str]:
        """The models that do not stand as recorded (decided without Dagster); prints the others."""
        record = _read_record(self.home, self.date)
        if record is None or record.instance_mark != instance_mark(self.home):
            return [m for m in self.inputs]
        pending = []
        for model in self.inputs:
            entry = record.models.get(model)
            text, _ = self._results_text(model)
            if (
                model in self.may_stand
                and entry is not None
                and entry.digests == self.inputs[model].digests()
                and text is not None
                and sha256_text(text) == entry.results_sha256
            ):
                _say_stands(model, entry)
            else:
                pending.append(model)
        return pending

    def with_instance(self, instance: dg.DagsterInstance, models: Sequence[str]) -> list[str]:
        """The models of `models` to evaluate, each with the reason printed; prints the others."""
        evaluate = []
        for model in models:
            if model not in self.may_stand:
                evaluate.append(model)
                continue
            stored = self.stored(instance, model)
            if isinstance(stored, Stood) and self.date != today_utc():
                stored = "other evaluations were stored since (a past date stands only as recorded)"
            if isinstance(stored, Stood):
                _say_stands(model, stored)
            else:
                print(f"  evaluating {model}: {stored}")
                evaluate.append(model)
        return evaluate

    def stored(self, instance: dg.DagsterInstance, model: str) -> Stood | str:
        """The model's stored evaluation when the instance says it stands; else why not."""

        from eval_pipeline.defs.diffs import regression_diff
        from eval_pipeline.defs.graph import PER_MODEL
        from eval_pipeline.defs.partitions import model_date_key
        from eval_pipeline.defs.reports import RESULTS_SHA256, run_report
        from eval_pipeline.runtime.instance_queries import latest_materialization

        results = self.results / model / self.date / RESULTS_FILE
        text, why = self._results_text(model)
        if text is None:
            return str(why)
        try:
            aggregate = parse_document(text, results).aggregate
        except DocumentError as exc:
            return str(exc)
        if aggregate.errored_count:
            return f"{aggregate.errored_count} test(s) errored"
        if aggregate.health.value == "UNKNOWN":
            return "health was UNKNOWN"
        partition = str(model_date_key(model, self.date))
        runs: dict[str, str | None] = {}
        report = None
        for key in sorted(PER_MODEL - {regression_diff.key}):
            record = latest_materialization(instance, key, partition)
            if record is None:
                return f"no stored evaluation for {model} on {self.date}"
            if record.run_id not in runs:
                run = instance.get_run_by_id(record.run_id)
                runs[record.run_id] = self._changes(run.tags if run is not None else {}, model)
            if runs[record.run_id] is not None:
                return str(runs[record.run_id])
            report = record if key == run_report.key else report
        materialization = report.asset_materialization if report is not None else None
        entry = materialization.metadata.get(RESULTS_SHA256) if materialization is not None else None
        if report is None or entry is None or str(entry.value) != sha256_text(text):
            return f"{results} is not the file its run wrote"
        made_at = datetime.fromtimestamp(report.timestamp, UTC)
        return Stood(
            digests=self.inputs[model].digests(),
            run_ids=sorted(runs),
            made_at=made_at,
            results_sha256=str(entry.value),
        )

    def _changes(self, tags: Mapping[str, str], model: str) -> str | None:
        if FINGERPRINT_TAG not in tags:
            return f"{model} on {self.date} was made again since by the UI, automation or a backfill"
        try:
            before = dict(json.loads(tags[FINGERPRINT_TAG])[model])
        except (ValueError, LookupError, TypeError):  # a tag of earlier code
            return CHANGED["code"]
        return changes(before, self.inputs[model].digests(), model, self.date)

    def settle(self, instance: dg.DagsterInstance) -> dict[str, Stood]:
        """After the evaluation: the models that stand now, to record once the instance is closed;
        none when its history is not in its home (Postgres), where no mark covers it."""
        from eval_pipeline.runtime.dagster_private import SqliteEventLogStorage

        events = instance.event_log_storage
        # _base_dir: where Dagster's SQLite event log keeps its files (no public accessor).
        runs = os.path.realpath(events._base_dir) if isinstance(events, SqliteEventLogStorage) else None
        if runs != os.path.realpath(self.home / HISTORY_DIR / "runs"):
            return {}
        stood = {m: self.stored(instance, m) for m in self.inputs if m in self.may_stand}
        return {m: s for m, s in stood.items() if isinstance(s, Stood)}

    def record(self, stood: Mapping[str, Stood]) -> None:
        mark = instance_mark(self.home)
        if mark is None or not stood:
            return
        earlier = _read_record(self.home, self.date)
        kept = earlier.models if earlier is not None and earlier.instance_mark == mark else {}
        record = _Record(instance_mark=mark, models={**kept, **stood})
        atomic_write_text(self.home / RECORDS_DIR / f"{self.date}.json", record.model_dump_json(indent=2))

    def _results_text(self, model: str) -> tuple[str, None] | tuple[None, str]:
        """The model's results file, with its report and gate beside it; else why not."""
        run_dir = self.results / model / self.date
        if not (run_dir / RESULTS_FILE).is_file():
            return None, f"no stored evaluation for {model} on {self.date}"
        if not all((run_dir / name).is_file() for name in (REPORT_FILE, GATE_FILE)):
            return None, f"{run_dir} no longer holds its report and gate"
        try:
            return (run_dir / RESULTS_FILE).read_text(encoding="utf-8"), None
        except (OSError, UnicodeDecodeError) as exc:
            return None, str(exc)


def _say_stands(model: str, stood: Stood) -> None:
    when = f"{stood.made_at:%Y-%m-%d %H:%M} UTC" if stood.made_at else "earlier"
    runs = ", ".join(run_id[:8] for run_id in stood.run_ids)
    print(
        f"  up to date: {model}: the code, inputs, its models-file entry and gates are those of its "
        f"runs made {when} ({runs}); its verdict stands (--force evaluates again)"
    )
