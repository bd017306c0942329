"""Shared fixtures: tests always work on temporary copies of data, never the tracked files."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TENANT = REPO / "tests" / "fixtures" / "tenant_domain"


@pytest.fixture
def tenant(tmp_path: Path) -> Path:
    """A writable copy of the tenant-domain fixture (kb.yaml + banks/)."""
    dest = tmp_path / "tenant"
    shutil.copytree(TENANT, dest)
    return dest


@pytest.fixture(autouse=True)
def _loopback_no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    # SDK clients would send loopback traffic through a configured proxy otherwise.
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


@pytest.fixture
def workdir(tenant: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The tenant copy beside the repository's models file, as the working directory, with its
    own Dagster home and no API keys."""
    shutil.copy(REPO / "models.yaml", tmp_path / "models.yaml")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("VOYAGE_API_KEY", raising=False)
    return tmp_path
