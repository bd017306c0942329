"""Every name the package takes from Dagster's private modules (`dagster._…`), in one place.

Dagster promises nothing about these between releases: an upgrade that moves or changes one
fails here, at import, and the fix is made here. Everything else imports them from this module
(tests/test_architecture.py holds to it). Who uses what:

- the project's SQLite storage (orchestration/instance_storage.py): the storage classes it
  subclasses, their schema and migrations, and the SQLite connection settings;
- the Postgres storage (orchestration/postgres_storage.py) and the SQLite one: the
  `ConfigurableClassData` their `from_config_value` receives;
- backfills (orchestration/backfill.py, orchestration/daemon.py, orchestration/schedules.py): the
  asset backfill record and its subsets, the evaluation assets' graph, and the statuses of runs in
  progress, none of which Dagster exports;
- a backfill carried out by the command (orchestration/backfill_driver.py): the backfill daemon's
  iteration, the in-process code location it reads the graph from, and Dagster's launcher that
  executes a run in the launching process, named in an instance reference;
- parallel runs (orchestration/parallel.py): the instance reference a worker process reopens;
- the up-to-date check (orchestration/standing.py): the SQLite event log's class;
- the pool slots an asset claims (defs/pools.py, runtime/slot_wait.py);
- the data version tag a calibration records (defs/calibration.py).
"""

from dagster._core.definitions.assets.graph.asset_graph import AssetGraph
from dagster._core.definitions.assets.graph.asset_graph_subset import AssetGraphSubset
from dagster._core.definitions.assets.graph.base_asset_graph import BaseAssetGraph
from dagster._core.definitions.data_version import DATA_VERSION_TAG
from dagster._core.definitions.events import AssetKeyPartitionKey
from dagster._core.execution.backfill import BulkActionStatus, PartitionBackfill
from dagster._core.execution.plan.instance_concurrency_context import InstanceConcurrencyContext
from dagster._core.instance.ref import InstanceRef
from dagster._core.remote_origin import InProcessCodeLocationOrigin
from dagster._core.storage.dagster_run import IN_PROGRESS_RUN_STATUSES
from dagster._core.storage.event_log.schema import ConcurrencySlotsTable, SqlEventLogStorageMetadata
from dagster._core.storage.event_log.sqlite import sqlite_event_log
from dagster._core.storage.event_log.sqlite.sqlite_event_log import INDEX_SHARD_NAME, SqliteEventLogStorage
from dagster._core.storage.runs.sqlite.sqlite_run_storage import SqliteRunStorage
from dagster._core.storage.schedules.sqlite.sqlite_schedule_storage import SqliteScheduleStorage
from dagster._core.storage.sql import get_alembic_config
from dagster._core.storage.sqlite import SQLITE_BUSY_TIMEOUT_SECONDS, create_db_conn_string
from dagster._core.storage.sqlite_storage import DagsterSqliteStorage
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
from dagster._core.utils import make_new_backfill_id
from dagster._core.workspace.context import WorkspaceProcessContext
from dagster._core.workspace.load_target import InProcessWorkspaceLoadTarget
from dagster._daemon.backfill import execute_backfill_iteration_with_instigation_logger
from dagster._serdes import ConfigurableClassData
from dagster._utils.concurrency import ConcurrencySlotStatus

# Runs submitted wait in the queue; launched, each is executed to its end in the launching process.
QUEUED_RUN_COORDINATOR = ConfigurableClassData("dagster._core.run_coordinator", "QueuedRunCoordinator", "{}")
IN_PROCESS_RUN_LAUNCHER = ConfigurableClassData(
    "dagster._core.launcher.sync_in_memory_run_launcher", "SyncInMemoryRunLauncher", "{}"
)

__all__ = [
    "DATA_VERSION_TAG",
    "INDEX_SHARD_NAME",
    "IN_PROCESS_RUN_LAUNCHER",
    "IN_PROGRESS_RUN_STATUSES",
    "QUEUED_RUN_COORDINATOR",
    "SQLITE_BUSY_TIMEOUT_SECONDS",
    "AssetGraph",
    "AssetGraphSubset",
    "AssetKeyPartitionKey",
    "BaseAssetGraph",
    "BulkActionStatus",
    "ConcurrencySlotStatus",
    "ConcurrencySlotsTable",
    "ConfigurableClassData",
    "DagsterSqliteStorage",
    "InProcessCodeLocationOrigin",
    "InProcessWorkspaceLoadTarget",
    "InstanceConcurrencyContext",
    "InstanceRef",
    "LoadableTargetOrigin",
    "PartitionBackfill",
    "SqlEventLogStorageMetadata",
    "SqliteEventLogStorage",
    "SqliteRunStorage",
    "SqliteScheduleStorage",
    "WorkspaceProcessContext",
    "create_db_conn_string",
    "execute_backfill_iteration_with_instigation_logger",
    "get_alembic_config",
    "make_new_backfill_id",
    "sqlite_event_log",
]
