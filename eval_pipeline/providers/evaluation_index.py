"""The index of a results location's evaluations: each is `<results>/<model>/<date>/results.json`,
so a model's folder lists the dates it was evaluated, whatever the reading process's partitions.
Read here: a comparison's baseline (the latest earlier evaluation of the same model and project,
however old) and the HTML report's history (with the regression diff beside each latest one).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

from upath import UPath

from eval_pipeline.core.diff.baseline import RegressionDiff, why_not_a_baseline
from eval_pipeline.core.errors import CouldNotEvaluate, EvalPipelineError
from eval_pipeline.core.scoring.run_document import (
    REGRESSION_DIFF_FILE,
    RESULTS_FILE,
    DocumentError,
    RunDocument,
    parse_document,
)


def _is_date(name: str) -> bool:
    """Whether a folder's name is a date written YYYY-MM-DD (2026-13-01 is a folder of another kind)."""
    try:
        return date.fromisoformat(name).isoformat() == name
    except ValueError:
        return False


def evaluated_dates(root: Path | UPath, model: str) -> list[str]:
    """The dates `model` has an evaluation of under `root`, oldest first."""
    folder = root / model
    try:
        if not folder.is_dir():
            return []
        return sorted(d.name for d in folder.iterdir() if _is_date(d.name) and (d / RESULTS_FILE).is_file())
    except OSError as exc:
        raise CouldNotEvaluate(f"{folder}: cannot list the evaluated dates ({exc})") from None


@dataclass(frozen=True)
class BaselineSearch:
    baseline: RunDocument | None
    passed_over: list[str] = field(default_factory=list)  # "<date>: <why it cannot be one>"


def find_baseline(root: Path | UPath, head: RunDocument) -> BaselineSearch:
    """The latest evaluation of `head`'s model dated before it that can be its baseline; each
    later one that cannot is named with the reason (unreadable, another project, errored)."""
    model, day = head.provenance.model, head.provenance.date
    passed_over: list[str] = []
    for earlier in reversed([d for d in evaluated_dates(root, model) if d < day]):
        path = root / model / earlier / RESULTS_FILE
        try:
            doc = parse_document(path.read_text(encoding="utf-8"), path)
        except (EvalPipelineError, OSError, UnicodeDecodeError) as exc:
            passed_over.append(f"{earlier}: unreadable ({' '.join(str(exc).split()) or type(exc).__name__})")
            continue
        if reason := why_not_a_baseline(doc, head):
            passed_over.append(f"{earlier}: {reason}")
            continue
        return BaselineSearch(doc, passed_over)
    return BaselineSearch(None, passed_over)


def next_evaluated_date(root: Path | UPath, model: str, day: str) -> str | None:
    """The first date after `day` that `model` was evaluated: the one whose baseline `day` may be."""
    return next((d for d in evaluated_dates(root, model) if d > day), None)


@dataclass
class ResultsHistory:
    docs: list[RunDocument] = field(default_factory=list)
    comparisons: dict[str, RegressionDiff] = field(default_factory=dict)
    unreadable: list[str] = field(default_factory=list)  # one line each: which file, and why


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
    wanted = [p for p in root.iterdir() if not p.name.startswith("_") and (not models or p.name in models)]
    for model_dir in sorted(p for p in wanted if p.is_dir()):
        dates = [d for d in evaluated_dates(root, model_dir.name) if (date_from or d) <= d <= (date_to or d)]
        dates = dates[-last:] if last else dates
        for day in dates:
            try:
                path = model_dir / day / RESULTS_FILE
                history.docs.append(parse_document(path.read_text(encoding="utf-8"), path))
                if day == dates[-1] and (stored := _comparison(model_dir / day / REGRESSION_DIFF_FILE)):
                    history.comparisons[model_dir.name] = stored
            except EvalPipelineError as exc:
                if strict:
                    raise
                history.unreadable.append(str(exc))
    return history
