"""`init DIR`: a new project that validates and evaluates as it stands, in its own locations."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval_pipeline.cli import main


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
