"""The command line: exit codes (0 ok, 1 gate, 2 bad input), outputs, scoping, and another domain."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from eval_pipeline.cli import main
from eval_pipeline.core.inputs.banks import Mechanism
from eval_pipeline.core.scoring.evaluation import Scope
from eval_pipeline.core.scoring.run_document import GATE_FILE, read_document
from eval_pipeline.core.verdicts.run_gate import GateStatus, read_gate
from tests.conftest import offline_tenant_project
from tests.quiet_instance import quiet_home
from tests.test_cli_progress import BAR

DATE = "2026-11-20"


def _run(*extra: str) -> int:
    args = ["run", "--kb", "tenant/kb.yaml", "--banks-dir", "tenant/banks", "--date", DATE, *extra]
    return main(args)


@pytest.mark.slow
def test_run_on_another_domain_then_show(
    offline: OfflineEvaluation, evaluated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The tenant domain: its own categories, user types and bank file names, both local models.
    out = offline.out
    assert "local-minilm @ 2026-11-20:" in out and "results/local-minilm/2026-11-20/report.md" in out
    assert "local-hybrid @ 2026-11-20:" in out
    assert "  html: results/local-hybrid/2026-11-20/report.html" in out
    hybrid = read_document(evaluated / "results/local-hybrid/2026-11-20/results.json")
    assert hybrid.aggregate.errored_count == 0 and hybrid.aggregate.health.value != "UNKNOWN"
    assert {r.category for r in hybrid.semantic} <= {"brief", "daily", "pressing", "combined"}
    doc = read_document(evaluated / "results/local-minilm/2026-11-20/results.json")
    assert doc.provenance.kb_version == "tenant-fixture-1"
    assert main(["show", "--model", "local-minilm"]) == 0
    assert "local-minilm @ 2026-11-20" in capsys.readouterr().out
    assert main(["show", "--model", "local-minilm", "--test", "T-RENT-001"]) == 0
    shown = capsys.readouterr().out
    assert [(e["model"], e["result"]["test_id"]) for e in json.loads(shown)] == [
        ("local-minilm", "T-RENT-001")
    ]
    # A gate the run cannot meet exits 1 but still writes the report.
    assert _run("--model", "local-minilm", "--fail-under", "100") == 1
    assert "gate failed: combined score" in capsys.readouterr().out


@pytest.mark.slow
def test_narrowed_runs_never_replace_the_canonical_evaluation(
    evaluated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    canonical = evaluated / "results/local-minilm/2026-11-20"
    before = {name: (canonical / name).read_bytes() for name in ("results.json", "report.md", "gate.json")}

    assert _run("--model", "local-minilm", "--banks", "state,always") == 0
    assert _run("--model", "local-minilm", "--test", "T-RENT-001") == 0
    out = capsys.readouterr().out
    assert "narrowed run (banks-state+always)" in out and "narrowed run (tests-T-RENT-001)" not in out
    assert "narrowed run (banks-semantic+state+pattern+always__tests-T-RENT-001)" in out

    assert {name: (canonical / name).read_bytes() for name in before} == before
    scoped = read_document(
        evaluated / "results/_scoped/banks-state+always/local-minilm/2026-11-20/results.json"
    )
    assert set(scoped.aggregate.banks) == {"state", "always"}
    assert scoped.semantic == [] and len(scoped.state) == 3
    assert scoped.provenance.scope["banks"] == ["always", "state"]
    # The ad-hoc path (no Dagster) scores a test exactly as the graph did.
    full = read_document(canonical / "results.json")
    assert [(r.test_id, r.score) for r in scoped.state] == [(r.test_id, r.score) for r in full.state]
    one_test = "results/_scoped/banks-semantic+state+pattern+always__tests-T-RENT-001/local-minilm/2026-11-20"
    (narrow,) = read_document(evaluated / one_test / "results.json").semantic
    same = next(r for r in full.semantic if r.test_id == "T-RENT-001")
    assert (narrow.score, narrow.selections, narrow.candidates) == (
        same.score,
        same.selections,
        same.candidates,
    )
    # `show` and diff baselines only ever see canonical runs.
    assert main(["show"]) == 0
    assert "semantic" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--topic", "nosuch"], "--topic: unknown topic 'nosuch'"),
        (["--banks", "state", "--test", "T-RENT-001"], "matches no test"),
    ],
)
def test_a_selection_that_runs_nothing_is_bad_input(
    workdir: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert _run("--model", "local-minilm", *args) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (workdir / "results").exists()


@pytest.mark.slow
def test_critical_failure_exits_1(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rules = workdir / "tenant/banks/pattern/pattern_rules.json"
    data = json.loads(rules.read_text())
    data["crisis_patterns"] = []
    rules.write_text(json.dumps(data))
    assert _run("--model", "local-minilm", "--banks", "pattern") == 1
    out = capsys.readouterr().out
    assert "CRITICAL T-PAT-CRISIS-001" in out and "gate failed: 1 critical failure(s)" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model", "nope"], "--model: unknown model(s) nope"),
        (["--date", "2026-13-01"], "--date: '2026-13-01' is not YYYY-MM-DD"),
        (["--date", "2020-01-01"], "--date: must be between"),
        (["--banks", "semantic,vibes"], "--banks: expected 'all'"),
        (["--test", "NOPE-1"], "--test: unknown test id(s) NOPE-1"),
        (["--model", "voyage-haiku"], "ANTHROPIC_API_KEY"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    workdir: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert _run(*args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and "Traceback" not in err[0]
    assert not (workdir / "results").exists()


def test_models_lists_every_model_and_missing_keys(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert "local-minilm" in out and "voyage-haiku" in out and "needs ANTHROPIC_API_KEY" in out


def test_show_without_results_is_a_clear_error(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show"]) == 2
    assert "no results found" in capsys.readouterr().err


@pytest.mark.slow
def test_a_corrupt_earlier_results_file_is_passed_over_with_a_warning(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    quiet_home(workdir / "dagster_home")
    assert _run("--model", "local-minilm", "--date", "2026-11-19") == 0
    # The baseline is found through the results location's index of evaluations.
    stored = workdir / "results/local-minilm/2026-11-19/results.json"
    stored.write_text('{"provenance": {"schema_version": "1.1"}, "aggregate": 7}')
    capsys.readouterr()
    assert _run("--model", "local-minilm") == 0  # today's evaluation still completes
    err = capsys.readouterr().err
    assert "warning: passed over as a baseline: 2026-11-19: unreadable (" in err and "Traceback" not in err
    diff = json.loads((workdir / f"results/local-minilm/{DATE}/regression_diff.json").read_text())
    assert diff["baseline_date"] is None and diff["passed_over"][0].startswith("2026-11-19: unreadable (")
    assert "results/local-minilm/2026-11-19/results.json" in diff["passed_over"][0]


def test_a_narrowed_run_writes_its_gate_and_the_report_reads_the_stored_one(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from eval_pipeline.cli import build_parser
    from eval_pipeline.cli.run import evaluation_request
    from eval_pipeline.cli.run_verdict import report_runs
    from eval_pipeline.orchestration.evaluation_route import Outcome

    narrowed = ("--model", "local-minilm", "--banks", "semantic,state")
    assert _run(*narrowed, "--fail-under", "99.5") == 1
    scope = Scope(banks=frozenset({Mechanism.SEMANTIC, Mechanism.STATE}))
    scoped = workdir / "results/_scoped" / scope.label
    run_dir = scoped / "local-minilm" / DATE
    gate = read_gate(run_dir / GATE_FILE)
    assert gate.status is GateStatus.FAILED and gate.scope == scope.label and gate.fail_under == 99.5
    assert f"gate failed: {'; '.join(gate.reasons)}" in capsys.readouterr().out
    # The verdict printed and the exit code come from the stored decision, not a second derivation.
    planted = gate.model_copy(update={"status": GateStatus.PASSED, "passed": True, "reasons": []})
    (run_dir / GATE_FILE).write_text(planted.model_dump_json())
    args = build_parser().parse_args(
        ["run", "--kb", "tenant/kb.yaml", "--banks-dir", "tenant/banks", "--date", DATE, *narrowed]
    )
    request = evaluation_request(args, [])
    assert report_runs(request, Outcome(scoped)) == 0
    assert "gate failed" not in capsys.readouterr().out
    (run_dir / GATE_FILE).unlink()
    assert report_runs(request, Outcome(scoped)) == 3
    assert "no gate decision was written" in capsys.readouterr().err


def _heavy_imports_of_a_run(cwd: Path, *args: str) -> tuple[set[str], str, str]:
    """Which of Dagster and the provider SDKs a fresh interpreter imported for one `run`, with
    its output piped: (modules, stdout, stderr)."""
    argv = ["run", "--kb", "tenant/kb.yaml", "--banks-dir", "tenant/banks", "--date", "2026-11-20", *args]
    code = (
        f"import json, sys; from eval_pipeline.cli import main; rc = main({argv!r}); "
        "print(json.dumps(sorted({'anthropic', 'voyageai', 'dagster'} & set(sys.modules)))); sys.exit(rc)"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    *printed, imported = done.stdout.strip().splitlines()
    return set(json.loads(imported)), "\n".join(printed) + "\n", done.stderr


@dataclass(frozen=True)
class OfflineEvaluation:
    project: Path  # the tenant copy beside the models file, evaluated on DATE with both local models
    imported: set[str]
    out: str
    err: str


@pytest.fixture(scope="module")
def offline(tmp_path_factory: pytest.TempPathFactory) -> OfflineEvaluation:
    """Both local models through the whole Dagster graph in a real process, output piped: made
    once for the tests that look at the run, its output or what it stored."""
    project = tmp_path_factory.mktemp("cli") / "project"
    with offline_tenant_project(project):
        ran = _heavy_imports_of_a_run(project, "--model", "local-minilm", "--model", "local-hybrid")
    return OfflineEvaluation(project, *ran)


@pytest.fixture
def evaluated(offline: OfflineEvaluation, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A writable copy of that evaluated project, as the working directory, with its own Dagster
    home (capturing no step output: tests/quiet_instance.py) and no API keys."""
    project = tmp_path / "project"
    shutil.copytree(offline.project, project, symlinks=True)
    monkeypatch.chdir(project)
    monkeypatch.setenv("DAGSTER_HOME", str(quiet_home(project / "dagster_home")))
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("VOYAGE_API_KEY", raising=False)
    return project


@pytest.mark.slow
def test_an_offline_evaluation_never_imports_the_provider_sdks(offline: OfflineEvaluation) -> None:
    # Through the whole Dagster graph, both local models: the Anthropic and Voyage SDKs are a
    # second and a half of imports that only API models and calibration use.
    assert offline.imported == {"dagster"}


@pytest.mark.slow
def test_a_piped_full_run_prints_plain_lines(offline: OfflineEvaluation) -> None:
    # No progress bar, cursor movement or colour when the output is not a terminal
    # (the bar on a terminal: tests/test_cli_progress.py).
    assert BAR not in offline.out + offline.err and "\x1b[" not in offline.out + offline.err
    for model in ("local-minilm", "local-hybrid"):
        assert f"  running model {model} " in offline.out and f"  finished model {model}" in offline.out
