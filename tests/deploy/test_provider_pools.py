"""Two concurrent runs of one API model share the provider's limit through Dagster's pools.

A real SQLite instance in a temp dir with `concurrency: pools: default_limit: 1`, two evaluation
runs of the same Claude-reranked model (two dates, response cache off so both really call) in two
processes at once, forked from the project's worker server as `run --parallel` starts its model
runs (it imported Dagster and the graph once), the real SDKs against the emulator. Counted, not timed:
the emulator records when each request arrived, and the most reranks within any window must stay
within one model's allowance.
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import dagster as dg
import pytest
import yaml

from eval_pipeline.core.scoring.run_document import RESULTS_FILE, read_document
from eval_pipeline.definitions import build_resources
from eval_pipeline.defs.automation import date_job, model_job
from eval_pipeline.defs.partitions import model_date_key, sync_model_partitions
from eval_pipeline.defs.pools import provider_pools
from eval_pipeline.defs.resources import InputsResource, ProvidersResource, StorageResource
from eval_pipeline.orchestration.execution import dagster_yaml
from eval_pipeline.orchestration.parallel import CONTEXT
from eval_pipeline.orchestration.stages import evaluation_definitions, run_stage
from eval_pipeline.providers.models import load_models
from eval_pipeline.testing.emulator.server import start_emulator

MODEL = "pooled-haiku"
RATE = 600  # reranks per minute: the limiter's bucket holds RATE / 60 = 10
TRIALS = 5  # 8 semantic tests x 5 trials = 40 reranks a run: 3 s of pacing, well past one bucket
DATES = ["2026-11-10", "2026-11-11"]
RERANK = "POST /v1/messages"


def _models_file(path: Path) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "schema_version": 1,
                "models": {
                    MODEL: {
                        "embedder": {"kind": "voyage", "model_id": "voyage-3.5"},
                        "reranker": {"kind": "claude", "model_id": "claude-haiku-4-5"},
                        "rate_limit_per_min": RATE,
                        "concurrency": 4,
                        "trials": TRIALS,
                    }
                },
            }
        )
    )
    return path


def _resources(tenant: Path, root: Path, base_url: str, voyage_base_url: str) -> dict[str, object]:
    return build_resources(
        InputsResource(kb_path=str(tenant / "kb.yaml"), banks_dir=str(tenant / "banks")),
        StorageResource(storage_dir=str(root / "storage"), results_dir=str(root / "results")),
        ProvidersResource(
            models_file=str(root / "models.yaml"),
            cache_dir=str(root / "cache"),
            cache_mode="off",
            anthropic_api_key="sk-ant-test-not-a-real-key",
            voyage_api_key="pa-test-not-a-real-key",
            anthropic_base_url=base_url,
            voyage_base_url=voyage_base_url,
        ),
    )


def _evaluate_model(
    tenant: Path, root: Path, urls: tuple[str, str], date: str, environ: dict[str, str]
) -> list[str]:
    """One model run in a process of its own, on the shared instance; its step failures. The
    server it forks from keeps the environment it started with: the test's is handed over."""
    os.environ.clear()
    os.environ.update(environ)
    defs = evaluation_definitions(_resources(tenant, root, *urls))
    with dg.DagsterInstance.from_config(str(root / "dagster_home")) as instance:
        return run_stage(date, model_job.name, model_date_key(MODEL, date), defs, instance).failures


def test_two_concurrent_runs_of_one_api_model_share_the_providers_rate(
    tenant: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    models = _models_file(tmp_path / "models.yaml")
    assert provider_pools(load_models(models)[MODEL]) == ["anthropic", "voyage"]
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(dagster_yaml(home))  # the project's settings, as `run` writes them
    with start_emulator() as emulator, dg.DagsterInstance.from_config(str(home)) as instance:
        urls = (emulator.base_url, emulator.voyage_base_url)
        defs = evaluation_definitions(_resources(tenant, tmp_path, *urls))
        sync_model_partitions(instance, [MODEL])
        for date in DATES:
            assert run_stage("shared", date_job.name, date, defs, instance).failures == []
        with ProcessPoolExecutor(max_workers=2, mp_context=CONTEXT) as runs:
            environ = dict(os.environ)
            jobs = [runs.submit(_evaluate_model, tenant, tmp_path, urls, date, environ) for date in DATES]
            failures = [job.result() for job in jobs]
        assert failures == [[], []]

        # Both runs evaluated every trial through the API ...
        for date in DATES:
            doc = read_document(tmp_path / "results" / MODEL / date / RESULTS_FILE)
            assert len(doc.semantic) == 8 * TRIALS and all(r.status != "errored" for r in doc.semantic)
        assert emulator.stats["requests"][RERANK] == 2 * 8 * TRIALS
        # ... one after the other: exactly one of them waited for the pool's slot ...
        waited = [
            run.run_id
            for run in instance.get_runs()
            if any(
                "waiting for a slot of the 'anthropic' pool" in e.message
                for e in instance.all_logs(run.run_id)
            )
        ]
        assert len(waited) == 1
        assert instance.event_log_storage.get_concurrency_info("anthropic").active_slot_count == 0
        assert emulator.stats["statuses"].get("429", 0) == 0
