"""`diff BASE HEAD`: compare two stored runs test by test; the exit code follows the diff gate
(core/verdicts/regression_gate.py), or the CI job's verdict with --run-exit."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eval_pipeline.cli.exit_status import UsageError, exit_for_gate
from eval_pipeline.cli.flags import (
    add_flags,
    check_junit,
    junit_arg,
    path_text_arg,
    project_gates,
    results_dir,
)

if TYPE_CHECKING:  # the parser imports this module: the result models load with the command
    from eval_pipeline.core.scoring.run_document import RunDocument
    from eval_pipeline.core.verdicts.regression_gate import DiffGate
    from eval_pipeline.core.verdicts.run_gate import Verdict


def add_commands(sub: Any) -> None:
    p = sub.add_parser(
        "diff",
        help="per-test diff of two runs (exit 1 when the diff gate fails)",
        description="Compare two stored evaluations test by test. BASE and HEAD are MODEL@DATE "
        "(under --results-dir) or a path to a results.json. Exit 1 when the diff gate fails.",
    )
    p.add_argument("base", type=path_text_arg, help="MODEL@DATE or a results.json path")
    p.add_argument("head", type=path_text_arg, help="MODEL@DATE or a results.json path")
    add_flags(p, "--results-dir")
    p.add_argument(
        "--format",
        choices=("text", "markdown", "json"),
        default="text",
        dest="output",
        help="text for a terminal; markdown: a pull-request comment of at most 60 lines, critical "
        "failures and coverage first; json: one object and nothing else on stdout [text]",
    )
    p.add_argument("--strict", action="store_true", help="fail on any regression, noise or not")
    add_flags(p, "--allow-removed", "--models-file")
    p.add_argument(
        "--run-exit",
        type=int,
        choices=(0, 1, 3),
        metavar="CODE",
        help="the exit code of the `run` that made HEAD (0, 1 or 3): the verdict (the markdown's "
        "first line, and the exit code) is then the CI job's, that run's release gate "
        "(gate.json beside HEAD) with this diff's coverage and regressions; see docs/ci.md",
    )
    junit_arg(p, "one test case per test of HEAD, failing on the regressions the gate counts")


def resolve(ref: str, results_dir: Path) -> Path:
    """A results.json path, a run directory, or MODEL@DATE under `results_dir`."""
    from eval_pipeline.core.scoring.run_document import RESULTS_FILE

    path = Path(ref)
    if path.is_file():
        return path
    if (path / RESULTS_FILE).is_file():
        return path / RESULTS_FILE
    model, at, date = ref.rpartition("@")
    if at and (results_dir / model / date / RESULTS_FILE).is_file():
        return results_dir / model / date / RESULTS_FILE
    raise UsageError(
        f"{ref}: no results found (expected MODEL@DATE under {results_dir}, or a results.json path)"
    )


def cmd_diff(args: argparse.Namespace) -> int:
    from eval_pipeline.core.diff.compare import diff_documents, load_for_diff, recorded_ids
    from eval_pipeline.core.fileio import atomic_write_text
    from eval_pipeline.core.report.diff_comment import render_diff_comment
    from eval_pipeline.core.report.diff_junit import render_diff_junit
    from eval_pipeline.core.report.diff_text import render_diff_text
    from eval_pipeline.core.report.shown_ids import with_original_ids
    from eval_pipeline.core.verdicts.regression_gate import diff_gate

    check_junit(args.junit)
    allow_removed = project_gates(args).allow_removed
    root = results_dir(args)
    base = load_for_diff(resolve(args.base, root))
    head_file = resolve(args.head, root)
    head = load_for_diff(head_file)
    # Both sides with the user's own ids where an imported collection's were mapped (either
    # side's record, the head's first), so every output of the diff names them.
    ids = recorded_ids(base, head)
    base, head = with_original_ids(base, ids), with_original_ids(head, ids)
    diff = diff_documents(base, head)
    gate = diff_gate(diff, strict=args.strict, allow_removed=allow_removed)
    job = None if args.run_exit is None else _job(args.run_exit, head_file, head, gate)
    renderers: dict[str, Callable[[], str]] = {
        "text": lambda: render_diff_text(diff, gate),
        "markdown": lambda: render_diff_comment(diff, gate, job),
        "json": lambda: json.dumps(
            {"gate": gate.model_dump(mode="json"), "diff": diff.model_dump(mode="json")}, indent=2
        ),
    }
    if args.junit is not None:
        categories = {r.test_id: r.category for r in head.semantic}
        atomic_write_text(args.junit, render_diff_junit(diff, gate, allow_removed, categories))
    print(renderers[args.output]())
    return exit_for_gate(gate.status if job is None else job.status)


def _job(run_exit: int, head_file: Path, head: RunDocument, gate: DiffGate) -> Verdict:
    """The CI job's verdict: the release gate stored beside HEAD's results, and the diff gate."""
    from eval_pipeline.core.scoring.run_document import GATE_FILE
    from eval_pipeline.core.verdicts.job_verdict import job_verdict
    from eval_pipeline.core.verdicts.run_gate import read_gate

    gate_file = head_file.parent / GATE_FILE
    release = read_gate(gate_file) if gate_file.is_file() else None
    critical = [c.test_id for c in head.aggregate.critical_failures]
    return job_verdict(run_exit, release, critical, gate)
