"""A whole evaluation whose outputs (IO manager tables and documents, reports) go to an
S3-compatible server that the test starts (moto's standalone server, from the lock file), read
back through the same URIs. Local paths stay the default and are covered by every other test."""

from __future__ import annotations

import io
import json
import shutil
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import pandas as pd
import pytest
from upath import UPath

from eval_pipeline.cli import main
from eval_pipeline.cli.exit_status import exit_for_gate
from eval_pipeline.core.dates import today_utc
from eval_pipeline.core.scoring.run_document import (
    COMPARISON_DIR,
    COMPARISON_FILE,
    GATE_FILE,
    RESULTS_FILE,
    RunDocument,
)
from eval_pipeline.core.verdicts.run_gate import GateDecision
from eval_pipeline.definitions import build_resources
from eval_pipeline.defs.io_managers import ParquetIOManager
from eval_pipeline.defs.resources import InputsResource, ProvidersResource, StorageResource
from eval_pipeline.orchestration.execution import run_all
from tests.conftest import TENANT
from tests.defs.conftest import project_storage_instance

REPO = Path(__file__).resolve().parents[2]
DATE = "2026-11-20"
MODELS = ["local-minilm", "local-hybrid"]


def test_a_whole_evaluation_writes_its_outputs_to_s3(s3: str, tenant: Path, tmp_path: Path) -> None:
    shutil.copy(REPO / "models.yaml", tmp_path / "models.yaml")
    storage = StorageResource(
        storage_dir=str(tmp_path / "storage"),
        results_dir=f"{s3}/results",
        calibration_dir=str(tmp_path / "calibration"),
        outputs_uri=f"{s3}/outputs",
    )
    resources = build_resources(
        InputsResource(kb_path=str(tenant / "kb.yaml"), banks_dir=str(tenant / "banks")),
        storage,
        ProvidersResource(models_file=str(tmp_path / "models.yaml"), cache_dir=str(tmp_path / "cache")),
    )
    with project_storage_instance() as instance:
        outcomes = run_all(DATE, MODELS, resources, instance)
    assert [o.name for o in outcomes] == ["shared", *MODELS, "comparison"]
    assert all(o.failures == [] for o in outcomes), outcomes

    for model in MODELS:
        run = UPath(f"{s3}/results/{model}/{DATE}")
        doc = RunDocument.model_validate_json(run.joinpath(RESULTS_FILE).read_text())
        assert (doc.provenance.model, doc.provenance.date) == (model, DATE)
        assert (len(doc.semantic), len(doc.state), len(doc.pattern), len(doc.always)) == (8, 3, 4, 2)
        assert doc.provenance.model in run.joinpath("report.md").read_text()
        assert {p.name for p in run.iterdir()} >= {RESULTS_FILE, "report.md", "gate.json", COMPARISON_FILE}
        # The HTML report read the model's history back from the bucket.
        assert f'data-model="{model}" data-bank="combined"' in run.joinpath("report.html").read_text()
    comparison = json.loads(UPath(f"{s3}/results/{COMPARISON_DIR}/{DATE}/{COMPARISON_FILE}").read_text())
    assert [m["model"] for m in comparison["models"]] == MODELS

    # The IO managers' values went there too (one object per partition), and nothing local.
    tables = {p.name for p in UPath(f"{s3}/outputs/tables").iterdir()}
    assert {"semantic_retrievals", "state_activations"} <= tables
    assert UPath(f"{s3}/outputs/documents/run_report/{DATE}/local-minilm.json").exists()
    assert not (tmp_path / "results").exists()
    assert not any((tmp_path / "storage" / kind).exists() for kind in ("tables", "documents"))


def test_a_value_is_stored_and_read_back_in_one_request_each(s3: str) -> None:
    # Each request to an object store is a round trip: the IO managers neither make directories
    # there nor look for an unpartitioned file, and read a value without asking for its size
    # first (four requests to store, two to read, before).
    base = UPath(f"{s3}/one-request")
    manager = ParquetIOManager(base_path=base)
    frame = pd.DataFrame({"x": [1, 2]})
    key = dg.AssetKey("value")
    calls: list[str] = []

    def called(model: Any, **_: Any) -> None:
        calls.append(model.name)

    events = base.fs.s3.meta.events  # botocore's: every S3 operation s3fs makes
    events.register("before-call.s3", called)
    try:
        manager.handle_output(dg.build_output_context(asset_key=key, partition_key=DATE), frame)
        stored, calls[:] = list(calls), []
        loaded = manager.load_input(dg.build_input_context(asset_key=key, partition_key=DATE))
    finally:
        events.unregister("before-call.s3", called)
    assert isinstance(loaded, pd.DataFrame) and loaded.equals(frame)
    assert (stored, calls) == (["PutObject"], ["GetObject"])


def _cli_on_the_bucket(s3: str, root: Path, environment: pytest.MonkeyPatch) -> None:
    """The CLI in `root`, its code location's reports and values under `cli-*` in the bucket."""
    environment.chdir(root)
    environment.setenv("DAGSTER_HOME", str(root / "dagster_home"))
    environment.setenv("EVAL_PIPELINE_RESULTS_URI", f"{s3}/cli-results")
    environment.setenv("EVAL_PIPELINE_OUTPUTS_URI", f"{s3}/cli-outputs")


@dataclass(frozen=True)
class FirstRun:
    root: Path
    argv: list[str]
    date: str
    code: int
    out: str
    err: str


@pytest.fixture(scope="module")
def first_run(s3: str, tmp_path_factory: pytest.TempPathFactory) -> FirstRun:
    """Today's `run` of the tenant onto the bucket, made once in a project of its own: the CLI
    test reads what it wrote, the rerun test runs again from it (nothing else writes there)."""
    root = tmp_path_factory.mktemp("cli-on-the-bucket")
    shutil.copytree(TENANT, root / "tenant")
    shutil.copy(REPO / "models.yaml", root / "models.yaml")
    argv = ["run", "--model", MODELS[0], "--kb", str(root / "tenant" / "kb.yaml")]
    argv += ["--banks-dir", str(root / "tenant" / "banks")]
    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as environment, redirect_stdout(out), redirect_stderr(err):
        _cli_on_the_bucket(s3, root, environment)
        date = today_utc()
        code = main(argv)
    return FirstRun(root, argv, date, code, out.getvalue(), err.getvalue())


def test_the_cli_run_writes_where_the_location_does_and_reads_its_verdict_back(
    s3: str, first_run: FirstRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A team that points the code location at a bucket gets the CLI's reports there too, and the
    # exit code from what was written there: never a local copy, never "no results".
    run = UPath(f"{s3}/cli-results/{MODELS[0]}/{first_run.date}")
    gate = GateDecision.model_validate_json(run.joinpath(GATE_FILE).read_text())
    assert first_run.code == exit_for_gate(gate.status), first_run.out + first_run.err
    assert f"results: {run}/{RESULTS_FILE}" in first_run.out
    assert "no results were written" not in first_run.err
    assert UPath(f"{s3}/cli-outputs/documents/run_report/{first_run.date}/{MODELS[0]}.json").exists()
    assert not (first_run.root / "results").exists()
    assert not any((first_run.root / "storage" / kind).exists() for kind in ("tables", "documents"))

    # --results-dir still wins over the environment (in a project of its own: the first run's
    # instance stays as it left it, for the rerun test).
    shutil.copy(REPO / "models.yaml", tmp_path / "models.yaml")
    _cli_on_the_bucket(s3, tmp_path, monkeypatch)
    code = main([*first_run.argv, "--results-dir", str(tmp_path / "mine")])
    assert code == exit_for_gate(gate.status)
    assert (tmp_path / "mine" / MODELS[0] / first_run.date / RESULTS_FILE).is_file()


def test_a_rerun_with_nothing_changed_stands_on_the_reports_in_the_bucket(
    s3: str, first_run: FirstRun, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert "up to date:" not in first_run.out
    _cli_on_the_bucket(s3, first_run.root, monkeypatch)
    assert main(first_run.argv) == first_run.code
    assert "up to date:" in capsys.readouterr().out
    # The bucket's results.json edited: no longer what its run wrote, so the next run evaluates.
    results = UPath(f"{s3}/cli-results/{MODELS[0]}/{first_run.date}/{RESULTS_FILE}")
    results.write_text(results.read_text() + "\n")
    assert main(first_run.argv) == first_run.code
    assert "up to date:" not in capsys.readouterr().out
