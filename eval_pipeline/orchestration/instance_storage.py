"""The project instance's SQLite storage: Dagster's files, layout and schema, cheap per event.

Dagster's SQLite storages open an engine and connection per statement, and closing the last
connection to a WAL database checkpoints it with an fsync: a disk sync per stored event, most of
a warm run's time. These keep connections pooled, commit with `synchronous=NORMAL` (a process
crash loses nothing, a power cut at most the last commits) and read the migrations once a
process. An instance can go back to `storage: sqlite:` at any time. Named in dagster.yaml, so
the webserver and the daemon use them too.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from contextlib import closing, contextmanager
from functools import cache, cached_property
from typing import Any, Self

import sqlalchemy as sa
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from eval_pipeline.core.system_limits import sqlite_exhausted
from eval_pipeline.runtime.dagster_private import (
    INDEX_SHARD_NAME,
    SQLITE_BUSY_TIMEOUT_SECONDS,
    ConcurrencySlotsTable,
    ConcurrencySlotStatus,
    ConfigurableClassData,
    DagsterSqliteStorage,
    SqlEventLogStorageMetadata,
    SqliteEventLogStorage,
    SqliteRunStorage,
    SqliteScheduleStorage,
    create_db_conn_string,
    get_alembic_config,
    sqlite_event_log,
)

# Event logs are one database per run: keep the recent runs' open, close the rest (file handles).
SHARDS_KEPT = 8


def _relaxed_sync(dbapi_connection: Any, _record: object) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


@contextmanager
def limits_named(conn_string: str) -> Iterator[None]:
    """A full disk, or a file-size or open-file limit reached, while using the database: one line
    naming its file and the limit (SQLite's own message names neither)."""
    try:
        yield
    except (sa.exc.OperationalError, sqlite3.OperationalError) as exc:
        out = sqlite_exhausted(
            str(getattr(exc, "orig", exc)), sa.make_url(conn_string).database or conn_string
        )
        if out is None:
            raise
        raise out from None


class Engines:
    """Pooled engines by database, the most recently used kept; thread-safe."""

    def __init__(self, kept: int) -> None:
        self._kept = kept
        self._engines: OrderedDict[str, sa.Engine] = OrderedDict()
        self._lock = threading.Lock()

    @contextmanager
    def transaction(self, conn_string: str) -> Iterator[sa.Connection]:
        with limits_named(conn_string), self.engine(conn_string).connect() as conn, conn.begin():
            yield conn

    def engine(self, conn_string: str) -> sa.Engine:
        with self._lock:
            made = self._engines.get(conn_string)
            if made is None:
                made = sa.create_engine(conn_string, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS})
                sa.event.listen(made, "connect", _relaxed_sync)
                self._engines[conn_string] = made
                while len(self._engines) > self._kept:
                    self._engines.popitem(last=False)[1].dispose()
            self._engines.move_to_end(conn_string)
            return made

    def dispose(self) -> None:
        """Close every pooled connection (before files go, and when the instance closes)."""
        with self._lock:
            for made in self._engines.values():
                made.dispose()
            self._engines.clear()


class _OneDatabase:
    """`connect()` of a storage kept in one database file (runs, schedules), through a pool."""

    _conn_string: str
    _DB: str  # the database's name under base_dir
    _TABLES: tuple[str, ...] = ()  # that Dagster adds to a stamped database without them

    @cached_property
    def _engines(self) -> Engines:
        return Engines(kept=1)

    @classmethod
    def from_local(cls, base_dir: str, inst_data: ConfigurableClassData | None = None) -> Self:
        conn_string = create_db_conn_string(base_dir, cls._DB)
        if _stamped(sa.make_url(conn_string).database or "", *cls._TABLES):
            return cls(conn_string, inst_data)  # type: ignore[call-arg]
        return super().from_local(base_dir, inst_data)  # type: ignore[misc,no-any-return]

    @contextmanager
    def connect(self) -> Iterator[sa.Connection]:
        with self._engines.transaction(self._conn_string) as conn:
            yield conn

    def dispose(self) -> None:
        self._engines.dispose()


def _stamped(db_path: str, *tables: str) -> bool:
    """Whether the database at `db_path` exists, stamped with a migration, with `tables`: Dagster
    reads its migration scripts only to leave such a database as it is. Read-only; anything
    unexpected (absent, locked) goes Dagster's way."""
    if not os.path.exists(db_path):
        return False
    try:
        with closing(sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)) as conn:
            names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if not {"alembic_version", *tables} <= names:
                return False
            return conn.execute("SELECT version_num FROM alembic_version").fetchone() is not None
    except sqlite3.Error:
        return False


class ProjectRunStorage(_OneDatabase, SqliteRunStorage):
    _DB, _TABLES = "runs", ("instance_info",)


class ProjectScheduleStorage(_OneDatabase, SqliteScheduleStorage):
    _DB = "schedules"


@cache
def _event_log_scripts() -> ScriptDirectory:
    """Dagster's event-log migrations, read once a process (Dagster reads them per new run)."""
    return ScriptDirectory.from_config(get_alembic_config(sqlite_event_log.__file__))


class ProjectEventLogStorage(SqliteEventLogStorage):
    """Events sharded per run as Dagster does; each shard's tables are created on first use."""

    def __init__(self, base_dir: str, inst_data: ConfigurableClassData | None = None) -> None:
        self._engines = Engines(kept=SHARDS_KEPT + 1)  # and the index
        self._tables: set[str] = set()
        super().__init__(base_dir, inst_data)

    @contextmanager
    def _connect(self, shard: str) -> Iterator[sa.Connection]:
        with self._db_lock:
            conn_string = self.conn_string_for_shard(shard)
            if shard not in self._initialized_dbs:
                with limits_named(conn_string):
                    self._initdb(self._engines.engine(conn_string))
                self._initialized_dbs.add(shard)
            with self._engines.transaction(conn_string) as conn:
                yield conn

    def _initdb(self, engine: sa.Engine, for_index_shard: bool = False) -> None:
        """A run's database made as Dagster makes it (tables, WAL, stamped at head; a stamped one
        left alone) from the migrations read once a process. A new index, and a run's database
        another process is creating at the same moment, go Dagster's way, which retries."""
        if for_index_shard and _stamped(engine.url.database or ""):
            return
        if not for_index_shard:
            try:
                with engine.connect() as conn:
                    context = MigrationContext.configure(conn)
                    if context.get_current_revision() is not None:
                        return
                    SqlEventLogStorageMetadata.create_all(engine)
                    conn.execute(sa.text("PRAGMA journal_mode=WAL;"))
                    context.stamp(_event_log_scripts(), "head")
                    conn.commit()
                return
            except (sa.exc.DatabaseError, sqlite3.DatabaseError):
                pass
        super()._initdb(engine, for_index_shard)

    def _claim_concurrency_slot(
        self, concurrency_key: str, run_id: str, step_key: str
    ) -> ConcurrencySlotStatus:
        """A free slot taken in one statement. Dagster's picks one, then takes it by id: without
        `SELECT ... FOR UPDATE` in SQLite two processes could both take it."""
        free = (
            sa.select(ConcurrencySlotsTable.c.id)
            .where(
                ConcurrencySlotsTable.c.concurrency_key == concurrency_key,
                ConcurrencySlotsTable.c.step_key.is_(None),
                ConcurrencySlotsTable.c.deleted.is_(False),
            )
            .limit(1)
            .scalar_subquery()
        )
        with self.index_connection() as conn:
            taken = conn.execute(
                ConcurrencySlotsTable.update()
                .where(ConcurrencySlotsTable.c.id == free, ConcurrencySlotsTable.c.step_key.is_(None))
                .values(run_id=run_id, step_key=step_key)
            ).rowcount
        return ConcurrencySlotStatus.CLAIMED if taken else ConcurrencySlotStatus.BLOCKED

    def has_table(self, table_name: str) -> bool:
        """Asked before every dynamic-partition lookup, where Dagster opens an engine each time:
        a table seen is remembered (until a wipe)."""
        if table_name not in self._tables:
            with self._engines.engine(self.conn_string_for_shard(INDEX_SHARD_NAME)).connect() as conn:
                if conn.dialect.has_table(conn, table_name):
                    self._tables.add(table_name)
        return table_name in self._tables

    def wipe(self) -> None:
        self._engines.dispose()  # the shard files are deleted
        self._tables.clear()
        super().wipe()

    def dispose(self) -> None:
        self._engines.dispose()
        super().dispose()


class ProjectSqliteStorage(DagsterSqliteStorage):
    """Dagster's `storage: sqlite:` (same files under the same base_dir) on the classes above."""

    def __init__(self, base_dir: str, inst_data: ConfigurableClassData | None = None) -> None:
        self.base_dir = base_dir
        self._run_storage = ProjectRunStorage.from_local(os.path.join(base_dir, "history", ""))
        self._event_log_storage = ProjectEventLogStorage(os.path.join(base_dir, "history", "runs", ""))
        self._schedule_storage = ProjectScheduleStorage.from_local(os.path.join(base_dir, "schedules"))
        self._inst_data = inst_data
        # Not the parent's __init__: it would open Dagster's own classes on the same files too.
        super(DagsterSqliteStorage, self).__init__()  # type: ignore[no-untyped-call]

    @classmethod
    def from_config_value(  # type: ignore[override]
        cls, inst_data: ConfigurableClassData | None, config_value: Mapping[str, str]
    ) -> ProjectSqliteStorage:
        return cls.from_local(inst_data=inst_data, base_dir=config_value["base_dir"])


STORAGE_MODULE = __name__
STORAGE_CLASS = "ProjectSqliteStorage"


def storage_config(home: str) -> dict[str, object]:
    """The `storage:` section of the project's dagster.yaml for the instance in `home`."""
    config = {"base_dir": home}
    return {"custom": {"module": STORAGE_MODULE, "class": STORAGE_CLASS, "config": config}}
