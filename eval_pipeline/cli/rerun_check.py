"""`run`'s side of "nothing changed": what an evaluation rests on, and whether the stored one
may answer instead (the rule: core/report/rerun_rule.py; the instance's side:
orchestration/instance_evaluations.py; what was recorded when it last stood, read without Dagster:
orchestration/recorded_evaluations.py)."""

from __future__ import annotations

import argparse
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from eval_pipeline.core.code_version import code_version
from eval_pipeline.core.dates import today_utc
from eval_pipeline.core.inputs.kb import KnowledgeBase, sha256_text
from eval_pipeline.core.inputs.loading import Banks, history_hash
from eval_pipeline.core.report.rerun_rule import EvaluationInputs, stale_reason
from eval_pipeline.core.scoring.run_document import (
    GATE_FILE,
    REPORT_FILE,
    RESULTS_FILE,
    DocumentError,
    parse_document,
)
from eval_pipeline.core.verdicts.run_gate import Gates
from eval_pipeline.location import instance_home
from eval_pipeline.orchestration.recorded_evaluations import (
    RecordedEvaluation,
    instance_mark,
    read_record,
    write_record,
)

if TYPE_CHECKING:
    from dagster import DagsterInstance
    from upath import UPath

    from eval_pipeline.location import LocationPaths
    from eval_pipeline.orchestration.instance_evaluations import StoredEvaluation


def evaluation_inputs(
    args: argparse.Namespace,
    kb: KnowledgeBase,
    banks: Banks,
    models: list[str],
    date: str,
    gates: Gates,
    pass_threshold: int,
    results: str,
    paths: LocationPaths,
) -> EvaluationInputs:
    """What this run's results and verdict depend on (its fingerprint tags every run it makes)."""
    from eval_pipeline.core.calibration.files import calibration_cost
    from eval_pipeline.providers.models import load_models

    configs = load_models(args.models_file)
    spent = calibration_cost(paths.calibration_dir, date)
    return EvaluationInputs(
        code_version=code_version(),
        date=date,
        kb_version=kb.kb_version,
        kb_hash=kb.content_hash,
        bank_hashes=banks.file_hashes,
        history_hash=history_hash(banks.history),
        models={m: configs[m].model_dump(mode="json") for m in models},
        settings={
            "storage": str(Path(args.storage_dir).resolve()),
            "results": results if "://" in results else str(Path(results).resolve()),
            "outputs": paths.outputs_uri,
            # Reported in every result; a calibration that changed no expectation still cost this.
            "calibration_cost_usd": spent,
            "pass_threshold": pass_threshold,
            "fail_under": gates.fail_under,
            "max_errored": gates.max_errored,
            "reproducible": all(configs[m].reproducible for m in models),
        },
    )


def _may_stand(args: argparse.Namespace, inputs: EvaluationInputs) -> bool:
    # --cache refresh/off ask for answers computed afresh: a stored result would not be one. A
    # model that is not reproducible (an API, the team's system) may answer otherwise today.
    return not args.force and args.cache == "use" and bool(inputs.settings["reproducible"])


def _stored_results(inputs: EvaluationInputs, results: Path | UPath) -> dict[str, str] | str | None:
    """Each model's stored results-file hash when the files may stand for `inputs`; else why not
    (None: nothing stored to stand on, a first evaluation, nothing to say)."""
    docs, hashes = [], {}
    for model in inputs.models:
        run_dir = results / model / inputs.date
        if not (run_dir / RESULTS_FILE).is_file():
            return None
        if not all((run_dir / name).is_file() for name in (REPORT_FILE, GATE_FILE)):
            return f"{run_dir} no longer holds its report and gate"
        try:  # read once: hashed here, compared with what its run recorded
            text = (run_dir / RESULTS_FILE).read_text(encoding="utf-8")
            docs.append(parse_document(text, run_dir / RESULTS_FILE))
        except (OSError, UnicodeDecodeError, DocumentError) as exc:
            return str(exc)
        hashes[model] = sha256_text(text)
    # The files say best what changed (the KB, a model); the instance, what they cannot (gates).
    stale = next(filter(None, (stale_reason(doc, inputs) for doc in docs)), None)
    return stale if stale is not None else hashes


def stands_as_recorded(args: argparse.Namespace, inputs: EvaluationInputs, results: Path | UPath) -> bool:
    """Whether the evaluation recorded for this date has these inputs, the instance has stored
    nothing since, and the results files are those its runs wrote: then its verdict stands, for
    any date, decided without Dagster. Silent when not: the instance is asked next."""
    if not _may_stand(args, inputs):
        return False
    home = instance_home()
    record = read_record(home, inputs.date)
    if record is None or record.fingerprint != inputs.fingerprint():
        return False
    if record.instance_mark != instance_mark(home):
        return False
    hashes = _stored_results(inputs, results)
    if not isinstance(hashes, dict) or hashes != record.results_sha256:
        return False
    _say_stands(record.made_at, record.run_ids)
    return True


def stands(
    args: argparse.Namespace, inputs: EvaluationInputs, instance: DagsterInstance, results: UPath
) -> StoredEvaluation | None:
    """Today's evaluation with exactly these inputs when it is stored and complete, so that its
    verdict may stand without evaluating again (`--force` always evaluates); else None. Never for
    a past date here (its inputs are the snapshot of that day, not today's files): a past date
    stands only as recorded (`stands_as_recorded`), when the instance stored nothing since."""
    from eval_pipeline.orchestration.instance_evaluations import stored_evaluation

    if not _may_stand(args, inputs) or inputs.date != today_utc():
        return None
    hashes = _stored_results(inputs, results)
    if hashes is None:
        return None
    if isinstance(hashes, str):
        return _evaluates_because(hashes)
    stored = stored_evaluation(instance, inputs.date, list(inputs.models), inputs.fingerprint())
    if stored.reason is not None:
        return _evaluates_because(stored.reason)
    edited = [m for m in inputs.models if stored.results_sha256[m] != hashes[m]]
    if edited:
        return _evaluates_because(
            f"{results / edited[0] / inputs.date / RESULTS_FILE} is not the file its run wrote"
        )
    _say_stands(stored.made_at, stored.run_ids)
    return stored


def record_standing(inputs: EvaluationInputs, stored: StoredEvaluation) -> None:
    """Record an evaluation the instance says stands, marked with the instance as it is now:
    called once the instance is closed (closing it may still write its files)."""
    home = instance_home()
    mark = instance_mark(home)
    if mark is None or not stored.stands:
        return
    record = RecordedEvaluation(
        date=inputs.date,
        fingerprint=inputs.fingerprint(),
        run_ids=stored.run_ids,
        made_at=stored.made_at,
        results_sha256=stored.results_sha256,
        instance_mark=mark,
    )
    write_record(home, record)


def _say_stands(made_at: datetime | None, run_ids: list[str]) -> None:
    when = f"{made_at:%Y-%m-%d %H:%M} UTC" if made_at else "earlier"
    runs = ", ".join(run_id[:8] for run_id in run_ids)
    print(
        f"  up to date: code, inputs, models and gates are those of the runs made {when} ({runs}); "
        "their verdict stands (--force evaluates again)"
    )


def _evaluates_because(reason: str) -> StoredEvaluation | None:
    print(f"  evaluating again: today's stored evaluation cannot stand ({reason})")
    return None
