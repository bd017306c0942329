"""The first date a project evaluated, read from its results location's layout: every evaluation
writes `<results>/<model>/<date>/`, so the date-named folders under the model folders are the
dates evaluated. Only names are read: on an object store that is one listing per model, where
opening each date's files would cost a request per date at every load of the code location.
"""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

from eval_pipeline.core.errors import CouldNotEvaluate

if TYPE_CHECKING:
    from upath import UPath

_DATE_NAME = re.compile(r"\d{4}-\d{2}-\d{2}")


def _is_date(name: str) -> bool:
    if not _DATE_NAME.fullmatch(name):
        return False
    try:
        date.fromisoformat(name)
    except ValueError:  # 2026-13-01: a folder of another kind, not a date
        return False
    return True


def first_evaluated_date(root: Path | UPath) -> str | None:
    """The earliest `<root>/<model>/<date>` folder's date; None before any evaluation. Folders
    named `_…` (narrowed runs, comparisons) hold no model's evaluations and are passed over."""
    try:
        if not root.is_dir():
            return None
        dates = [
            day.name
            for model in root.iterdir()
            if model.is_dir() and not model.name.startswith("_")
            for day in model.iterdir()
            if _is_date(day.name)
        ]
    except OSError as exc:
        raise CouldNotEvaluate(f"{root}: cannot list the evaluated dates ({exc})") from None
    return min(dates, default=None)
