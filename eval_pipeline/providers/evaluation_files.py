"""The one writer of an evaluation's files in `<results>/<model>/<date>/`: results.json, report.md
(shown with the user's own ids) and gate.json, for every route (the graph's report, a narrowed
run). The gate decision is written last: results without one were cut short, and say so."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from eval_pipeline.core.report.markdown import render_markdown
from eval_pipeline.core.report.shown_ids import shown_reading
from eval_pipeline.core.scoring.run_document import GATE_FILE, REPORT_FILE, RESULTS_FILE
from eval_pipeline.providers.object_store import write_text

if TYPE_CHECKING:
    from upath import UPath

    from eval_pipeline.core.report.conclusion import Evaluation
    from eval_pipeline.core.report.reading import Reading


def write_report(run_dir: Path | UPath, reading: Reading, since: Sequence[str] = ()) -> str:
    """report.md, with the "since last run" section once the regression diff exists; its text."""
    shown = shown_reading(reading)
    markdown = render_markdown(shown.document, since, reading=shown)
    write_text(run_dir / REPORT_FILE, markdown)
    return markdown


def write_evaluation(run_dir: Path | UPath, evaluation: Evaluation) -> tuple[str, str]:
    """The evaluation's three files; the results.json and report.md texts written."""
    results_json = evaluation.document.model_dump_json(indent=2)
    write_text(run_dir / RESULTS_FILE, results_json)
    markdown = write_report(run_dir, evaluation.reading)
    write_text(run_dir / GATE_FILE, evaluation.gate.model_dump_json(indent=2))
    return results_json, markdown
