"""`run`'s side of "nothing changed": what an evaluation rests on, and whether today's stored
one may answer instead (the rule: core/report/up_to_date.py; the instance's side:
defs/up_to_date.py)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from eval_pipeline.cli.errors import UsageError
from eval_pipeline.core.code_version import code_version
from eval_pipeline.core.dates import today_utc
from eval_pipeline.core.inputs.kb import KnowledgeBase, sha256_text
from eval_pipeline.core.inputs.loading import Banks, history_hash
from eval_pipeline.core.report.up_to_date import EvaluationInputs, stale_reason
from eval_pipeline.core.scoring.run_document import (
    GATE_FILE,
    REPORT_FILE,
    RESULTS_FILE,
    DocumentError,
    parse_document,
)

if TYPE_CHECKING:
    from dagster import DagsterInstance
    from upath import UPath

    from eval_pipeline.defs.resources import RunScopeResource
    from eval_pipeline.location import LocationPaths


def evaluation_inputs(
    args: argparse.Namespace,
    kb: KnowledgeBase,
    banks: Banks,
    models: list[str],
    date: str,
    gates: RunScopeResource,
    results: str,
    paths: LocationPaths,
) -> EvaluationInputs:
    """What this run's results and verdict depend on (its fingerprint tags every run it makes)."""
    from eval_pipeline.core.calibration.files import CalibrationFileError, calibration_cost
    from eval_pipeline.providers.models import load_models

    configs = load_models(args.models_file)
    try:
        spent = calibration_cost(paths.calibration_dir, date)
    except CalibrationFileError as exc:  # every report shows it: no run without it
        raise UsageError(str(exc)) from None
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
            "pass_threshold": gates.pass_threshold,
            "fail_under": gates.fail_under,
            "max_errored": gates.max_errored,
            "reproducible": all(configs[m].reproducible for m in models),
        },
    )


def stands(
    args: argparse.Namespace, inputs: EvaluationInputs, instance: DagsterInstance, results: UPath
) -> bool:
    """Whether today's evaluation with exactly these inputs is already stored and complete, so
    that its verdict may stand without evaluating again (`--force` always evaluates). Never for
    a past date (its inputs are the snapshot of that day, not today's files), nor for a model
    that is not reproducible (an API, the team's system)."""
    from eval_pipeline.defs.up_to_date import stored_evaluation

    # --cache refresh/off ask for answers computed afresh: a stored result would not be one.
    if args.force or args.cache != "use" or inputs.date != today_utc() or not inputs.settings["reproducible"]:
        return False
    docs, hashes = [], {}
    for model in inputs.models:
        run_dir = results / model / inputs.date
        if not (run_dir / RESULTS_FILE).is_file():
            return False  # nothing stored to stand on: a first evaluation today, nothing to say
        if not all((run_dir / name).is_file() for name in (REPORT_FILE, GATE_FILE)):
            return _evaluates_because(f"{run_dir} no longer holds its report and gate")
        try:  # read once: hashed here, compared with what its run recorded below
            text = (run_dir / RESULTS_FILE).read_text(encoding="utf-8")
            docs.append(parse_document(text, run_dir / RESULTS_FILE))
        except (OSError, UnicodeDecodeError, DocumentError) as exc:
            return _evaluates_because(str(exc))
        hashes[model] = sha256_text(text)
    # The files say best what changed (the KB, a model); the instance, what they cannot (gates).
    stale = next(filter(None, (stale_reason(doc, inputs) for doc in docs)), None)
    if stale is not None:
        return _evaluates_because(stale)
    stored = stored_evaluation(instance, inputs.date, list(inputs.models), inputs.fingerprint())
    if stored.reason is not None:
        return _evaluates_because(stored.reason)
    edited = [m for m in inputs.models if stored.results_sha256[m] != hashes[m]]
    if edited:
        return _evaluates_because(
            f"{results / edited[0] / inputs.date / RESULTS_FILE} is not the file its run wrote"
        )
    when = f"{stored.made_at:%Y-%m-%d %H:%M} UTC" if stored.made_at else "earlier"
    runs = ", ".join(run_id[:8] for run_id in stored.run_ids)
    print(
        f"  up to date: code, inputs, models and gates are those of the runs made {when} ({runs}); "
        "their verdict stands (--force evaluates again)"
    )
    return True


def _evaluates_because(reason: str) -> bool:
    print(f"  evaluating again: today's stored evaluation cannot stand ({reason})")
    return False
