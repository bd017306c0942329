"""A project instance with its storage created (dagster.yaml and the SQLite schemas), made once
per test session: tests that evaluate into a new instance copy it, as a second run of a project
finds it, instead of creating the same tables again for every test (most of a small evaluation's
CPU when it is the first in its instance)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

# A pytest plugin of every session (tests/conftest.py): Dagster is imported only when a test asks
# for the instance, so collecting the quick tests does not import it.


@pytest.fixture(scope="session")
def created_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from eval_pipeline.orchestration.execution import project_instance

    home = tmp_path_factory.mktemp("dagster_home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DAGSTER_HOME", str(home))  # project_instance sets it: restored on leaving
        with project_instance(home):
            pass
    return home


def new_home(where: Path, created: Path) -> Path:
    """`where` as an instance home with nothing run in it yet."""
    shutil.copytree(created, where)
    return where
