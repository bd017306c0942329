"""Every name the package takes from Dagster's private modules (`dagster._…`), in one place.

Dagster promises nothing about these between releases: an upgrade that moves or changes one
fails here, at import, and is fixed here; everything else imports them from this module
(tests/test_architecture.py holds to it). They serve the project's storages (the classes they
subclass, schema, migrations), backfills (the backfill record, subsets and graph, the daemon's
iteration, an in-process launcher), parallel workers (the instance reference), pool slots, a
failed step's error and the data version tag a calibration records: none of which Dagster exports.
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
from dagster_shared.error import SerializableErrorInfo

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
    "SerializableErrorInfo",
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
