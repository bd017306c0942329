"""The project instance's SQLite storage: Dagster's files and schema, pooled connections, and
nothing committed lost when a process dies without closing.

No `from __future__ import annotations`: Dagster reads the asset's context annotation itself.
"""

import contextlib
import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType

import dagster as dg
import pytest
import sqlalchemy as sa
from alembic.script import ScriptDirectory
from dagster._core.storage.event_log.sqlite.sqlite_event_log import INDEX_SHARD_NAME, SqliteEventLogStorage

from eval_pipeline.orchestration.execution import EARLIER_DEFAULTS, dagster_yaml, project_instance
from eval_pipeline.orchestration.instance_storage import ProjectEventLogStorage, _event_log_scripts

DAYS = dg.StaticPartitionsDefinition(["d1", "d2"])


@dg.asset(partitions_def=DAYS)
def numbers(context: dg.AssetExecutionContext) -> dg.MaterializeResult[None]:
    return dg.MaterializeResult(metadata={"day": context.partition_key})


def _home_on_dagsters_own_storage(tmp_path: Path, base: Path) -> Path:
    """A second home whose dagster.yaml opens `base` with Dagster's own `storage: sqlite:`."""
    other = tmp_path / "dagsters_own"
    other.mkdir()
    (other / "dagster.yaml").write_text(
        f"telemetry:\n  enabled: false\nstorage:\n  sqlite:\n    base_dir: {base}\n"
    )
    return other


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The project instance's home (not created yet), as DAGSTER_HOME."""
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def _storage_classes(instance: dg.DagsterInstance) -> list[str]:
    return [
        type(s).__name__
        for s in (instance.run_storage, instance.event_log_storage, instance.schedule_storage)
    ]


def _materialised_days(instance: dg.DagsterInstance) -> list[str]:
    return sorted(instance.get_materialized_partitions(numbers.key))


def test_a_project_instance_and_dagsters_own_storage_read_each_others_history(
    tmp_path: Path, home: Path
) -> None:
    with project_instance(home) as instance:
        assert _storage_classes(instance) == [
            "ProjectRunStorage",
            "ProjectEventLogStorage",
            "ProjectScheduleStorage",
        ]
        assert dg.materialize([numbers], instance=instance, partition_key="d1").success
        ours = instance.get_runs()[0].run_id
    with dg.DagsterInstance.from_config(str(_home_on_dagsters_own_storage(tmp_path, home))) as theirs:
        assert _storage_classes(theirs) == [
            "SqliteRunStorage",
            "SqliteEventLogStorage",
            "SqliteScheduleStorage",
        ]
        assert _materialised_days(theirs) == ["d1"]
        assert theirs.get_run_by_id(ours) is not None and theirs.get_run_by_id(ours).is_success  # type: ignore[union-attr]
        assert any(e.dagster_event_type == dg.DagsterEventType.STEP_SUCCESS for e in theirs.all_logs(ours))
        assert dg.materialize([numbers], instance=theirs, partition_key="d2").success
    with project_instance(home) as instance:
        assert _materialised_days(instance) == ["d1", "d2"]
        assert len(instance.get_runs()) == 2


def test_what_a_process_committed_survives_it_dying_without_closing(home: Path) -> None:
    # The child keeps its connections open and never checkpoints: another process must still see
    # every committed event (WAL with synchronous=NORMAL loses nothing to a process crash).
    child = textwrap.dedent(
        """
        import os, dagster as dg
        from eval_pipeline.orchestration.execution import project_instance
        from tests.orchestration.test_instance_storage import numbers
        instance = project_instance()
        assert dg.materialize([numbers], instance=instance, partition_key="d2").success
        os._exit(0)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", child], cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert (home / "history" / "runs" / "index.db-wal").exists()  # not checkpointed: read from the log
    with project_instance(home) as instance:
        assert _materialised_days(instance) == ["d2"]
        (run,) = instance.get_runs()
        assert run.is_success


def test_wiping_the_instance_closes_the_files_it_deletes(home: Path) -> None:
    with project_instance(home) as instance:
        assert dg.materialize([numbers], instance=instance, partition_key="d1").success
        instance.wipe()
        assert _materialised_days(instance) == []
        assert dg.materialize([numbers], instance=instance, partition_key="d2").success
        assert _materialised_days(instance) == ["d2"]


@pytest.mark.parametrize("earlier", EARLIER_DEFAULTS)
def test_an_instance_on_an_earlier_default_is_brought_up_to_date(tmp_path: Path, earlier: str) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text(earlier)
    with project_instance(home) as instance:
        assert _storage_classes(instance)[1] == "ProjectEventLogStorage"
    assert (home / "dagster.yaml").read_text() == dagster_yaml(home)


def _shard(db: Path) -> tuple[set[str], str, str]:
    """A run database's schema statements, journal mode and migration revision."""
    with sqlite3.connect(db) as conn:
        schema = {row[0] for row in conn.execute("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL")}
        (mode,) = conn.execute("PRAGMA journal_mode").fetchone()
        (revision,) = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    return schema, mode, revision


def test_a_new_runs_database_is_the_one_dagster_makes_and_dagster_carries_on_with_it(tmp_path: Path) -> None:
    # Made with the migrations read once a process instead of twice a run: the same tables and
    # indexes, WAL, stamped at the same head; Dagster's own storage finds it current and uses it.
    ours = ProjectEventLogStorage(str(tmp_path / "ours"))
    theirs = SqliteEventLogStorage(str(tmp_path / "theirs"))
    for storage in (ours, theirs):
        with storage.run_connection("r1"):
            pass
    made = _shard(tmp_path / "ours" / "r1.db")
    assert made == _shard(tmp_path / "theirs" / "r1.db")
    assert made[2] == _event_log_scripts().as_revision_number("head")
    stamped = (tmp_path / "ours" / "r1.db").stat().st_mtime_ns
    again = ProjectEventLogStorage(str(tmp_path / "ours"))
    with again.run_connection("r1"):
        pass  # a database already stamped is left as it is
    assert (tmp_path / "ours" / "r1.db").stat().st_mtime_ns == stamped
    dagsters = SqliteEventLogStorage(str(tmp_path / "ours"))
    with dagsters.run_connection("r1") as conn:
        conn.execute(sa.text("SELECT count(*) FROM event_logs"))
    assert _shard(tmp_path / "ours" / "r1.db") == made
    for storage in (ours, theirs, again, dagsters):
        storage.dispose()


def _migration_reads(opening: Callable[[], object]) -> int:
    """How many times `opening` reads Dagster's migration scripts (alembic's ScriptDirectory)."""
    reading = ScriptDirectory.from_config.__func__.__code__  # type: ignore[attr-defined]
    reads = []

    def profile(frame: FrameType, event: str, _: object) -> None:
        if event == "call" and frame.f_code is reading:
            reads.append(frame)

    sys.setprofile(profile)
    try:
        opening()
    finally:
        sys.setprofile(None)
    return len(reads)


def test_a_home_opened_again_reads_no_migrations_unless_dagster_has_a_table_to_add(home: Path) -> None:
    # Dagster reads its scripts to learn the head revision, and leaves a stamped database as it
    # is: the project's storages skip the reading. One it would still change goes its way.
    assert _migration_reads(lambda: project_instance(home).dispose()) > 0  # made: Dagster's way
    assert _migration_reads(lambda: project_instance(home).dispose()) == 0
    runs = home / "history" / "runs.db"
    with sqlite3.connect(runs) as conn:
        conn.execute("DROP TABLE instance_info")
    assert _migration_reads(lambda: project_instance(home).dispose()) > 0
    with sqlite3.connect(runs) as conn:
        assert conn.execute("SELECT name FROM sqlite_master WHERE name = 'instance_info'").fetchone()
    with project_instance(home) as instance:
        assert dg.materialize([numbers], instance=instance, partition_key="d1").success
        assert _materialised_days(instance) == ["d1"]


def test_two_runs_claiming_a_pools_last_slot_at_the_same_moment_get_it_once(home: Path) -> None:
    # Two processes' runs (two instances on one home, a thread each) ask for a pool's one slot at
    # once, both having seen it free: each waits for the other just before it takes the slot.
    # Dagster's SQLite claim picked a free slot, then took it by id, so both took it and two runs
    # called one provider at once (tests/test_parallel_models.py, under load).
    barrier = threading.Barrier(2, timeout=10)

    def meet_before_taking(conn: object, cursor: object, statement: str, *_: object) -> None:
        if statement.lstrip().upper().startswith("UPDATE CONCURRENCY_SLOTS"):
            with contextlib.suppress(threading.BrokenBarrierError):
                barrier.wait()

    with project_instance(home) as first, project_instance(home) as second:
        first.event_log_storage.set_concurrency_slots("pool", 1)
        storages = [first.event_log_storage, second.event_log_storage]
        for storage in storages:
            assert isinstance(storage, ProjectEventLogStorage)
            index = storage._engines.engine(storage.conn_string_for_shard(INDEX_SHARD_NAME))
            sa.event.listen(index, "before_cursor_execute", meet_before_taking)
        claimed: dict[str, bool] = {}

        def claim(run_id: str, storage: object) -> None:
            assert isinstance(storage, ProjectEventLogStorage)
            claimed[run_id] = storage.claim_concurrency_slot("pool", run_id, "step").is_claimed

        threads = [threading.Thread(target=claim, args=(f"run-{i}", s)) for i, s in enumerate(storages)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(claimed.values()) == [False, True], claimed
        info = first.event_log_storage.get_concurrency_info("pool")
        assert [slot.run_id for slot in info.claimed_slots] == [r for r, got in claimed.items() if got]


def test_a_table_once_seen_is_not_looked_up_again_until_a_wipe(home: Path) -> None:
    # Dagster asks before every dynamic-partition lookup, opening a database engine each time.
    lookups: list[str] = []

    def count(conn: sa.Connection, cursor: object, statement: str, *_: object) -> None:
        if "PRAGMA" in statement and "dynamic_partitions" in statement:
            lookups.append(statement)

    with project_instance(home) as instance:
        storage = instance.event_log_storage
        assert isinstance(storage, ProjectEventLogStorage)
        sa.event.listen(sa.Engine, "before_cursor_execute", count)
        try:
            assert storage.has_table("dynamic_partitions") and storage.has_table("dynamic_partitions")
            assert len(lookups) == 1
            storage.wipe()
            assert storage.has_table("dynamic_partitions")
            assert len(lookups) == 2
        finally:
            sa.event.remove(sa.Engine, "before_cursor_execute", count)
