"""Evaluation dates: UTC days."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta

# How far back an evaluation date may be: the date partitions are this many days before today
# through today, the same in every process of every project, so a date asked for is a partition
# wherever the results live and whichever process (CLI, UI, daemon, run worker) loads the code.
MAX_DAYS_BACK = 366


def today_utc() -> str:
    return datetime.now(UTC).date().isoformat()


def days_before(day: str, days: int) -> str:
    return (date.fromisoformat(day) - timedelta(days=days)).isoformat()


def first_evaluation_date(today: str | None = None) -> str:
    """The earliest date that can be evaluated (and the first date partition)."""
    return days_before(today or today_utc(), MAX_DAYS_BACK)


def days_between(earlier: str, later: str) -> int:
    return (date.fromisoformat(later) - date.fromisoformat(earlier)).days


def end_of_day(date: str) -> datetime:
    """The first instant after `date` (UTC): what "as of date D" means for history and inputs."""
    return datetime.combine(datetime.fromisoformat(date).date() + timedelta(days=1), time(), UTC)


def now_utc() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)
