"""A project's schedules (`schedules.yaml` beside `models.yaml`; none: the defaults below).

- `daily`: each day, the enabled models evaluated for the new day, then its model comparison.
- `comparison_backfill`: periodically, the models evaluated and compared again over the
  `window_days` dates before the tick's (a model added or changed, or a weekly look back).
- `models`: the model keys a schedule evaluates; unset, every enabled free model. A paid model
  runs only when listed, and only on a tick whose estimated spend is within
  `budget_per_tick_usd` (default 0: none).
Crons are UTC.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, field_validator

from eval_pipeline.core.errors import BadInput
from eval_pipeline.core.inputs.file_reader import load_input
from eval_pipeline.core.inputs.frozen import FrozenModel

SCHEDULES_FILE = "schedules.yaml"
MAX_WINDOW_DAYS = 366


class _Schedule(FrozenModel):
    enabled: bool = True
    cron: str
    models: list[str] | None = Field(default=None, description="unset: every enabled free model")

    @field_validator("cron")
    @classmethod
    def _five_fields(cls, value: str) -> str:
        # Dagster checks the cron itself when the code location loads; this names the file first.
        if len(value.split()) != 5:
            raise ValueError(f"'{value}' is not a cron of five fields (minute hour day month weekday)")
        return value


class DailySchedule(_Schedule):
    cron: str = "0 6 * * *"


class BackfillSchedule(_Schedule):
    cron: str = "0 7 * * 1"
    window_days: int = Field(default=7, ge=1, le=MAX_WINDOW_DAYS)


class ScheduleSettings(FrozenModel):
    schema_version: Literal[1] = 1
    daily: DailySchedule = DailySchedule()
    comparison_backfill: BackfillSchedule = BackfillSchedule()
    budget_per_tick_usd: float = Field(default=0.0, ge=0.0)


def load_schedules(path: Path) -> ScheduleSettings:
    """The file's settings, or the defaults when there is no file; BadInput names the file and
    the first field that is wrong."""
    if not path.exists():
        return ScheduleSettings()
    doc = load_input(path)
    try:
        return ScheduleSettings.model_validate(doc if doc is not None else {})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "-"
        message = str(first["msg"]).removeprefix("Value error, ")
        raise BadInput(f"{path}: field '{where}': {message}") from None
