"""The instance's Postgres storage (deploy/dagster.yaml) with its connections kept open.

Dagster's Postgres storages connect per statement (NullPool): a server process, and remotely the
network and TLS handshakes, each time, about 1,600 for a two-model evaluation. These keep one
connection per storage, more only while threads share it (QueuePool, as Dagster's webserver
does). A connection idle over a minute is checked before reuse (not every one: each round trip
waits on a loaded server) and each is renewed hourly, so a restarted server or a proxy's idle
timeout costs a reconnect, not a failed statement. Same schema as Dagster's classes, which an
instance can go back to; named in dagster.yaml, so every process uses them.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Self

import psycopg2
import sqlalchemy as sa
from dagster_postgres import PostgresEventLogStorage, PostgresRunStorage, PostgresScheduleStorage
from dagster_postgres.utils import create_pg_engine, get_token_provider_from_config, pg_url_from_config

from eval_pipeline.runtime.dagster_private import ConfigurableClassData

# One connection stays open; beyond it, as many as threads ask for at once, closed when returned.
POOL_SIZE = 1
RECYCLE_S = 3600
# Below the idle timeouts of load balancers and poolers (minutes) and a DB's restart.
IDLE_CHECK_S = 60.0
_RETURNED = "eval_pipeline_returned"


def _returned(_dbapi_connection: Any, record: Any) -> None:
    record.info[_RETURNED] = time.monotonic()


def _check_if_idle(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
    """A connection back from over a minute's idleness answers a query, or the pool replaces it
    (SQLAlchemy's pattern for pessimistic disconnect handling)."""
    if time.monotonic() - record.info.get(_RETURNED, time.monotonic()) < IDLE_CHECK_S:
        return
    try:
        with dbapi_connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except psycopg2.Error as exc:
        raise sa.exc.DisconnectionError() from exc


class _Pooled:
    """Made as Dagster makes the storage (its tables created through Dagster's own engine, a
    one-off), then on a pooled engine."""

    postgres_url: str
    _engine: sa.Engine
    _token_provider: Any

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        per_statement = self._engine
        engine_kwargs: dict[str, Any] = {
            "isolation_level": "AUTOCOMMIT",
            "pool_size": POOL_SIZE,
            "max_overflow": -1,
            "pool_recycle": RECYCLE_S,
        }
        options = per_statement.url.query.get("options")
        if options:
            engine_kwargs["connect_args"] = {"options": options}
        self._engine = create_pg_engine(self.postgres_url, self._token_provider, **engine_kwargs)
        sa.event.listen(self._engine, "checkin", _returned)
        sa.event.listen(self._engine, "checkout", _check_if_idle)
        per_statement.dispose()

    @classmethod
    def from_config_value(
        cls, inst_data: ConfigurableClassData | None, config_value: Mapping[str, Any]
    ) -> Self:
        # Dagster's classes build themselves by name here, not `cls`: a subclass says it again.
        return cls(
            inst_data=inst_data,
            postgres_url=pg_url_from_config(config_value),
            should_autocreate_tables=config_value.get("should_autocreate_tables", True),
            token_provider=get_token_provider_from_config(config_value),
        )

    def dispose(self) -> None:
        self._engine.dispose()
        super().dispose()  # type: ignore[misc]


class ProjectPostgresRunStorage(_Pooled, PostgresRunStorage):
    pass


class ProjectPostgresEventLogStorage(_Pooled, PostgresEventLogStorage):
    pass


class ProjectPostgresScheduleStorage(_Pooled, PostgresScheduleStorage):
    pass
