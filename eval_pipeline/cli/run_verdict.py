"""What `run` prints for each model's stored (or just made) evaluation, and the exit code: the
summary, the since block, failing tests, the gate. One route for full, narrowed and standing runs."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from eval_pipeline.cli.exit_status import EXIT_ERROR, EXIT_OK, exit_for_gate

if TYPE_CHECKING:
    from upath import UPath

    from eval_pipeline.core.diff.baseline import RegressionDiff
    from eval_pipeline.core.scoring.evaluation import Scope
    from eval_pipeline.core.verdicts.project_gates import ProjectGates
    from eval_pipeline.orchestration.evaluation_route import EvaluationRequest, Outcome


def report_runs(request: EvaluationRequest, outcome: Outcome, junit: Path | None = None) -> int:
    """Each model's summary and gate; the exit code is the worst of them (3 > 1 > 0). With
    `junit`, every model's tests and gate in one JUnit file. The evaluations a narrowed run has
    just written are used as they are (`outcome.evaluated`), not read back."""
    from eval_pipeline.core.fileio import atomic_write_text
    from eval_pipeline.core.report.failures import failure_lines
    from eval_pipeline.core.report.markdown import console_summary
    from eval_pipeline.core.report.reading import reading_of
    from eval_pipeline.core.report.run_junit import ModelRun, render_run_junit
    from eval_pipeline.core.report.shown_ids import shown_reading, with_original_ids
    from eval_pipeline.core.scoring.run_document import (
        GATE_FILE,
        REGRESSION_DIFF_FILE,
        REPORT_FILE,
        REPORT_HTML_FILE,
        RESULTS_FILE,
        read_document,
    )
    from eval_pipeline.core.verdicts.run_gate import read_gate

    date, scope, errors = request.date, request.scope, outcome.errors
    code = EXIT_ERROR if errors else EXIT_OK
    runs: list[ModelRun] = []
    for model in request.models:
        run_dir = outcome.results / model / date
        held = (outcome.evaluated or {}).get(model)
        if held is None and not (run_dir / RESULTS_FILE).is_file():
            code = EXIT_ERROR
            print(f"{model} @ {date}: no results were written (see the errors above)", file=sys.stderr)
            runs.append(ModelRun(model, None, None, "no results were written: " + "; ".join(errors)))
            continue
        # One reading for every report below: grouped once, its failing tests found once.
        # Shown with the user's own ids where an imported collection's were mapped.
        stored = held.reading if held is not None else reading_of(read_document(run_dir / RESULTS_FILE))
        reading = shown_reading(stored)
        doc = reading.document
        if held is None and not (run_dir / GATE_FILE).is_file():
            # No health, score or report path without the gate decision behind them: a run cut
            # short (a full disk, say) may have left results that nothing judged. The error that
            # cut it short, when there is one, was the line above.
            code = EXIT_ERROR
            if not errors:
                print(f"{model} @ {date}: no gate decision was written", file=sys.stderr)
            runs.append(ModelRun(model, doc, None, "no gate decision was written", reading))
            continue
        diff_file = run_dir / REGRESSION_DIFF_FILE
        regression = None
        if scope.is_full and diff_file.is_file():
            from eval_pipeline.core.diff.baseline import RegressionDiff

            regression = with_original_ids(
                RegressionDiff.model_validate_json(diff_file.read_text()),
                stored.document.provenance.original_ids,
            )
            for skipped in regression.passed_over:
                print(f"warning: passed over as a baseline: {skipped}", file=sys.stderr)
        print(console_summary(doc))
        code = max(code, _since(regression, run_dir, scope, request.gates))
        print("\n".join(failure_lines(doc, str(run_dir / REPORT_FILE), reading.failures)))
        print(f"  report: {run_dir / REPORT_FILE}\n  results: {run_dir / RESULTS_FILE}")
        if (run_dir / REPORT_HTML_FILE).is_file():  # written with the regression diff (full runs)
            print(f"  html: {run_dir / REPORT_HTML_FILE}")
        gate = held.gate if held is not None else read_gate(run_dir / GATE_FILE)
        runs.append(ModelRun(model, doc, gate, reading=reading))
        if not gate.passed:
            print(f"  gate {gate.status.value}: {'; '.join(gate.reasons)}")
        code = max(code, exit_for_gate(gate.status))
    if junit is not None:  # rendering walks every test: only when a file was asked for
        atomic_write_text(junit, render_run_junit(runs))
    return code


def _since(
    regression: RegressionDiff | None, run_dir: Path | UPath, scope: Scope, gates: ProjectGates
) -> int:
    """Print what changed since the previous evaluation; the exit code its verdict asks for."""
    if not scope.is_full:
        print("  since: a narrowed run is not compared")
        return EXIT_OK
    from eval_pipeline.core.report.run_output import REGRESSION_DIFF_MD, since_lines
    from eval_pipeline.core.verdicts.since import baseline_too_old, since_verdict

    gating, allow_removed = gates.fail_on_regression, gates.allow_removed
    verdict = since_verdict(
        regression,
        fail_on_regression=gating,
        allow_removed=allow_removed,
        max_baseline_age_days=gates.max_baseline_age_days,
    )
    if regression is None:
        print("  since: no regression diff was written")
    else:
        print("\n".join(since_lines(regression, str(run_dir / REGRESSION_DIFF_MD), gating, allow_removed)))
        if too_old := baseline_too_old(regression, gates.max_baseline_age_days):
            print(f"  baseline gate failed: {too_old[0]}")
        elif not gating and verdict.reasons:
            print(f"  coverage gate failed since {regression.baseline_date}: {'; '.join(verdict.reasons)}")
    return exit_for_gate(verdict.status)
