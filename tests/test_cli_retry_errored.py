"""`run --retry-errored` after a seeded partial outage: only the errored tests are called again,
the day's evaluation ends with none errored (results, gate, regression diff and the Dagster
report all agree), and the earlier evaluation and the expectation history are untouched.
Semantic trials through the real SDKs against the loopback emulator (tenant domain), and every
mechanism answered by the team's HTTP system (tests/system_under_test.py; sample and tenant)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

import dagster as dg
import pytest
import yaml

from eval_pipeline import cli
from eval_pipeline.cli.exit_status import exit_for_gate
from eval_pipeline.core.diff.baseline import RegressionDiff
from eval_pipeline.core.inputs.banks import Mechanism
from eval_pipeline.core.scoring.reevaluate import errored_tests
from eval_pipeline.core.scoring.reevaluation import Why
from eval_pipeline.core.scoring.results import ResultBase, ResultStatus
from eval_pipeline.core.scoring.run_document import (
    GATE_FILE,
    REEVALUATIONS_FILE,
    REGRESSION_DIFF_FILE,
    RESULTS_FILE,
    RunDocument,
    read_document,
)
from eval_pipeline.core.verdicts.run_gate import GateDecision
from eval_pipeline.testing.emulator.server import start_emulator
from tests.conftest import REPO, TENANT
from tests.embedding_cache import warm
from tests.providers.conftest import FAKE_ANTHROPIC_KEY, FAKE_VOYAGE_KEY, VOYAGE_HAIKU
from tests.quiet_instance import quiet_home
from tests.system_under_test import MECHANISMS, Outage, ReferenceSystem, serve

BEFORE, DAY = "2026-11-18", "2026-11-19"
DATA = ["--kb", "tenant/kb.yaml", "--banks-dir", "tenant/banks"]
MODEL = "tenant-haiku"
MESSAGES = "POST /v1/messages"


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    shutil.copytree(TENANT, tmp_path / "tenant")
    # An outage errors the test at once: one attempt per call.
    models = {"schema_version": 1, "models": {MODEL: {**VOYAGE_HAIKU, "retry": {"max_attempts": 1}}}}
    (tmp_path / "models.yaml").write_text(yaml.safe_dump(models))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(quiet_home(tmp_path / "dagster_home")))
    monkeypatch.setenv("ANTHROPIC_API_KEY", FAKE_ANTHROPIC_KEY)
    monkeypatch.setenv("VOYAGE_API_KEY", FAKE_VOYAGE_KEY)
    yield tmp_path


def _run(monkeypatch: pytest.MonkeyPatch, argv: list[str], **emulator: object) -> dict[str, int]:
    """One command against a fresh emulator; the requests it received, by route, and its exit
    code under "exit"."""
    with start_emulator(**emulator) as emu:  # type: ignore[arg-type]
        monkeypatch.setenv("ANTHROPIC_BASE_URL", emu.base_url)
        monkeypatch.setenv("VOYAGE_BASE_URL", emu.voyage_base_url)
        code = cli.main(["run", *DATA, "--model", MODEL, *argv])
        return {**emu.stats["requests"], "exit": code}


def _doc(date: str) -> RunDocument:
    return read_document(Path("results") / MODEL / date / RESULTS_FILE)


def test_retry_errored_calls_only_the_errored_tests_and_merges_them(
    work: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _run(monkeypatch, ["--date", BEFORE])
    earlier = (work / "results" / MODEL / BEFORE / RESULTS_FILE).read_bytes()
    history = sorted((p.name, p.read_bytes()) for p in (work / "tenant/banks/semantic/history").iterdir())
    outage = {"fault_rate": 0.5, "faults": ("500",), "fault_routes": ("/v1/messages",), "seed": 3}
    # The day's calls are made afresh (a cached answer would hide the outage), and so are the retries.
    _run(monkeypatch, ["--date", DAY, "--cache", "refresh"], **outage)
    hurt = _doc(DAY)
    errored = errored_tests(hurt)
    assert errored and len(errored) < len(hurt.semantic)  # a partial outage
    assert not GateDecision.model_validate_json(
        (work / "results" / MODEL / DAY / GATE_FILE).read_text()
    ).passed
    capsys.readouterr()

    requests = _run(monkeypatch, ["--date", DAY, "--retry-errored", "--cache", "refresh"])
    out = capsys.readouterr().out
    assert requests["exit"] == 0  # the day's gate passes now that nothing is errored
    assert requests.get(MESSAGES) == sum(len(t) for t in errored.values())  # only they were called
    assert f"retried {len(errored)} errored test(s)" in out
    fixed = _doc(DAY)
    assert errored_tests(fixed) == {} and fixed.aggregate.errored_count == 0
    assert [r.test_id for r in fixed.semantic] == [r.test_id for r in hurt.semantic]
    unchanged = [r for r in hurt.semantic if r.test_id not in errored]
    assert all(r in fixed.semantic for r in unchanged)  # what passed stayed as it was
    [record] = fixed.provenance.reevaluations
    assert record.why is Why.RETRY_ERRORED and record.test_ids == sorted(errored)
    # Its cost is recorded: every rerank call of the retry, and the query embeddings it made.
    assert requests[MESSAGES] <= record.api_calls <= sum(requests.values()) and record.cost_usd > 0
    assert (fixed.provenance.model, fixed.provenance.date, fixed.provenance.kb_hash) == (
        hurt.provenance.model,
        hurt.provenance.date,
        hurt.provenance.kb_hash,
    )
    gate = GateDecision.model_validate_json((work / "results" / MODEL / DAY / GATE_FILE).read_text())
    assert gate.errored == 0
    diff = RegressionDiff.model_validate_json(
        (work / "results" / MODEL / DAY / REGRESSION_DIFF_FILE).read_text()
    )
    assert diff.diff is not None and diff.baseline_date == BEFORE
    assert all(d.head is None or d.head.score is not None for d in diff.diff.deltas)
    # The Dagster report is the merged document: the UI and `run` show the same evaluation.
    instance = dg.DagsterInstance.get()
    key = dg.MultiPartitionKey({"model": MODEL, "date": DAY})
    stored = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey("run_report"), asset_partitions=[str(key)]), limit=1
    ).records[0]
    assert stored.asset_materialization is not None
    assert str(stored.asset_materialization.metadata["results_json"].value).endswith(f"{DAY}/{RESULTS_FILE}")
    # History unchanged: the earlier evaluation and the expectation history files.
    assert (work / "results" / MODEL / BEFORE / RESULTS_FILE).read_bytes() == earlier
    assert (
        sorted((p.name, p.read_bytes()) for p in (work / "tenant/banks/semantic/history").iterdir())
        == history
    )

    again = _run(monkeypatch, ["--date", DAY, "--retry-errored"])
    assert MESSAGES not in again and "no errored test to retry" in capsys.readouterr().out


def test_retry_errored_without_an_evaluation_is_a_usage_error(
    work: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    requests = _run(monkeypatch, ["--date", DAY, "--retry-errored", "--cache", "refresh"])
    err = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("warning:")]
    assert requests == {"exit": 2} and len(err) == 1
    assert f"no evaluation of {MODEL} on {DAY}" in err[0]
    assert not (work / "results" / MODEL / DAY).exists()


class Project(NamedTuple):
    root: Path  # models.yaml, results, storage and cache
    kb: Path
    banks: Path

    def run(self, model: Mapping[str, object], *argv: str) -> int:
        """`run` of `model` (as the models file's entry `team`)."""
        models = self.root / "models.yaml"
        models.write_text(yaml.safe_dump({"schema_version": 1, "models": {"team": dict(model)}}))
        flags = {
            "--model": "team",
            "--kb": self.kb,
            "--banks-dir": self.banks,
            "--models-file": models,
            "--results-dir": self.root / "results",
            "--storage-dir": self.root / "storage",
            "--cache-dir": self.root / ".cache",
        }
        return cli.main(["run", *(str(part) for pair in flags.items() for part in pair), *argv])

    def document(self, date: str) -> RunDocument:
        return read_document(self.root / "results/team" / date / RESULTS_FILE)

    def gate(self, date: str) -> GateDecision:
        return GateDecision.model_validate_json((self.root / "results/team" / date / GATE_FILE).read_text())

    def history(self) -> list[tuple[str, bytes]]:
        folder = self.banks / "semantic/history"
        return sorted((p.name, p.read_bytes()) for p in folder.iterdir()) if folder.is_dir() else []


def team(url: str, mechanisms: Sequence[str] = MECHANISMS) -> dict[str, object]:
    """The team's system over HTTP answering `mechanisms` (the built-in local pipeline answers
    semantic when it is not among them): one attempt per call, so an outage errors at once."""
    local = (
        {} if "semantic" in mechanisms else {"embedder": {"kind": "local"}, "reranker": {"kind": "cosine"}}
    )
    system = {"kind": "http", "url": url, "mechanisms": list(mechanisms)}
    return {"system": system, "concurrency": 4, "retry": {"max_attempts": 1}, **local}


@pytest.fixture(params=["sample", "tenant"])
def project(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    monkeypatch.setenv("DAGSTER_HOME", str(quiet_home(tmp_path / "dagster_home")))
    if request.param == "tenant":
        shutil.copytree(TENANT, tmp_path / "data")
        return Project(tmp_path, tmp_path / "data/kb.yaml", tmp_path / "data/banks")
    shutil.copytree(REPO / "kb", tmp_path / "kb")
    shutil.copytree(REPO / "test_banks", tmp_path / "test_banks")
    return Project(tmp_path, tmp_path / "kb", tmp_path / "test_banks")


def _errored(doc: RunDocument) -> dict[str, list[str]]:
    """The errored tests of every bank (semantic: one trial per test here)."""
    rows: dict[str, Sequence[ResultBase]] = {
        "semantic": doc.semantic,
        "state": doc.state,
        "pattern": doc.pattern,
        "always": doc.always,
    }
    found = {bank: sorted(r.test_id for r in rs if r.score is None) for bank, rs in rows.items()}
    return {bank: ids for bank, ids in found.items() if ids}


def _rows(doc: RunDocument) -> list[object]:
    """Every result row as the system made it (latency is not part of what it answered)."""
    semantic = [r.model_copy(update={"latency_ms": 0.0}) for r in doc.semantic]
    return [*semantic, *doc.state, *doc.pattern, *doc.always]


def test_retry_errored_calls_the_teams_system_again_for_the_errored_tests_of_every_bank(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    system = ReferenceSystem(project.kb, project.banks)
    history = project.history()
    with serve(system) as url:
        clean_code = project.run(team(url), "--date", BEFORE)
        clean = project.document(BEFORE)
        earlier = (project.root / "results/team" / BEFORE / RESULTS_FILE).read_bytes()
        system.outage = Outage(rate=0.4, seed=27)
        assert project.run(team(url), "--date", DAY) != 0
        hurt = project.document(DAY)
        errored = _errored(hurt)
        assert list(errored) == [m.value for m in Mechanism]  # some tests of every bank
        assert sum(map(len, errored.values())) < len(_rows(hurt))  # a partial outage
        assert not project.gate(DAY).passed
        system.outage = None
        system.calls.clear()
        capsys.readouterr()

        # Answers only merge into the evaluation from the implementations that made it.
        moved = team(url, [m for m in MECHANISMS if m != "state"])
        assert project.run(moved, "--date", DAY, "--retry-errored") == 2
        err = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("warning:")]
        assert len(err) == 1 and "other implementations (state http → reference)" in err[0], err
        assert not system.calls and not (project.root / "results/team" / DAY / REEVALUATIONS_FILE).exists()

        code = project.run(team(url), "--date", DAY, "--retry-errored")
        out = capsys.readouterr().out
        # Only the errored tests were asked again, once each, bank by bank.
        assert dict(system.calls) == {bank: len(ids) for bank, ids in errored.items()}
        retried = sum(map(len, errored.values()))
        assert f"retried {retried} errored test(s)" in out and "not retried" not in out

        fixed = project.document(DAY)
        assert fixed.aggregate.errored_count == 0 and _errored(fixed) == {}
        assert _rows(fixed) == _rows(clean)  # what a day without the outage gave
        [record] = fixed.provenance.reevaluations
        assert (
            record.why is Why.RETRY_ERRORED and {m.value: ids for m, ids in record.banks.items()} == errored
        )
        assert record.api_calls == retried
        assert fixed.provenance.identity == hurt.provenance.identity
        gate = project.gate(DAY)
        assert gate.errored == 0 and code == exit_for_gate(gate.status) == clean_code
        assert (gate.status, gate.combined_score) == (
            project.gate(BEFORE).status,
            clean.aggregate.combined_score,
        )
        diff = RegressionDiff.model_validate_json(
            (project.root / "results/team" / DAY / REGRESSION_DIFF_FILE).read_text()
        )
        assert diff.diff is not None and diff.baseline_date == BEFORE
        assert all(d.head is None or d.head.score is not None for d in diff.diff.deltas)
        # History unchanged: the earlier evaluation and the expectation history files.
        assert (project.root / "results/team" / BEFORE / RESULTS_FILE).read_bytes() == earlier
        assert project.history() == history

        system.calls.clear()
        again = project.run(team(url), "--date", DAY, "--retry-errored")
        assert "team: no errored test to retry" in capsys.readouterr().out
        assert not system.calls and again == code  # no call; the stored verdict's exit code


def test_errored_tests_of_the_built_in_mechanisms_are_named_not_retried(
    tmp_path: Path,
    tenant: Path,
    local_embeddings: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("DAGSTER_HOME", str(quiet_home(tmp_path / "dagster_home")))
    warm(tmp_path / ".cache", local_embeddings)  # the built-in semantic pipeline is not what this is about
    project = Project(tmp_path, tenant / "kb.yaml", tenant / "banks")
    local = {"embedder": {"kind": "local"}, "reranker": {"kind": "cosine"}}
    project.run(local, "--date", DAY)
    # An error the built-in pattern mechanism can give (it calls no service): a rule timed out.
    path = project.root / "results/team" / DAY / RESULTS_FILE
    doc = read_document(path)
    timed_out = doc.pattern[0].model_copy(
        update={"status": ResultStatus.ERRORED, "outcome": None, "error": "pattern timed out"}
    )
    path.write_text(doc.model_copy(update={"pattern": [timed_out, *doc.pattern[1:]]}).model_dump_json())
    runs = len(dg.DagsterInstance.get().get_runs())
    capsys.readouterr()
    code = project.run(local, "--date", DAY, "--retry-errored")
    out = capsys.readouterr().out
    line = (
        "team: not retried, errored in the built-in mechanisms (no service is called, so retrying "
        f"gives the same result): pattern: {timed_out.test_id}; fix the cause and evaluate again with --force"
    )
    assert f"  {line}" in out.splitlines() and "retried" not in out.replace("not retried", "")
    assert len(dg.DagsterInstance.get().get_runs()) == runs  # nothing evaluated, nothing merged
    assert code == exit_for_gate(project.gate(DAY).status)
