"""The gates a project keeps (`gates:` in its models file): `init` and `import-beir` write them
so that a POOR evaluation fails with no flag; `run`, `diff` and the Dagster release gate read
them; a flag overrides its gate."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from eval_pipeline.cli import main
from eval_pipeline.core.verdicts.project_gates import NEW_PROJECT_GATES, ProjectGates
from eval_pipeline.defs.resources import RunScopeResource
from eval_pipeline.providers.models import ConfigError, load_gates, load_models
from tests.conftest import REPO, TENANT

DATE = "2026-11-20"


def _poor(project: Path) -> None:
    """The init example made POOR without a critical failure: a false positive in semantic (80),
    a state handler that no longer fires (0) and a non-critical pattern test that misses (0)."""
    banks = project / "test_banks"
    for rel, edit in {
        "semantic/parent_test_bank.json": {"not_expected": ["contact_support"]},
        "state/state_handler_tests.json": {"user_state": {"is_first_conversation": False}},
        "pattern/pattern_tests.json": {"prompt": "hello there", "is_critical": False},
    }.items():
        bank = json.loads((banks / rel).read_text())
        bank["tests"][0].update(edit)
        (banks / rel).write_text(json.dumps(bank, indent=2))


def test_a_poor_project_made_by_init_fails_with_no_flag_and_a_flag_overrides(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "helpdesk"
    assert main(["init", str(project)]) == 0
    assert load_gates(project / "models.yaml") == NEW_PROJECT_GATES
    _poor(project)
    monkeypatch.chdir(project)
    monkeypatch.setenv("DAGSTER_HOME", str(project / ".dagster_home"))
    capsys.readouterr()
    assert main(["run", "--model", "local-minilm", "--date", DATE]) == 1
    out = capsys.readouterr().out
    assert "POOR" in out and "is under 70" in out
    gate = json.loads((project / "results" / "local-minilm" / DATE / "gate.json").read_text())
    assert (gate["passed"], gate["fail_under"]) == (False, 70.0)  # the Dagster gate read it too
    assert main(["run", "--model", "local-minilm", "--date", DATE, "--fail-under", "0"]) == 0
    assert "is under" not in capsys.readouterr().out


def test_import_beir_writes_the_same_gates(tmp_path: Path) -> None:
    from tests.beir_fixture import tenant_as_beir

    src = tenant_as_beir(TENANT, tmp_path / "src")
    assert (
        main(["import-beir", str(src), "--kb", str(tmp_path / "kb"), "--banks-dir", str(tmp_path / "b")]) == 0
    )
    assert load_gates(tmp_path / "models.yaml") == NEW_PROJECT_GATES
    assert set(load_models(tmp_path / "models.yaml")) == {"local-minilm", "local-hybrid"}


def _tenant_project(root: Path, gates: dict[str, object] | None) -> Path:
    shutil.copytree(TENANT, root / "tenant")
    models = yaml.safe_load((REPO / "models.yaml").read_text())
    if gates is not None:
        models["gates"] = gates
    (root / "models.yaml").write_text(yaml.safe_dump(models))
    return root / "models.yaml"


def test_a_bad_gate_is_one_line_naming_file_and_field(tmp_path: Path) -> None:
    path = _tenant_project(tmp_path, {"fail_under": 170})
    with pytest.raises(
        ConfigError, match=r"models\.yaml: gates: field 'fail_under': .*less than or equal to 100"
    ):
        load_gates(path)
    path.write_text(path.read_text().replace("fail_under: 170", "fail_undr: 70"))
    with pytest.raises(ConfigError, match=r"gates: field 'fail_undr': Extra inputs are not permitted"):
        load_gates(path)
    assert load_gates(tmp_path / "absent.yaml") == ProjectGates()


def test_flags_override_the_kept_gates_and_the_release_gate_reads_them(tmp_path: Path) -> None:
    path = _tenant_project(tmp_path, {"fail_under": 99, "max_errored": 2, "max_baseline_age_days": 7})
    kept = load_gates(path)
    assert (kept.fail_under, kept.max_errored, kept.fail_on_regression, kept.max_baseline_age_days) == (
        99,
        2,
        False,
        7,
    )
    assert kept.overridden(fail_under=0, fail_on_regression=True) == kept.model_copy(
        update={"fail_under": 0, "fail_on_regression": True}
    )
    # A run from the UI: no setting of its own, so the project's.
    assert RunScopeResource().gates(str(path)).model_dump() == {"fail_under": 99, "max_errored": 2}
    assert RunScopeResource(fail_under=10).gates(str(path)).model_dump() == {
        "fail_under": 10,
        "max_errored": 2,
    }


def test_the_second_domain_fails_its_kept_floor_and_diff_keeps_allow_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _tenant_project(tmp_path, {"fail_under": 99.5, "allow_removed": True})
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    for name in ("ANTHROPIC_API_KEY", "VOYAGE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    data = ["--kb", "tenant/kb.yaml", "--banks-dir", "tenant/banks", "--model", "local-minilm"]
    assert main(["run", *data, "--date", "2026-11-19"]) == 1
    assert "is under 99.5" in capsys.readouterr().out
    # The next day runs one bank fewer: removed tests, accepted because the project allows it.
    shutil.rmtree(tmp_path / "tenant" / "banks" / "always")
    assert main(["run", *data, "--date", DATE, "--fail-under", "0"]) == 0
    capsys.readouterr()
    assert main(["diff", "local-minilm@2026-11-19", f"local-minilm@{DATE}"]) == 0
    assert main(["diff", "local-minilm@2026-11-19", f"local-minilm@{DATE}", "--no-allow-removed"]) == 1
