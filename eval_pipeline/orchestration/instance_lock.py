"""The project instance created under a file lock.

Two commands started at once in a fresh checkout (a CI matrix of models) would both find no
database and both create the tables: one then fails (`table ... already exists`, `UNIQUE
constraint failed: alembic_version`). Whoever takes the lock first writes dagster.yaml and
creates every storage's tables; the other opens them once they exist.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg
from filelock import FileLock

LOCK_FILE = "instance.lock"


def instance_lock(home: Path) -> FileLock:
    """The lock of the instance at `home` (held across processes on this host)."""
    return FileLock(home / LOCK_FILE)


def initialise(instance: dg.DagsterInstance) -> dg.DagsterInstance:
    """Make each storage create its tables now (they are created on first use)."""
    instance.get_runs_count()
    instance.event_log_storage.get_concurrency_keys()
    if instance.schedule_storage is not None:
        instance.schedule_storage.all_instigator_state()
    return instance
