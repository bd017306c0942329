"""Shared fixtures: tests always work on temporary copies of data, never the tracked files."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

# A session fixture of the files that evaluate: a warm embedding cache.
pytest_plugins = ["tests.embedding_cache"]

REPO = Path(__file__).resolve().parents[1]
TENANT = REPO / "tests" / "fixtures" / "tenant_domain"
MEMORY_TEMP = Path("/dev/shm")  # a tmpfs on Linux (RAM-backed: an fsync there costs nothing)
MEMORY_TEMP_MIN_FREE = 2 << 30  # Docker's 64 MiB /dev/shm is too small: the disk then


@contextmanager
def offline_tenant_project(project: Path) -> Iterator[pytest.MonkeyPatch]:
    """The tenant domain and the models file copied into `project`, its own Dagster home and no
    API keys, while the block runs: an offline project a real `eval-pipeline` process can run in."""
    shutil.copytree(TENANT, project / "tenant")
    shutil.copy(REPO / "models.yaml", project / "models.yaml")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DAGSTER_HOME", str(project / "dagster_home"))
        mp.delenv("ANTHROPIC_API_KEY", raising=False)
        mp.delenv("VOYAGE_API_KEY", raising=False)
        yield mp


def _temp_files_in_memory() -> None:
    """Temporary files (pytest's tmp_path, Dagster's test instances, the embedded Postgres data
    directory, and those of every process a test starts: TMPDIR is inherited) on a tmpfs where
    the machine has a roomy one. The Dagster instances' SQLite storage commits every event, and
    waiting for those fsyncs on a disk was half of a Dagster test's time under load (an
    automation test 151 s -> 72 s at load 12). The same files through the same code: only the
    waiting goes. An explicit TMPDIR is left alone."""
    if os.environ.get("TMPDIR") or not MEMORY_TEMP.is_dir() or not os.access(MEMORY_TEMP, os.W_OK):
        return
    if shutil.disk_usage(MEMORY_TEMP).free < MEMORY_TEMP_MIN_FREE:
        return
    os.environ["TMPDIR"] = str(MEMORY_TEMP)
    tempfile.tempdir = None  # pytest's capture already asked: ask again, now under TMPDIR


_temp_files_in_memory()


def _interruptible() -> None:
    """SIGINT back to Python's handler where the suite was started with it ignored (in the
    background: `make test &`, nohup). Dagster's in-process runs map SIGTERM onto SIGINT's
    handler, so an ignored SIGINT left SIGTERM ignored too, in the worker and in every process a
    test then started: `terminate()` of a test's server did nothing and the test waited forever."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


_interruptible()

# What `make test-fast` leaves out (`-m "not slow"`): whole folders and files that evaluate
# through Dagster, start a server (the API emulator, Postgres, a webserver) or real processes.
# A single slow test in an otherwise fast file carries `@pytest.mark.slow` itself.
SLOW_FOLDERS = frozenset({"defs", "deploy", "orchestration", "verdicts"})
SLOW_FILES = frozenset(
    {
        "test_backfill.py",
        "test_beir_original_ids.py",
        "test_check_before_spending.py",
        "test_ci_recipes.py",
        "test_ci_run.py",
        "test_cli_beir.py",
        "test_cli_dry_run.py",
        "test_cli_json_output.py",
        "test_cli_junit.py",
        "test_cli_progress.py",
        "test_graded_relevance.py",
        "test_html_browser.py",
        "test_cli_calibrate.py",
        "test_cli_noise_confirmation.py",
        "test_cli_rerank_batch.py",
        "test_cli_rerun.py",
        "test_cli_rerun_per_model.py",
        "test_cli_retry_errored.py",
        "test_cli_run_failures.py",
        "test_docs.py",
        "test_exit_codes.py",
        "test_newcomer_messages.py",
        "test_readme_commands.py",
        "test_noise_gate.py",
        "test_parallel_models.py",
        "test_provider_faults.py",
        "test_system_under_test.py",
        "test_calibrator.py",
        "test_call_deadline.py",
        "test_claude_rerank.py",
        "test_emulator.py",
        "test_http_target.py",
        "test_python_target.py",
        "test_rerank_prompt_cache.py",
        "test_voyage.py",
        "test_waits.py",
    }
)


def _slow_file(item: pytest.Item) -> bool:
    where = item.path.relative_to(REPO / "tests").parts
    return where[0] in SLOW_FOLDERS or where[-1] in SLOW_FILES


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _slow_file(item):
            item.add_marker(pytest.mark.slow)
    # Slow files first, each file's tests in their order (a stable sort by file): with
    # `--no-loadscope-reorder` xdist hands out files in this order, so the long files start early
    # and the many quick ones fill the workers' gaps at the end. xdist's default order (most tests
    # first) left the few-test, long files (Postgres, noise gate, automation) for last.
    items.sort(key=lambda item: not _slow_file(item))


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
