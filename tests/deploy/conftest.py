from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack

import pytest

from eval_pipeline.testing.postgres import PostgresUnavailable, postgres_server


@pytest.fixture(scope="module")
def postgres() -> Iterator[str]:
    """A Postgres server for the module's tests (each test file gets its own: xdist runs files
    on different workers); skipped, saying why, only where the embedded server cannot run."""
    with ExitStack() as stack:
        try:
            admin_url = stack.enter_context(postgres_server())
        except PostgresUnavailable as exc:
            pytest.skip(str(exc))
        yield admin_url
