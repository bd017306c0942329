"""Check before spending: `run`, `backfill` and `calibrate` find a results, storage, cache or
instance folder they cannot write before they evaluate or call an API (exit 2 naming the folder,
exit 3 for a full disk), on the sample project and the tenant domain, with API models pointed at
the loopback emulator, which counts every request that reaches it.

A read-only folder, as root too: root writes into a chmod 0o500 folder, so besides that case
(skipped when the tests run as root) a folder of sysfs stands in, which the kernel refuses new
files in for every user. A full disk is a small tmpfs in a user and mount namespace of its own
(`unshare`), skipped where the system does not allow one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from eval_pipeline import cli
from eval_pipeline.core.inputs.validation import load_validated
from eval_pipeline.testing.emulator.server import EmulatorHandle, start_emulator

REPO = Path(__file__).resolve().parents[1]
API_MODEL = "voyage-haiku"
SYSFS_FOLDER = Path("/sys/kernel/eval-pipeline-results")


@pytest.fixture(scope="module")
def emulator() -> Iterator[EmulatorHandle]:
    with start_emulator() as handle:
        yield handle


@dataclass
class Project:
    data: list[str]  # the CLI's data flags
    root: Path
    emulator: EmulatorHandle
    capsys: pytest.CaptureFixture[str]
    monkeypatch: pytest.MonkeyPatch

    def api_requests(self) -> int:
        total: int = self.emulator.stats["total_requests"]
        return total

    def a_file(self, name: str) -> Path:
        path = self.root / name
        path.write_text("not a folder")
        return path

    def refused(self, code: int, named: Path, why: str) -> None:
        """Exit 2, one line naming the folder and why, and not one request to an API."""
        out, err = self.capsys.readouterr()
        assert code == 2, err
        assert err.count("\n") == 1 and str(named) in err and why in err, err
        assert "Traceback" not in out + err
        assert self.api_requests() == 0

    def one_test_id(self) -> str:
        _, banks = load_validated(Path(self.data[1]), Path(self.data[3]))
        assert banks.semantic is not None
        return banks.semantic.tests[0].test_id


@pytest.fixture(params=["sample", "tenant"])
def project(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    emulator: EmulatorHandle,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> Project:
    """A working copy of the data, its models file (the API model unthrottled) and the SDKs'
    keys and endpoints set to the emulator."""
    if request.param == "sample":
        shutil.copytree(REPO / "kb", tmp_path / "kb")
        shutil.copytree(REPO / "test_banks", tmp_path / "banks")
        data = ["--kb", "kb", "--banks-dir", "banks"]
    else:
        shutil.copytree(REPO / "tests/fixtures/tenant_domain", tmp_path / "tenant")
        data = ["--kb", "tenant/kb.yaml", "--banks-dir", "tenant/banks"]
    models = yaml.safe_load((REPO / "models.yaml").read_text())
    models["models"][API_MODEL]["rate_limit_per_min"] = 6000
    (tmp_path / "models.yaml").write_text(yaml.safe_dump(models))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0000-not-a-real-key")
    monkeypatch.setenv("VOYAGE_API_KEY", "pa-test-0000-not-a-real-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", emulator.base_url)
    monkeypatch.setenv("VOYAGE_BASE_URL", emulator.voyage_base_url)
    emulator.reset()
    return Project(data, tmp_path, emulator, capsys, monkeypatch)


def _run(project: Project, *extra: str) -> int:
    return cli.main(["run", *project.data, "--model", API_MODEL, *extra])


def test_with_writable_folders_the_api_model_does_reach_the_emulator(project: Project) -> None:
    # The control: the counter sees an API model's requests when nothing stops them.
    assert _run(project, "--test", project.one_test_id()) in (0, 1)
    assert project.api_requests() > 0
    assert not list((project.root / ".cache").glob(".write-check-*"))  # the probe file is gone


@pytest.mark.parametrize("narrowed", [False, True], ids=["full", "narrowed"])
def test_a_results_path_that_is_a_file_stops_run_before_any_api_call(
    project: Project, narrowed: bool
) -> None:
    results = project.a_file("results")
    scope = ["--test", project.one_test_id()] if narrowed else []
    project.refused(_run(project, "--results-dir", str(results), *scope), results, "a file is in the way")
    assert not (project.root / "dagster_home").exists()  # nothing of the run was started
    assert results.read_text() == "not a folder"


@pytest.mark.parametrize("flag", ["--storage-dir", "--cache-dir"])
def test_a_storage_or_cache_path_inside_a_file_stops_run(project: Project, flag: str) -> None:
    inside = project.a_file("a-file") / "inside"
    project.refused(_run(project, flag, str(inside)), inside, "a file is in the way")


def test_a_dagster_home_that_is_a_file_stops_run(project: Project) -> None:
    home = project.a_file("home-file")
    project.monkeypatch.setenv("DAGSTER_HOME", str(home))
    project.refused(_run(project), home, "DAGSTER_HOME")


def _read_only_folder(kind: str, root: Path) -> Path:
    if kind == "sysfs":
        if not SYSFS_FOLDER.parent.is_dir():
            pytest.skip("no sysfs here")
        return SYSFS_FOLDER
    folder = root / "read-only"
    folder.mkdir()
    folder.chmod(0o500)
    if os.access(folder, os.W_OK):
        pytest.skip("running as a user who may write anyway (root): the sysfs case covers it")
    return folder


@pytest.mark.parametrize("kind", ["chmod 0o500", "sysfs"])
def test_a_read_only_results_folder_stops_run_before_any_api_call(project: Project, kind: str) -> None:
    results = _read_only_folder(kind, project.root)
    project.refused(_run(project, "--results-dir", str(results)), results, "not writable")


@pytest.mark.parametrize("narrowed", [False, True], ids=["full", "narrowed"])
def test_a_junit_file_that_cannot_be_written_stops_run_before_any_api_call(
    project: Project, narrowed: bool
) -> None:
    scope = ["--test", project.one_test_id()] if narrowed else []
    # A missing folder is made, as for every output flag; a file where the folder should be is not.
    blocked = project.a_file("not-a-folder") / "junit.xml"
    project.refused(_run(project, "--junit", str(blocked), *scope), blocked.parent, "a file is in the way")
    folder = project.root / "junit.xml"
    folder.mkdir()
    project.refused(_run(project, "--junit", str(folder), *scope), folder, "a folder is in the way")
    assert not (project.root / "dagster_home").exists() and not (project.root / "results").exists()


def test_calibrate_apply_checks_its_folders_before_calling_the_calibrator(project: Project) -> None:
    calibration = project.a_file("calibration-file")
    argv = ["calibrate", "--scope", "full", "--apply", *project.data, "--calibration-dir", str(calibration)]
    project.refused(cli.main(argv), calibration, "a file is in the way")


def test_backfill_checks_the_code_locations_folders_before_it_starts(project: Project) -> None:
    results = project.a_file("results-file")
    project.monkeypatch.setenv("EVAL_PIPELINE_RESULTS_DIR", str(results))
    project.monkeypatch.setenv("EVAL_PIPELINE_KB", project.data[1])
    project.monkeypatch.setenv("EVAL_PIPELINE_BANKS_DIR", project.data[3])
    code = cli.main(["backfill", "--from", "2026-11-19", "--model", API_MODEL])
    project.refused(code, results, "a file is in the way")
    assert not (project.root / "dagster_home").exists()


def _unshare_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = ["unshare", "--user", "--map-root-user", "--mount", "true"]
    return subprocess.run(probe, capture_output=True, check=False).returncode == 0


@pytest.mark.skipif(not _unshare_works(), reason="no user and mount namespaces here")
def test_a_results_folder_on_a_full_disk_is_exit_3_before_any_api_call(project: Project) -> None:
    disk = project.root / "full-disk"
    disk.mkdir()
    # A 64 KiB tmpfs filled to the last block, mounted where only this child sees it.
    script = (
        f"mount -t tmpfs -o size=64k tmpfs {disk} && "
        f"(dd if=/dev/zero of={disk}/fill bs=4k 2>/dev/null; true) && "
        f'exec "{sys.executable}" -m eval_pipeline.cli run {" ".join(project.data)} --model {API_MODEL} '
        f"--results-dir {disk}/results"
    )
    done = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=False,
    )
    assert done.returncode == 3, done.stderr
    assert done.stderr.count("\n") == 1 and f"{disk}/results" in done.stderr, done.stderr
    assert "no space" in done.stderr
    assert project.api_requests() == 0
