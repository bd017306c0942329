"""`init DIR`: a new project that validates and evaluates as it stands, in its own locations."""

from __future__ import annotations

import json
import shutil
import stat
import tomllib
from pathlib import Path

import pytest

import eval_pipeline
from eval_pipeline.cli import init, main


def test_init_scaffolds_a_project_that_runs_in_its_own_locations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["init", str(tmp_path / "helpdesk")]) == 0
    monkeypatch.chdir(tmp_path / "helpdesk")
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "helpdesk" / ".dagster_home"))
    assert main(["validate"]) == 0
    assert "semantic 1, state 1, pattern 1, always 1" in capsys.readouterr().out
    assert main(["run", "--model", "local-minilm", "--date", "2026-11-20"]) == 0
    assert "EXCELLENT" in capsys.readouterr().out
    assert json.loads(Path("results/_project.json").read_text())["name"] == "helpdesk"
    assert Path("storage/_project.json").is_file()


def test_init_refuses_a_folder_in_use(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "notes.txt").write_text("mine")
    assert main(["init", str(tmp_path / "used")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "exists and is not an empty folder" in err[0]
    assert sorted(p.name for p in (tmp_path / "used").iterdir()) == ["notes.txt"]


def test_the_example_project_ships_in_the_package_and_is_the_users_to_edit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every file of the example is package data (an installed wheel holds it), and the files a
    project gets are writable even when the installed copies are read-only."""
    package = Path(eval_pipeline.__file__).parent
    pyproject = tomllib.loads((package.parent / "pyproject.toml").read_text())
    patterns = pyproject["tool"]["setuptools"]["package-data"]["eval_pipeline"]
    shipped = {p for pattern in patterns for p in package.glob(pattern) if p.is_file()}
    example = {p for p in init.EXAMPLE.rglob("*") if p.is_file()}
    assert example and example <= shipped
    installed = tmp_path / "site" / "new_project"
    shutil.copytree(init.EXAMPLE, installed)
    for path in sorted(installed.rglob("*"), reverse=True):  # a folder after what it holds
        path.chmod(0o444 if path.is_file() else 0o555)
    installed.chmod(0o555)
    monkeypatch.setattr(init, "EXAMPLE", installed)
    assert main(["init", str(tmp_path / "mine")]) == 0
    made = [p for p in (tmp_path / "mine").rglob("*") if p.is_file()]
    assert len(made) == len(example) + 1  # and the manifest naming the project
    assert all(p.stat().st_mode & stat.S_IWUSR for p in made)
    assert all(p.stat().st_mode & stat.S_IWUSR for p in (tmp_path / "mine").rglob("*") if p.is_dir())
