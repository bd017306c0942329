"""`backfill`: evaluate a date range as one Dagster asset backfill and print each date's verdicts.
A running daemon (`dg dev`) carries it out, else this command does in its own process; a killed
command's backfill is ended first."""

from __future__ import annotations

import argparse
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eval_pipeline.cli.exit_status import EXIT_ERROR, EXIT_OK, UsageError, exit_for_gate
from eval_pipeline.cli.flags import add_flags, check_number
from eval_pipeline.cli.run import parse_date, select_models
from eval_pipeline.core.dates import days_before, days_between

if TYPE_CHECKING:
    from upath import UPath

MAX_DATES = 366
POLL_S = 2.0


def add_commands(sub: Any) -> None:
    p = sub.add_parser(
        "backfill",
        help="evaluate a date range (reports, diffs, comparisons) as one backfill",
        description="Evaluate every date of a range as one Dagster asset backfill on the project's "
        "instance (reports, each date's diff with the one before, comparisons), then print each "
        "date's verdicts.",
    )
    p.add_argument("--from", dest="start", required=True, help="first date YYYY-MM-DD (UTC)")
    p.add_argument("--to", dest="end", help="last date YYYY-MM-DD (UTC); default: the first")
    add_flags(p, "--model")
    p.add_argument("--timeout", type=float, default=120.0, help="minutes to wait (default 120)")


def _dates(start: str, end: str | None) -> list[str]:
    first, last = parse_date(start, "--from"), parse_date(end or start, "--to")
    days = days_between(first, last) + 1
    if days < 1:
        raise UsageError(f"--to ({last}) is before --from ({first})")
    if days > MAX_DATES:
        raise UsageError(f"--from/--to: {days} dates; at most {MAX_DATES} in one backfill")
    return [days_before(last, back) for back in reversed(range(days))]


def cmd_backfill(args: argparse.Namespace) -> int:
    from eval_pipeline.cli.project import check_evaluation_folders
    from eval_pipeline.location import location_paths

    paths = location_paths()
    dates = _dates(args.start, args.end)
    models = list(select_models(args.model, paths.models_file).models)
    check_number("--timeout", args.timeout, above=0)
    check_evaluation_folders(paths.results_root, paths.storage_dir, paths.cache_dir, paths.outputs_uri)
    from eval_pipeline.definitions import location
    from eval_pipeline.orchestration.backfill import (
        backfill_driver,
        backfill_targets,
        cancel_backfill,
        daemon_alive,
        end_abandoned_backfills,
        progress,
        submit_backfill,
        tag_backfill,
    )
    from eval_pipeline.orchestration.execution import project_instance
    from eval_pipeline.orchestration.stages import QUIET_LOGS
    from eval_pipeline.providers.object_store import output_path
    from eval_pipeline.runtime.run_monitor import end_orphaned_runs, owner_tags

    with project_instance() as instance, ExitStack() as stack:
        # Before anything carries on with a killed command's backfill.
        for line in [*end_abandoned_backfills(instance), *end_orphaned_runs(instance)]:
            print(f"  {line}")
        total = len(backfill_targets(dates, models))
        # Without a daemon the backfill is carried out here: its runs, dying with this process, name it.
        here = not daemon_alive(instance)
        tags = owner_tags() if here else {}
        graph = location().resolve_asset_graph()
        # Failures are summarised below; Dagster would print a traceback for each.
        backfill_id = submit_backfill(instance, graph, dates, models, tags, QUIET_LOGS)
        print(f"eval-pipeline: backfill {backfill_id}: {dates[0]}..{dates[-1]}, models {', '.join(models)}")
        print(
            f"  {total} asset partitions; follow it in the UI under Runs > Backfills (/runs/b/{backfill_id})"
        )
        if not here:
            print("  the running Dagster daemon carries it out", flush=True)
        deadline = time.monotonic() + args.timeout * 60
        shown = -1
        iterate = None
        state = progress(instance, backfill_id, total)
        while not state.ended and time.monotonic() < deadline:
            if state.done != shown:
                print(f"  {state.done}/{total} done …", flush=True)
                shown = state.done
            if not here and not daemon_alive(instance):  # the daemon relied on (`dg dev`) stopped
                here = True
                tag_backfill(instance, backfill_id, owner_tags())
            errors: list[str] = []
            if here:
                iterate = iterate or stack.enter_context(backfill_driver(instance))
                try:
                    errors = iterate(backfill_id)
                except KeyboardInterrupt:  # nothing would go on with it
                    cancel_backfill(instance, backfill_id, "its command was interrupted")
                    raise
                for error in errors:
                    print(f"  {error}", file=sys.stderr)
            if not here or errors:
                time.sleep(POLL_S)
            state = progress(instance, backfill_id, total)
    print(f"  backfill {state.status.value.lower()}: {state.done}/{total} asset partitions")
    code = EXIT_OK
    if not state.ended:
        after = "the next `backfill` cancels it" if here else "it goes on in Dagster"
        print(f"error: still running after {args.timeout:g} min; {after}", file=sys.stderr)
        code = EXIT_ERROR
    for run in state.failed_runs:
        print(f"error: run {run} failed (details in the UI)", file=sys.stderr)
        code = EXIT_ERROR
    results = output_path(paths.results_root)
    if state.ended:
        code = max(code, _follow_later_dates(dates[-1], models, results))
    return max(code, _verdicts(dates, models, results))


def _follow_later_dates(last: str, models: list[str], results_root: UPath) -> int:
    """The regression diffs of dates evaluated after the range, which may compare against it now."""
    from eval_pipeline.definitions import location
    from eval_pipeline.orchestration.execution import follow_later_dates, project_instance

    with project_instance() as instance:
        outcomes = follow_later_dates(
            last, models, results_root, location(), instance, lambda s: print(f"  {s}")
        )
    for outcome in outcomes:
        for failure in outcome.failures:
            print(f"error: {outcome.name}: {failure}", file=sys.stderr)
    return EXIT_ERROR if any(o.failures for o in outcomes) else EXIT_OK


def _verdicts(dates: list[str], models: list[str], results_dir: Path | UPath) -> int:
    """One line per date and model (health, score, gate, diff), then the date's comparison;
    the exit code is the worst gate (3 > 1 > 0), or 3 when a result is missing."""
    from pydantic import ValidationError

    from eval_pipeline.core.diff.baseline import RegressionDiff
    from eval_pipeline.core.diff.comparison import ModelComparison
    from eval_pipeline.core.rounding import fmt_score
    from eval_pipeline.core.scoring.run_document import (
        COMPARISON_DIR,
        COMPARISON_FILE,
        GATE_FILE,
        REGRESSION_DIFF_FILE,
        RESULTS_FILE,
        DocumentError,
        read_document,
    )
    from eval_pipeline.core.verdicts.run_gate import GateDecision

    code = EXIT_OK
    for date in dates:
        for model in models:
            run_dir = results_dir / model / date
            try:
                doc = read_document(run_dir / RESULTS_FILE)
                gate = GateDecision.model_validate_json((run_dir / GATE_FILE).read_text())
                diff = RegressionDiff.model_validate_json((run_dir / REGRESSION_DIFF_FILE).read_text())
            except (OSError, ValidationError, DocumentError) as exc:
                print(f"{date} {model}: no complete evaluation ({type(exc).__name__})", file=sys.stderr)
                code = EXIT_ERROR
                continue
            agg = doc.aggregate
            score = fmt_score(agg.combined_score)
            reasons = f" ({'; '.join(gate.reasons)})" if gate.reasons else ""
            print(f"{date} {model}: {agg.health.value} {score}, gate {gate.status.value}{reasons}")
            print(f"    diff: {diff.verdict}")
            code = max(code, exit_for_gate(gate.status))
        comparison_file = results_dir / COMPARISON_DIR / date / COMPARISON_FILE
        if len(models) > 1 and comparison_file.is_file():
            comparison = ModelComparison.model_validate_json(comparison_file.read_text())
            for verdict in comparison.verdicts:
                print(f"    comparison: {verdict}")
    return code
