"""The code version every result records, and a stored evaluation's standing rests on."""

from __future__ import annotations

from pathlib import Path

from eval_pipeline.core.code_version import code_version, dependency_versions, version_of


def test_the_code_version_changes_with_one_source_line_or_one_dependency(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "sub" / "mod.py").write_text("X = 1\n")
    (package / "data.json").write_text("{}")
    deps = ["dagster==1.13.27", "numpy==2.4.6"]
    before = version_of(package, deps)
    (package / "data.json").write_text('{"not": "source"}')
    assert version_of(package, deps) == before
    assert version_of(package, ["dagster==1.13.28", "numpy==2.4.6"]) != before
    (package / "sub" / "mod.py").write_text("X = 2\n")
    assert version_of(package, deps) != before
    (package / "sub" / "mod.py").write_text("X = 1\n")
    (package / "sub" / "mod.py").rename(package / "mod.py")  # the same code elsewhere is other code
    assert version_of(package, deps) != before


def test_the_installed_code_version_names_the_runtime_dependencies_only() -> None:
    names = {line.split("==")[0] for line in dependency_versions()}
    assert {"dagster", "onnxruntime", "anthropic", "voyageai", "pydantic"} <= names
    assert not names & {"pytest", "ruff", "mypy"}  # dev tools change no result
    assert len(code_version()) == 64
