"""The team's own system under test, over HTTP and as a Python entry point, through the real
command line (the full Dagster path, and the ad-hoc path of a narrowed run): its state handlers,
crisis detection and always-loaded entities are scored exactly like the built-in ones, and every
bank says which implementation produced it."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path

import pytest
import yaml

from eval_pipeline.cli import main
from eval_pipeline.core.inputs.banks import Mechanism
from eval_pipeline.core.scoring.results import AnyResult, ResultStatus
from eval_pipeline.core.scoring.run_document import RunDocument, read_document
from tests.conftest import REPO
from tests.embedding_cache import warm
from tests.system_under_test import ReferenceSystem, serve

DATE = "2026-11-20"


def _models(path: Path, system: Mapping[str, object], *, semantic_reference: bool) -> None:
    model: dict[str, object] = {
        "system": system,
        "concurrency": 4,
        "retry": {"max_attempts": 2, "backoff_s": 0},
    }
    if semantic_reference:
        model |= {"embedder": {"kind": "local"}, "reranker": {"kind": "cosine"}}
    path.write_text(yaml.safe_dump({"schema_version": 1, "models": {"team": model}}))


def _run(workdir: Path, kb: Path, banks: Path, *extra: str) -> int:
    return main(
        [
            "run",
            *("--model", "team", "--date", DATE, "--kb", str(kb), "--banks-dir", str(banks)),
            *("--models-file", str(workdir / "models.yaml"), "--results-dir", str(workdir / "results")),
            *("--storage-dir", str(workdir / "storage"), "--cache-dir", str(workdir / ".cache")),
            *extra,
        ]
    )


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    return tmp_path


def _double_from_env(monkeypatch: pytest.MonkeyPatch, tenant: Path, **faults: str) -> tuple[Path, Path]:
    """Configure `EnvSystem` (the double as an entry point) for the tenant copy; its KB and banks."""
    kb, banks = tenant / "kb.yaml", tenant / "banks"
    for name, value in {"KB": str(kb), "BANKS": str(banks), **faults}.items():
        monkeypatch.setenv(f"SUT_{name}", value)
    return kb, banks


def _failures(results: list[AnyResult]) -> dict[str, int | None]:
    return {r.test_id: r.score for r in results if r.score != 100}


def _assert_exactly_two_faults(doc: RunDocument, state_test: str, crisis_test: str) -> None:
    """Every state, pattern and always test is perfect but the two faults the system made."""
    (wrong,) = [r for r in doc.state if r.score != 100]
    assert (wrong.test_id, wrong.score, wrong.missing_handlers) == (state_test, 80, [])
    assert len(wrong.wrong_handlers) == 1
    assert _failures(list(doc.pattern)) == {crisis_test: 0}
    assert _failures(list(doc.always)) == {}
    assert [c.test_id for c in doc.aggregate.critical_failures] == [crisis_test]
    assert doc.aggregate.critical_failures[0].reason.startswith("crisis not detected: missing ")
    assert doc.aggregate.health.value == "CRITICAL" and doc.aggregate.errored_count == 0


def test_http_system_on_the_tenant_domain_all_four_mechanisms(
    workdir: Path, tenant: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kb, banks = tenant / "kb.yaml", tenant / "banks"
    system = ReferenceSystem(
        kb, banks, wrong_handler_test="T-STATE-001", missed_crisis_test="T-PAT-CRISIS-001"
    )
    with serve(system) as url:
        _models(workdir / "models.yaml", {"kind": "http", "url": url}, semantic_reference=False)
        assert _run(workdir, kb, banks) == 1
    out = capsys.readouterr().out
    assert "CRITICAL T-PAT-CRISIS-001: crisis not detected: missing handler_crisis" in out
    assert "implementations: semantic http, state http, pattern http, always http" in out
    run_dir = workdir / "results/team" / DATE
    doc = read_document(run_dir / "results.json")
    _assert_exactly_two_faults(doc, "T-STATE-001", "T-PAT-CRISIS-001")
    assert doc.state[0].wrong_handlers == ["handler_returning_user"]
    assert _failures(list(doc.semantic)) == {}  # the double answers semantic tests perfectly
    assert doc.aggregate.implementations == dict.fromkeys(Mechanism, "http")
    report = (run_dir / "report.md").read_text()
    assert "| state | 93.3 | 3 | 3 | 0 | 0 | 0.15 | http |" in report
    assert "- **T-PAT-CRISIS-001**: crisis not detected: missing handler_crisis" in report
    assert "**Health: CRITICAL**" in report


def test_python_entry_point_beside_the_reference_semantic_pipeline(
    workdir: Path,
    tenant: Path,
    local_embeddings: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    warm(workdir / ".cache", local_embeddings)  # the reference's vectors, as after a first run
    kb, banks = _double_from_env(
        monkeypatch, tenant, WRONG_HANDLER_TEST="T-STATE-002", MISSED_CRISIS_TEST="T-PAT-CRISIS-001"
    )
    system = {
        "kind": "python",
        "entrypoint": "tests.system_under_test:EnvSystem",
        "mechanisms": ["state", "pattern", "always"],
    }
    _models(workdir / "models.yaml", system, semantic_reference=True)
    assert _run(workdir, kb, banks) == 1
    out = capsys.readouterr().out
    assert "implementations: semantic reference, state python, pattern python, always python" in out
    doc = read_document(workdir / "results/team" / DATE / "results.json")
    _assert_exactly_two_faults(doc, "T-STATE-002", "T-PAT-CRISIS-001")
    assert doc.semantic and all(r.status is ResultStatus.SCORED for r in doc.semantic)
    assert doc.aggregate.implementations[Mechanism.SEMANTIC] == "reference"


def test_http_system_on_the_sample_domain_beside_the_reference(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kb, banks = workdir / "kb", workdir / "test_banks"
    shutil.copytree(REPO / "kb", kb)
    shutil.copytree(REPO / "test_banks", banks)
    system = ReferenceSystem(kb, banks, wrong_handler_test="STATE-002", missed_crisis_test="PAT-CRISIS-003")
    with serve(system) as url:
        team = {"kind": "http", "url": url}
        _models(workdir / "models.yaml", team, semantic_reference=False)
        # A second model, in the same run, leaves state, pattern and always to the reference.
        models = yaml.safe_load((workdir / "models.yaml").read_text())
        models["models"]["reference"] = {"system": {**team, "mechanisms": ["semantic"]}}
        (workdir / "models.yaml").write_text(yaml.safe_dump(models))
        assert _run(workdir, kb, banks, "--model", "reference") == 1
    doc = read_document(workdir / "results/team" / DATE / "results.json")
    ref = read_document(workdir / "results/reference" / DATE / "results.json")
    assert ref.aggregate.implementations == {
        Mechanism.SEMANTIC: "http",
        Mechanism.STATE: "reference",
        Mechanism.PATTERN: "reference",
        Mechanism.ALWAYS: "reference",
    }
    # Exactly the two faults differ from the reference (whose own critical failures remain).
    scores = {r.test_id: r.score for r in [*ref.state, *ref.pattern, *ref.always]}
    changed = {r.test_id for r in [*doc.state, *doc.pattern, *doc.always] if r.score != scores[r.test_id]}
    assert changed == {"STATE-002", "PAT-CRISIS-003"}
    assert scores["STATE-002"] == 100 and scores["PAT-CRISIS-003"] == 100
    critical = {c.test_id for c in doc.aggregate.critical_failures}
    assert critical == {c.test_id for c in ref.aggregate.critical_failures} | {"PAT-CRISIS-003"}
    assert doc.aggregate.health.value == "CRITICAL"
    assert "CRITICAL PAT-CRISIS-003: crisis not detected" in capsys.readouterr().out


def test_a_malformed_answer_errors_that_test_with_its_reason(
    workdir: Path, tenant: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    kb, banks = _double_from_env(monkeypatch, tenant, MALFORMED_TEST="T-STATE-003")
    # One async callable for one mechanism; a narrowed run takes the ad-hoc path (no Dagster).
    system = {
        "kind": "python",
        "entrypoint": {"state": "tests.system_under_test:async_state"},
        "mechanisms": ["state"],
    }
    _models(workdir / "models.yaml", system, semantic_reference=True)
    assert _run(workdir, kb, banks, "--banks", "state") == 1
    out = capsys.readouterr().out
    assert "gate failed: 1 errored test(s)" in out
    doc = read_document(workdir / "results/_scoped/banks-state/team" / DATE / "results.json")
    errored = [r for r in doc.state if r.status is ResultStatus.ERRORED]
    assert [(r.test_id, r.score, r.error) for r in errored] == [
        (
            "T-STATE-003",
            None,
            "target: target response breaks the contract: triggered_handlers: Input should be a valid list",
        )
    ]
    assert _failures([r for r in doc.state if r.status is ResultStatus.SCORED]) == {}
    assert doc.aggregate.implementations == {Mechanism.STATE: "python"}


def test_an_entry_point_that_cannot_be_imported_is_bad_input(
    workdir: Path, tenant: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    system = {"kind": "python", "entrypoint": "no_such_team_module:answer", "mechanisms": ["state"]}
    _models(workdir / "models.yaml", system, semantic_reference=True)
    assert _run(workdir, tenant / "kb.yaml", tenant / "banks") == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        f"error: {workdir / 'models.yaml'}: model 'team': field 'system.entrypoint': cannot import "
        "'no_such_team_module:answer': ModuleNotFoundError: No module named 'no_such_team_module'"
    ]
    assert not (workdir / "results").exists()


def test_the_example_entry_point_runs_on_the_tenant_domain(
    workdir: Path, tenant: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TINY_KB", str(tenant / "kb.yaml"))
    monkeypatch.setenv("TINY_RULES", str(tenant / "banks/pattern/pattern_rules.json"))
    system = {"kind": "python", "entrypoint": "examples.python_target:TinyRetriever"}
    _models(workdir / "models.yaml", system, semantic_reference=False)
    assert _run(workdir, tenant / "kb.yaml", tenant / "banks", "--banks", "state,pattern,always") == 0
    doc = read_document(workdir / "results/_scoped/banks-state+pattern+always/team" / DATE / "results.json")
    assert _failures([*doc.state, *doc.pattern, *doc.always]) == {}
    assert len(doc.state) + len(doc.pattern) + len(doc.always) == 9
    assert "implementations: state python, pattern python, always python" in capsys.readouterr().out
