"""Evaluation dates: UTC days."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta


def today_utc() -> str:
    return datetime.now(UTC).date().isoformat()


def end_of_day(date: str) -> datetime:
    """The first instant after `date` (UTC): what "as of date D" means for history and inputs."""
    return datetime.combine(datetime.fromisoformat(date).date() + timedelta(days=1), time(), UTC)


def now_utc() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)
