"""Stored evaluations read back for the HTML report: every model's results.json per date under
the results location (a local folder or an object store), and the regression diff stored beside
each model's latest one (what `run` printed as "since last run").
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from upath import UPath

from eval_pipeline.core.diff.baseline import RegressionDiff
from eval_pipeline.core.errors import EvalPipelineError
from eval_pipeline.core.scoring.run_document import (
    REGRESSION_DIFF_FILE,
    RESULTS_FILE,
    DocumentError,
    RunDocument,
    parse_document,
)
from eval_pipeline.providers.evaluation_index import evaluated_dates


@dataclass
class ResultsHistory:
    docs: list[RunDocument] = field(default_factory=list)
    comparisons: dict[str, RegressionDiff] = field(default_factory=dict)
    unreadable: list[str] = field(default_factory=list)  # one line each: which file, and why


def _dates(root: UPath, model: str, date_from: str | None, date_to: str | None) -> list[str]:
    return [d for d in evaluated_dates(root, model) if (date_from or d) <= d <= (date_to or d)]


def _comparison(path: UPath) -> RegressionDiff | None:
    if not path.is_file():
        return None
    try:
        return RegressionDiff.model_validate_json(path.read_bytes())
    except ValueError as exc:
        raise DocumentError(f"{path}: not a readable regression diff ({type(exc).__name__})") from None


def read_history(
    root: UPath,
    models: Collection[str] = (),
    date_from: str | None = None,
    date_to: str | None = None,
    *,
    last: int | None = None,
    strict: bool = True,
) -> ResultsHistory:
    """The evaluations of `models` (default: every model folder) dated `date_from`..`date_to`
    (inclusive, either open), at most the `last` dates of each. An unreadable file stops the read
    (`strict`) or is passed over and named in `unreadable`."""
    history = ResultsHistory()
    if not root.is_dir():
        return history
    folders = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("_"))
    for model_dir in folders:
        if models and model_dir.name not in models:
            continue
        dates = _dates(root, model_dir.name, date_from, date_to)
        dates = dates[-last:] if last else dates
        for date in dates:
            try:
                path = model_dir / date / RESULTS_FILE
                history.docs.append(parse_document(path.read_text(encoding="utf-8"), path))
                if date == dates[-1] and (stored := _comparison(model_dir / date / REGRESSION_DIFF_FILE)):
                    history.comparisons[model_dir.name] = stored
            except EvalPipelineError as exc:
                if strict:
                    raise
                history.unreadable.append(str(exc))
    return history
